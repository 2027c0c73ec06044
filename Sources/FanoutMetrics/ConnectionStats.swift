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

    public init() {}

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

/// What the faults did, per event loop (added across loops for the run folder).
public struct FaultCounts: Sendable, Equatable {
    /// Requests answered 503, 429, 500 by injection (also counted in the answers by status and reason).
    public var serviceUnavailable = 0
    public var tooManyRequests = 0
    public var internalServerError = 0
    /// Requests reset (RST_STREAM INTERNAL_ERROR) instead of answered: never judged, not in `requests.total`.
    public var reset = 0
    /// GOAWAYs sent by `goaway-every` (once per connection).
    public var goAway = 0
    /// Answers whose sending a stall window pushed back to the window's end.
    public var stalled = 0
    /// Answers held for `--latency` (and stalls): in all, the most at once, and those sent at once because the
    /// loop already held `--max-open-streams` of them.
    public var held = 0
    public var heldPeak = 0
    public var heldOverflow = 0
    /// How long each held answer was held (drawn latency, stall windows included): what was injected, apart from
    /// the `service` time that includes it.
    public var heldNanos = LatencyHistogram()
    /// Token pushes refused by a fault that came back, after how long, and those that never did.
    public var retries = RetryCounts()

    public init() {}

    /// Faults by kind, as summary.json names them.
    public var injected: [(kind: String, count: Int)] {
        [
            ("503", serviceUnavailable), ("429", tooManyRequests), ("500", internalServerError), ("reset", reset),
            ("goaway", goAway), ("stall", stalled),
        ]
    }

    public mutating func add(_ o: FaultCounts) {
        serviceUnavailable += o.serviceUnavailable
        tooManyRequests += o.tooManyRequests
        internalServerError += o.internalServerError
        reset += o.reset
        goAway += o.goAway
        stalled += o.stalled
        held += o.held
        heldPeak += o.heldPeak
        heldOverflow += o.heldOverflow
        heldNanos.add(o.heldNanos)
        retries.add(o.retries)
    }
}
