import FanoutAPNs
import FanoutWire
import UVLoop

/// `fanout serve` without sockets, on the caller's thread: the real servers (`APNsServer`, the delegate of every
/// connection), one event loop each, joined by a `ServeCluster` as `fanout serve --workers N` joins them (one
/// service: no cluster), the wall clock fixed. A client's bytes go in through an in-memory `H2ServerConnection`
/// (`open`, then its `receive`); `settle` steps the loops until every message between the workers is delivered
/// (forwarded requests judged by the worker owning the token, their answers written back, broadcasts and channel
/// changes heard). Built once and reused connection after connection (the fuzz target, the tests).
/// Confined to the thread that made it.
public final class InMemoryServe {
    public let servers: [APNsServer]
    public let cluster: ServeCluster?
    private let loops: [EventLoop]
    /// Loop steps `settle` may take before it declares the workers stuck.
    public static let maxSettleRounds = 64

    /// A server per service (service `k` must have been built as worker `k` of `services.count`).
    public init(services: [APNsService], options: ServeOptions = ServeOptions(), wallMillis: Int64) throws {
        precondition(!services.isEmpty, "at least one service")
        let cluster = services.count > 1 ? ServeCluster(serving: services) : nil
        var loops: [EventLoop] = []
        var servers: [APNsServer] = []
        for (k, service) in services.enumerated() {
            let loop = try EventLoop()
            loops.append(loop)
            let server = try APNsServer(loop: loop, service: service, options: options, cluster: cluster, index: k)
            server.fixedWallMillis = wallMillis
            server.fixedNowNanos = 0  // held answers (--latency, stalls) wait for `advance(toNanos:)`, not a timer
            try server.openInbox()
            servers.append(server)
        }
        self.cluster = cluster
        self.loops = loops
        self.servers = servers
    }

    /// A client's connection to worker `worker`, served by it (its SETTINGS already written to `output`).
    /// Over TLS with `tls` (a server's context: `receive` takes ciphertext, `output` gets records); arrived on
    /// `role`'s listener (with `--manage-listen` in the options).
    public func open(
        on worker: Int, tls: TLSContext? = nil, serving role: ServeListener.Role = .all,
        output: @escaping (UnsafeRawBufferPointer) -> Void
    ) throws -> H2ServerConnection {
        let server = servers[worker]
        let connection =
            if let tls {
                try H2ServerConnection(output: output, tls: tls, settings: server.connectionSettings)
            } else {
                H2ServerConnection(output: output, settings: server.connectionSettings)
            }
        try server.adopt(connection, serving: role)
        return connection
    }

    /// Steps the loops until no message waits between the workers; returns the rounds taken (0: none waited).
    /// Traps past `maxSettleRounds` (a message that keeps causing others: a bug).
    @discardableResult
    public func settle() -> Int {
        guard let cluster else { return 0 }
        var rounds = 0
        while !cluster.isIdle {
            rounds += 1
            precondition(rounds <= Self.maxSettleRounds, "the workers' messages did not settle")
            for loop in loops { loop.runNoWait() }
        }
        return rounds
    }

    /// One turn of worker `worker`'s loop alone (its inbox read once), for tests of the order between workers.
    public func step(_ worker: Int) { loops[worker].runNoWait() }

    /// Moves the harness's clock (monotonic nanoseconds, 0 when it was built: the servers' start) to `nanos`:
    /// every answer held until then (`--latency`, stall windows) is sent, on every worker; then `settle`.
    public func advance(toNanos nanos: UInt64) {
        for server in servers {
            server.fixedNowNanos = nanos
            server.releaseDueAnswers()
        }
        settle()
    }

    /// Answers held now, all workers.
    public var heldAnswers: Int { servers.reduce(0) { $0 + $1.held.count } }

    /// Requests judged so far, all workers (each request is judged once: where it arrived, or by the worker owning
    /// its token).
    public var judged: Int { servers.reduce(0) { $0 + $1.service.stats.requests } }

    /// Requests forwarded to another worker and not answered yet, all workers.
    public var forwardedWaiting: Int { servers.reduce(0) { $0 + $1.forwardedWaiting } }

    /// Connections served and not ended, all workers.
    public var openConnections: Int { servers.reduce(0) { $0 + $1.openConnections } }

    /// Whether every service's identities hold (its answers and its devices' deliveries add up).
    public var identitiesHold: Bool {
        servers.allSatisfy { $0.service.stats.identitiesHold && $0.service.pipeline.accounting.identitiesHold }
    }

    /// Ends every connection still open, closes the inboxes and the loops.
    public func close() throws {
        for server in servers {
            for connection in Array(server.connections.values) { connection.abort(reason: "closed by the harness") }
            server.closeInbox()
            server.closeDrainTimer()
        }
        for loop in loops {
            while loop.runNoWait() {}
            try loop.close()
        }
    }
}
