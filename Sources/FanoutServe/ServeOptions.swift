/// How `fanout serve` listens, its bounds, and when it stops (docs/INGEST.md §6 lists the bounds).
public struct ServeOptions: Sendable {
    public var host = "127.0.0.1"
    public var port = 2197
    public var certificateFile: String?
    public var keyFile: String?
    /// Stop after this many seconds (nil: on SIGINT or SIGTERM).
    public var durationSeconds: Double?
    public var maxConcurrentStreams: UInt32 = 1000
    /// The most `--max-streams` may be (each open stream may hold the header-list limit plus the body limit).
    public static let maxConcurrentStreamsCap: UInt32 = 10_000
    /// A connection that sent no HTTP/2 preface within this long is closed.
    public var prefaceTimeoutSeconds = 10.0
    /// A connection with no open stream and no new one for this long gets GOAWAY `IdleTimeout`.
    public var idleTimeoutSeconds = 3600.0
    /// In-flight streams get this long to finish after GOAWAY at shutdown; then every connection is closed.
    public var drainSeconds = 5.0
    /// Connections open at once per event loop; more are closed at accept and counted.
    public var maxConnectionsPerLoop = 10_000
    /// Open streams at once per event loop, every connection together; more are refused (REFUSED_STREAM).
    public var maxOpenStreamsPerLoop = 10_000
    /// A stream whose request (headers and body up to END_STREAM) is not complete this long after its first
    /// HEADERS is reset (CANCEL); a connection whose output stays paused on a client that does not read for
    /// this long is closed.
    public var requestTimeoutSeconds = 10.0
    /// Answer-body bytes a connection may hold unsent (a client that does not read, or reads slowly, while it asks
    /// for large answers such as `all-channels`); its further requests are refused (REFUSED_STREAM) until they
    /// drain.
    public var maxUnsentBytesPerConnection = 1 << 20
    /// The same, every connection of a loop together: beyond it, requests are refused on every connection that
    /// holds unsent answer bytes (a client that reads everything it is sent holds none, and is still served).
    public var maxUnsentBytesPerLoop = 64 << 20
    /// Faults and latency to inject (`--faults`, `--latency`; none by default).
    public var faults = ServeFaults()
    /// `--trigger`: the scenario's events POSTed to a backend from loop 0 (nil: none).
    public var trigger: TriggerOptions?
    /// t0 of the scenario's events: the instant event offset 0 is due (`EventLoop.hrtimeNanos`), the same for
    /// every loop. The trigger sends event k at `eventsT0Nanos + intendedNanos(k)`; a push's end-to-end time is
    /// its apply time − this − the event's offset. `fanout serve` sets it to when serving starts.
    public var eventsT0Nanos: UInt64 = 0
    /// The same instant on the wall clock (UNIX milliseconds): the trigger's `intendedAt` is counted from it.
    public var eventsT0UnixMillis: Int64 = 0
    /// `--manage-listen HOST:PORT`: channel management on a listener of its own (nil: one listener for all).
    public var manageHost = "127.0.0.1"
    public var managePort: Int?
    public init() {}
}

/// Connection-level counts.
public struct ConnectionStats: Sendable {
    public var accepted = 0
    public var closed = 0
    public var peakOpen = 0
    public var bytesIn = 0
    public var bytesOut = 0
    /// Streams closed (by either side, or with their connection) before an answer was submitted.
    public var streamsReset = 0
    public var tlsConnections = 0
    /// Connections closed at accept: over `maxConnectionsPerLoop`.
    public var refused = 0
    /// Connections lost before they could be accepted (`uv_accept` failed, e.g. EMFILE).
    public var acceptErrors = 0
    /// New streams refused (RST_STREAM REFUSED_STREAM): the loop's open-stream budget was spent.
    public var streamsRefused = 0
    /// Requests refused (REFUSED_STREAM) before they were judged: their client held too many unsent answer bytes.
    public var requestsRefused = 0
    /// Streams reset because their request was not complete within the request timeout.
    public var requestTimeouts = 0
    /// Times a connection's output stopped at the watermark (a client not reading fast enough).
    public var outputPauses = 0
    /// Trailer fields received (ignored).
    public var trailerFields = 0
    /// Answers nghttp2 accepted for sending; answers dropped because their stream or connection was gone.
    public var responsesSubmitted = 0
    public var answersDropped = 0
    /// With `--manage-listen`: requests sent to the listener that does not serve their API (answered 404 BadPath).
    public var misplacedRequests = 0
    /// What `--faults` and `--latency` did on the loop.
    public var faults = FaultCounts()
    /// Why connections ended (closed by the client, protocol error, no preface, IdleTimeout, Shutdown, TLS…).
    public var endReasons: [String: Int] = [:]

    /// Adds another loop's counts (peak open: the sum of the loops' peaks, an upper bound).
    public mutating func add(_ o: ConnectionStats) {
        accepted += o.accepted
        closed += o.closed
        peakOpen += o.peakOpen
        bytesIn += o.bytesIn
        bytesOut += o.bytesOut
        streamsReset += o.streamsReset
        tlsConnections += o.tlsConnections
        refused += o.refused
        acceptErrors += o.acceptErrors
        streamsRefused += o.streamsRefused
        requestsRefused += o.requestsRefused
        requestTimeouts += o.requestTimeouts
        outputPauses += o.outputPauses
        trailerFields += o.trailerFields
        responsesSubmitted += o.responsesSubmitted
        answersDropped += o.answersDropped
        misplacedRequests += o.misplacedRequests
        faults.add(o.faults)
        for (r, n) in o.endReasons { endReasons[r, default: 0] += n }
    }

    /// The wire identity: every answer the service produced (`ServeStats.requests`) was either accepted by
    /// nghttp2 for sending or dropped because its stream was gone. Counted on different paths (the service
    /// counts what it judged; the connection counts what `nghttp2_submit_response` took), so it can fail.
    public func answersAccountedFor(requests: Int) -> Bool {
        requests == responsesSubmitted + answersDropped
    }
}
