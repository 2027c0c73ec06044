import FanoutAPNs
import FanoutCore
import FanoutMetrics
import FanoutWire
import Foundation
import UVLoop

/// `fanout serve` on one libuv loop: a TCP listener, HTTP/2 (nghttp2) over cleartext or TLS (OpenSSL), every
/// request judged and applied by the `APNsService`, a sweep once a second (progress, timeouts, the end).
public final class APNsServer: H2ServerDelegate {
    // Confined to its loop's thread; the callbacks below capture it `unowned`, not weak (a weak reference gives
    // an object a side table, and every retain and release of it the runtime's slow path: it is the delegate of
    // every connection, retained per request). Its handles are closed before it goes.
    public let loop: EventLoop
    public let service: APNsService
    public let options: ServeOptions
    private let tls: TLSContext?
    private var listener: TCPListener?
    /// `--manage-listen`: the channel-management listener (its socket, or its host and port).
    private var manageListener: TCPListener?
    private let manageSocket: Int32?
    /// Whether the two kinds of request have listeners of their own (checked per request only then).
    let splitListeners: Bool
    /// The management listener's port (0 without `--manage-listen`).
    public private(set) var managePort = 0
    private var sweep: UVLoop.Timer?
    private lazy var deadlines = options.deadlines
    private var deadline: UVLoop.Timer?
    /// Runs once the shutdown's drain time is over: every connection still open, or still flushing, is closed.
    private var drainDeadline: UVLoop.Timer?
    /// The open streams of every connection on this loop, against `maxOpenStreamsPerLoop`.
    public let streamBudget: StreamBudget
    private var signals: [SignalWatcher] = []
    /// `options.signals`: this loop's subscription, a wakeup that begins the shutdown.
    private var interrupt: Wakeup?
    private var subscription: Int?
    @exclusivity(unchecked) var connections: [ObjectIdentifier: H2ServerConnection] = [:]
    public internal(set) var connectionStats = ConnectionStats()
    public private(set) var startNanos: UInt64 = 0
    public private(set) var endNanos: UInt64 = 0
    private(set) var stoppingSinceNanos: UInt64?
    /// The port bound (useful with port 0).
    public private(set) var port = 0
    /// Runs once when shutdown begins (before the GOAWAYs): what else lives on this loop (the trigger) stops.
    public var onShutdown: (() -> Void)?
    /// Once a second: (seconds since start, this server) for a progress line.
    public var onProgress: ((Double, APNsServer) -> Void)?
    private var lastRequests = 0
    public private(set) var lastRatePerSecond = 0.0
    /// Several workers: the cluster, this worker's number, its inbox, a socket bound for it, and the requests
    /// forwarded to other workers, waiting for their answers.
    let cluster: ServeCluster?
    public let index: Int
    var inbox: Wakeup?
    private let socket: Int32?
    @exclusivity(unchecked) var forwarded = ForwardedRequests<H2ServerConnection, H2Request>()
    /// Several workers: the messages for each worker gathered during one read or one inbox drain, handed over at its
    /// end in one batch per worker (one lock, one wakeup; `flushOutbox`), not one at a time.
    @exclusivity(unchecked) var outbox: [[ClusterMessage]] = []
    /// The inbox's messages being handled (swapped out of the cluster; emptied, its storage kept, after each drain).
    @exclusivity(unchecked) var inboxMessages: [ClusterMessage] = []
    /// The connections whose answers to forwarded requests are being written during an inbox drain: their output is
    /// held and flushed once at its end (one write for the batch, not one per answer).
    @exclusivity(unchecked) var answering: [H2ServerConnection] = []
    private var drainedReported = false
    /// Every worker has drained: this one closes up once no broadcast waits for its fan-out here and no part of one
    /// answered here is still to come from a peer (a broadcast may sit in the inbox ahead of `.allDrained`).
    var allDrainedSeen = false
    /// The wall clock requests are judged by (UNIX milliseconds); nil: `WallClock`. Fixed in the in-memory
    /// harness (APNsServer+Memory.swift), so that a provider token's age does not depend on when it runs.
    public var fixedWallMillis: Int64?
    /// `--faults` and `--latency` (APNsServer+Faults.swift): what to inject; whether requests draw a fault and
    /// whether answers may be held (the one branch each that the normal path pays); answers held until due, this
    /// loop's draws so far, the pushes refused and not back yet, the timer armed for the earliest held answer and
    /// the one sending GOAWAYs.
    let faults: ServeFaults
    let drawsFaults: Bool
    let holdsAnswers: Bool
    @exclusivity(unchecked) var held = HeldAnswers()
    @exclusivity(unchecked) var faultDraws: UInt64 = 0
    /// Each push identity's arrivals for the fault draws: the cluster's (shared by every loop) or this loop's own.
    lazy var faultAttempts: FaultAttempts = cluster?.faultAttempts ?? FaultAttempts()
    var faultTape = JSONTape()
    @exclusivity(unchecked) var latencyDraws: UInt64 = 0
    /// The pushes refused and not back yet: the cluster's (a retry may reach another loop) or this loop's own.
    lazy var retries: RetryLedger = cluster?.retries ?? RetryLedger()
    var holdTimer: UVLoop.Timer?
    var goAwayTimer: UVLoop.Timer?
    /// The clock held answers and stall windows are timed by (monotonic nanoseconds); nil: `uv_hrtime`. Set by the
    /// in-memory harness, which then releases due answers itself (no timer is armed).
    public var fixedNowNanos: UInt64?

    public init(
        loop: EventLoop, service: APNsService, options: ServeOptions, cluster: ServeCluster? = nil, index: Int = 0,
        socket: Int32? = nil, manageSocket: Int32? = nil
    ) throws {
        self.manageSocket = manageSocket
        splitListeners = manageSocket != nil || options.managePort != nil
        self.loop = loop
        self.service = service
        self.options = options
        self.cluster = cluster
        self.index = index
        self.socket = socket
        streamBudget = StreamBudget(limit: options.maxOpenStreamsPerLoop)
        faults = options.faults
        drawsFaults = options.faults.sharePPM > 0
        holdsAnswers = options.faults.holdsAnswers
        if let cert = options.certificateFile, let key = options.keyFile {
            tls = try TLSContext(certificateFile: cert, keyFile: key)
        } else {
            tls = nil
        }
    }

    /// Binds and listens; returns the port.
    @discardableResult
    public func listen() throws -> Int {
        let listener: TCPListener
        if let socket {
            listener = try TCPListener(loop: loop, socket: socket) { [unowned self] stream in
                self.accept(stream, serving: self.splitListeners ? .push : .all)
            }
        } else {
            listener = try TCPListener(loop: loop, host: options.host, port: options.port) { [unowned self] stream in
                self.accept(stream, serving: self.splitListeners ? .push : .all)
            }
        }
        self.listener = listener
        port = listener.localPort
        if splitListeners {
            let manage: TCPListener
            if let manageSocket {
                manage = try TCPListener(loop: loop, socket: manageSocket) { [unowned self] stream in
                    self.accept(stream, serving: .manage)
                }
            } else {
                manage = try TCPListener(loop: loop, host: options.manageHost, port: options.managePort ?? 0) {
                    [unowned self] stream in self.accept(stream, serving: .manage)
                }
            }
            manageListener = manage
            managePort = manage.localPort
        }
        return port
    }

    /// Serves until the duration passes or SIGINT/SIGTERM, then shuts down gracefully: stop accepting, GOAWAY
    /// `Shutdown`, let in-flight streams finish (at most `drainSeconds`), close everything.
    public func run() throws {
        if listener == nil { try listen() }
        startNanos = EventLoop.hrtimeNanos
        if let hub = options.signals {
            // The session's watchers: one that came before this loop started (while the population was built or
            // registered) wakes it at once, and shuts it down as if it came now.
            let interrupt = try Wakeup(loop: loop) { [unowned self] _ in self.beginShutdown() }
            interrupt.isReferenced = false
            self.interrupt = interrupt
            let sender = interrupt.sender
            subscription = hub.subscribe { sender.send() }
        } else {
            for signal in [SIGINT, SIGTERM] {
                signals.append(
                    try SignalWatcher(loop: loop, signal: signal) { [unowned self] _, _ in self.beginShutdown() })
            }
        }
        try openInbox()
        let sweep = UVLoop.Timer(loop: loop) { [unowned self] _ in self.tick() }
        sweep.start(afterMillis: 1000, repeatMillis: 1000)
        self.sweep = sweep
        startGoAwayTimer()
        if let d = options.durationSeconds {
            let deadline = UVLoop.Timer(loop: loop) { [unowned self] timer in
                timer.close()
                self.deadline = nil
                self.beginShutdown()
            }
            deadline.start(afterMillis: UInt64((d * 1000).rounded()))
            self.deadline = deadline
        }
        loop.run()
        if let subscription { options.signals?.unsubscribe(subscription) }
        subscription = nil
        interrupt?.close()
        interrupt = nil
        drainDeadline?.close()
        drainDeadline = nil
        endNanos = EventLoop.hrtimeNanos
        connectionStats[.acceptErrors] = listener?.acceptErrors ?? 0
        // With several loops the cluster's ledger is read once, when every loop has stopped (ServeWorkers).
        if drawsFaults && cluster == nil { connectionStats.faults.retries = retries.final }
        service.closeInterval(last: true)  // the last, partial second
    }

    public var elapsedSeconds: Double {
        Double((endNanos > 0 ? endNanos : EventLoop.hrtimeNanos) &- startNanos) / 1e9
    }
    public var openConnections: Int { connections.count }

    /// Stops accepting and sends GOAWAY to every connection (idempotent); with several workers, every other worker
    /// is told to do the same at once (`ClusterMessage.shutdown`): serving ends at one moment for the whole serve.
    public func beginShutdown() {
        guard stoppingSinceNanos == nil else { return }
        stoppingSinceNanos = EventLoop.hrtimeNanos
        if let cluster {
            cluster.stopping.store(true, ordering: .releasing)
            for k in 0..<cluster.count where k != index { cluster.send(.shutdown, to: k) }
        }
        onShutdown?()
        onShutdown = nil
        listener?.close()
        manageListener?.close()
        deadline?.close()
        deadline = nil
        for s in signals { s.close() }
        if let subscription { options.signals?.unsubscribe(subscription) }
        subscription = nil
        interrupt?.close()
        interrupt = nil
        stopFaults()  // held answers go now
        for c in Array(connections.values) { c.goAway(reason: "Shutdown") }
        let drain = UVLoop.Timer(loop: loop) { [unowned self] timer in
            timer.close()
            self.drainDeadline = nil
            self.drainTimeUp()
        }
        drain.start(afterMillis: UInt64((options.drainSeconds * 1000).rounded()))
        // Not referenced: it does not keep the loop running once everything else has closed, but it closes what
        // is still open (or flushing) when the drain time is over.
        drain.isReferenced = false
        drainDeadline = drain
        finishIfDrained()
    }

    /// The drain time is over: connections still open end now, and every TCP handle left on the loop (the
    /// listener, connections already finished but still flushing to a client that does not read) is closed, so
    /// the loop returns and the run folder is written.
    private func drainTimeUp() {
        for c in Array(connections.values) { c.abort(reason: "Shutdown (drain time over)", replacing: true) }
        loop.closeRemainingHandles(tcpOnly: true)
        finishIfDrained()
    }

    private func finishIfDrained() {
        guard stoppingSinceNanos != nil else { return }
        guard connections.isEmpty else { return }
        if let cluster {
            // Peers may still forward requests here until every worker has drained.
            if !drainedReported {
                drainedReported = true
                cluster.markDrained(index)
            }
            return
        }
        sweep?.close()
        sweep = nil
    }

    /// The drain timer of a shutdown begun in memory (`InMemoryServe.close`; a real run closes it when its loop
    /// returns).
    func closeDrainTimer() {
        drainDeadline?.close()
        drainDeadline = nil
    }

    func closeUp() {
        sweep?.close()
        sweep = nil
        inbox?.close()
        inbox = nil
    }

    private func tick() {
        flushOutbox()  // every path that posts flushes at its end: nothing is expected here
        service.closeInterval()
        let now = EventLoop.hrtimeNanos
        for c in Array(connections.values) { c.sweep(now: now, deadlines) }
        let requests = service.stats.requests
        lastRatePerSecond = Double(requests - lastRequests)
        lastRequests = requests
        onProgress?(Double(now &- startNanos) / 1e9, self)
        finishIfDrained()
    }

    private func accept(_ stream: TCPStream, serving role: ServeListener.Role) {
        guard stoppingSinceNanos == nil else {
            stream.close()
            return
        }
        guard connections.count < options.maxConnectionsPerLoop else {
            connectionStats[.refused] += 1
            stream.close()
            return
        }
        do {
            let connection = try H2ServerConnection(stream: stream, tls: tls, settings: connectionSettings)
            try register(connection, serving: role)
        } catch {
            connectionStats.endReasons["\(error)", default: 0] += 1
            stream.close()
        }
    }

    // MARK: H2ServerDelegate

    public func connection(_ connection: H2ServerConnection, received request: H2Request) {
        // The connection's provider-token state, set at accept (only this server sets `context`).
        guard let context = connection.context else { return }
        // A client holding too many unsent answer bytes (it does not read what it asked for) gets no more until
        // they drain: refused before anything is judged or applied, so it may retry.
        if _slowPath(connection.unsentAnswerBytes > 0)
            && (connection.unsentAnswerBytes >= options.maxUnsentBytesPerConnection
                || streamBudget.unsentAnswerBytes >= options.maxUnsentBytesPerLoop)
        {
            connection.refuse(request)
            return
        }
        // Serving has ended on another worker, whose GOAWAY may be on its way to a client that fails what it had in
        // flight and resends it here (aioapns does): refused, not applied (RST_STREAM REFUSED_STREAM: not processed,
        // safe to retry), and this worker stops now instead of at its inbox's turn.
        if let cluster, _slowPath(stoppingSinceNanos == nil && cluster.stopping.load(ordering: .acquiring)) {
            connection.refuse(request)
            beginShutdown()
            return
        }
        let state = unsafeDowncast(context, to: ProviderAuth.ConnectionState.self)
        let input = RequestInput(
            method: request.method, path: request.path, headers: request.headers, body: request.body,
            arrivalNanos: request.arrivalNanos)
        // `--manage-listen`: a request for the other listener's API is a path this host does not serve.
        if _slowPath(splitListeners) && ServeListener.misplaced(request.path, on: state.serves) {
            connectionStats[.misplacedRequests] += 1
            answer(connection, request, service.injectedAnswer(.badPath, input))
            return
        }
        var became = false
        var identity: (key: UInt64, attempt: UInt64)?
        if _slowPath(drawsFaults || holdsAnswers) {
            identity = drawIdentity(input)
            if let identity { request.drawKey = ServeFaults.drawKey(identity.key, attempt: identity.attempt) }
        }
        if _slowPath(drawsFaults) {
            let fault = drawFault(identity)
            trackRetry(fault, input)
            if let fault {
                inject(fault, connection, request, input)
                return
            }
        }
        let wallMillis = self.wallMillis
        if let cluster {
            let placement = service.place(
                input, auth: state, wallMillis: wallMillis, becameAuthenticated: &became,
                owner: cluster.directory.owner)
            if became { connection.raiseStreamLimit() }
            became = false
            switch placement {
            case .local: break
            case .answered(let response):
                answer(connection, request, response, record: false)
                return
            case .worker(let k):
                request.retained = true
                post(.request(id: forwarded.add(connection, request), origin: index, input: input), to: k)
                return
            }
        }
        var response = service.handle(input, auth: state, wallMillis: wallMillis, becameAuthenticated: &became)
        if request.duplicatePseudoHeader {
            response = APNsService.errorAnswer(.duplicateHeaders, id: nil)
        }
        if became { connection.raiseStreamLimit() }
        answer(connection, request, response)
    }

    /// Sends a request's answer, or holds it until due (`--latency`, a stall window), and records its service
    /// time (END_STREAM → submitted, the time held included) when `record`.
    @inline(__always)
    func answer(_ connection: H2ServerConnection, _ request: H2Request, _ response: APNsAnswer, record: Bool = true) {
        if _slowPath(holdsAnswers), hold(connection, request, response, record: record) { return }
        connection.respond(to: request, with: response)
        if record { service.recordService(max(EventLoop.hrtimeNanos &- request.completeNanos, 1)) }
    }

    public func connectionDidProcessInput(_ connection: H2ServerConnection) {
        sendOutgoing()  // peers hear of a broadcast before this worker's own fan-out
        if service.pendingFanouts > 0 {
            service.runPendingFanouts(wallMillis: wallMillis)
        }
        sendOutgoing()
        flushOutbox()  // the read's forwarded requests and peer messages, one batch per worker
    }

    public func connectionClosed(_ connection: H2ServerConnection) {
        let key = ObjectIdentifier(connection)
        guard connections.removeValue(forKey: key) != nil else { return }
        // A connection that ends inside a read (a protocol error after a broadcast was answered) is told nothing
        // more: its broadcasts' fan-outs and peer messages go now, not at some later connection's input.
        connectionDidProcessInput(connection)
        if !forwarded.isEmpty { forwarded.removeAll(of: connection) }
        // Answers held for it are dropped (counted: the wire identity).
        if !held.isEmpty { connectionStats[.answersDropped] += held.removeAll { $0.connection === connection } }
        connectionStats[.closed] += 1
        connectionStats[.bytesIn] += connection.bytesRead
        connectionStats[.bytesOut] += connection.bytesWritten
        connectionStats[.streamsReset] += connection.streamsReset
        connectionStats[.streamsRefused] += connection.streamsRefused
        connectionStats[.requestsRefused] += connection.requestsRefused
        connectionStats[.requestTimeouts] += connection.requestTimeouts
        connectionStats[.outputPauses] += connection.outputPauses
        connectionStats[.trailerFields] += connection.trailerFields
        connectionStats[.responsesSubmitted] += connection.responsesSubmitted
        connectionStats[.answersDropped] += connection.answersDropped
        connectionStats.endReasons[connection.endReason ?? "closed", default: 0] += 1
        if stoppingSinceNanos != nil { finishIfDrained() }
    }

    /// Bytes in and out so far, open connections included.
    public var bytes: (read: Int, written: Int) {
        var r = connectionStats[.bytesIn]
        var w = connectionStats[.bytesOut]
        for c in connections.values {
            r += c.bytesRead
            w += c.bytesWritten
        }
        return (r, w)
    }
}
