import FanoutAPNs
import FanoutWire
import UVLoop

// What serving needs besides a socket: the inbox of a worker in a cluster, the wall clock requests are judged by,
// and the registration of a connection. `run()` opens the inbox; `adopt` serves a connection made in memory
// (the fuzz target and the tests, through `InMemoryServe`).
extension APNsServer {
    /// The wall clock requests are judged by (UNIX milliseconds).
    var wallMillis: Int64 { fixedWallMillis ?? WallClock.millis }

    /// Several workers: this worker's inbox, drained by a wakeup's callback on this loop, attached to the
    /// cluster (messages sent before it was attached wake it at once). Idempotent; nothing without a cluster.
    func openInbox() throws {
        guard let cluster, inbox == nil else { return }
        let inbox = try Wakeup(loop: loop) { [unowned self] _ in self.drainInbox() }
        self.inbox = inbox
        cluster.attach(index, inbox.sender)
    }

    /// Closes the inbox (a served run closes it once every worker has drained; the in-memory harness at its end).
    func closeInbox() {
        inbox?.close()
        inbox = nil
    }

    /// The settings a client's connection gets: `maxConcurrentStreams`, one stream until the first valid
    /// provider token under token authentication (as APNs does), bodies kept up to 5120 bytes, a finished
    /// connection's flush bounded by the drain time.
    public var connectionSettings: H2ServerSettings {
        var settings = H2ServerSettings()
        settings.maxConcurrentStreams = options.maxConcurrentStreams
        settings.initialMaxStreams = service.auth == nil ? options.maxConcurrentStreams : 1
        settings.bodyLimit = 5120
        settings.drainMillis = UInt64((options.drainSeconds * 1000).rounded())
        return settings
    }

    /// Serves a connection made without a socket (`H2ServerConnection(output:settings:)` with
    /// `connectionSettings`) as an accepted one is served: this server is its delegate, it gets its own
    /// provider-token state, it is counted, and it is started (its SETTINGS go to its output). Feed it with
    /// `receive` on this server's loop thread; it leaves when it ends (`abort`, GOAWAY, a protocol error).
    /// `role`: the listener it arrived on, with `--manage-listen` (`.push` or `.manage`; `.all` without).
    public func adopt(_ connection: H2ServerConnection, serving role: ServeListener.Role = .all) throws {
        try openInbox()
        try register(connection, serving: role)
    }

    /// Makes this server the connection's delegate, puts it on the loop's open-stream and unsent-bytes budget,
    /// gives it its provider-token state and the listener it arrived on, counts it and starts it.
    func register(_ connection: H2ServerConnection, serving role: ServeListener.Role) throws {
        connection.delegate = self
        connection.budget = streamBudget
        connections[ObjectIdentifier(connection)] = connection
        let state = ProviderAuth.ConnectionState()
        state.serves = role
        connection.context = state
        connectionStats[.accepted] += 1
        if connection.isTLS { connectionStats[.tlsConnections] += 1 }
        connectionStats[.peakOpen] = max(connectionStats[.peakOpen], connections.count)
        try connection.start()
    }

    /// Requests forwarded to other workers and not answered yet.
    public var forwardedWaiting: Int { forwarded.count }
}

extension ServeCluster {
    /// The cluster of these workers' services (service `k` is worker `k`), with the directory of the tokens
    /// each one owns, as `fanout serve --workers N` builds it.
    public convenience init(serving services: [APNsService]) {
        self.init(
            count: services.count, directory: TokenDirectory(hashesByWorker: services.map { $0.ownedTokenHashes() }))
    }
}
