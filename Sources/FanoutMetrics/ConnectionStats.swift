import FanoutCore

/// Connection-level counts, per event loop (added across loops with one `+=`).
public struct ConnectionStats: Sendable {
    public enum Count: Int, CaseIterable, Sendable {
        case accepted, closed
        /// The most connections open at once (added across loops: the sum of the loops' peaks, an upper bound).
        case peakOpen
        case bytesIn, bytesOut
        /// Streams closed (by either side, or with their connection) before an answer was submitted.
        case streamsReset
        case tlsConnections
        /// Connections closed at accept: over `maxConnectionsPerLoop`.
        case refused
        /// Connections lost before they could be accepted (`uv_accept` failed, e.g. EMFILE).
        case acceptErrors
        /// New streams refused (RST_STREAM REFUSED_STREAM): the loop's open-stream budget was spent.
        case streamsRefused
        /// Requests refused (REFUSED_STREAM) before they were judged: their client held too many unsent answer
        /// bytes.
        case requestsRefused
        /// Streams reset because their request was not complete within the request timeout.
        case requestTimeouts
        /// Times a connection's output stopped at the watermark (a client not reading fast enough).
        case outputPauses
        /// Trailer fields received (ignored).
        case trailerFields
        /// Answers nghttp2 accepted for sending; answers dropped because their stream or connection was gone.
        case responsesSubmitted, answersDropped
        /// With `--manage-listen`: requests sent to the listener that does not serve their API (answered 404
        /// BadPath).
        case misplacedRequests
    }

    public var counts = Counts<Count>()
    /// What `--faults` and `--latency` did on the loop.
    public var faults = FaultCounts()
    /// Why connections ended (closed by the client, protocol error, no preface, IdleTimeout, Shutdown, TLS…).
    public var endReasons: [String: Int] = [:]

    public init() {}

    @inline(__always)
    public subscript(_ count: Count) -> Int {
        get { counts[count] }
        set { counts[count] = newValue }
    }

    /// Adds another loop's counts.
    public static func += (a: inout ConnectionStats, b: ConnectionStats) {
        a.counts += b.counts
        a.faults += b.faults
        a.endReasons.merge(b.endReasons, uniquingKeysWith: +)
    }

    /// The wire identity: every answer the service produced (`ServeStats.requests`) was either accepted by
    /// nghttp2 for sending or dropped because its stream was gone. Counted on different paths (the service
    /// counts what it judged; the connection counts what `nghttp2_submit_response` took), so it can fail.
    public func answersAccountedFor(requests: Int) -> Bool {
        requests == self[.responsesSubmitted] + self[.answersDropped]
    }
}

/// What the faults did, per event loop (added across loops for the run folder with one `+=`).
public struct FaultCounts: Sendable, Equatable {
    public enum Count: Int, CaseIterable, Sendable {
        /// Requests answered 503, 429, 500 by injection (also counted in the answers by status and reason).
        case serviceUnavailable, tooManyRequests, internalServerError
        /// Requests reset (RST_STREAM INTERNAL_ERROR) instead of answered: never judged, not in `requests.total`.
        case reset
        /// GOAWAYs sent by `goaway-every` (once per connection).
        case goAway
        /// Answers whose sending a stall window pushed back to the window's end.
        case stalled
        /// Answers held for `--latency` (and stalls): in all, the most at once (summed over loops), and those sent
        /// at once because the loop already held `--max-open-streams` of them.
        case held, heldPeak, heldOverflow
    }

    public var counts = Counts<Count>()
    /// How long each held answer was held (drawn latency, stall windows included): what was injected, apart from
    /// the `service` time that includes it.
    public var heldNanos = LatencyHistogram()
    /// Token pushes refused by a fault that came back, after how long, and those that never did.
    public var retries = RetryCounts()

    public init() {}

    @inline(__always)
    public subscript(_ count: Count) -> Int {
        get { counts[count] }
        set { counts[count] = newValue }
    }

    /// Faults by kind, as summary.json names them.
    public var injected: [(kind: String, count: Int)] {
        [
            ("503", self[.serviceUnavailable]), ("429", self[.tooManyRequests]), ("500", self[.internalServerError]),
            ("reset", self[.reset]), ("goaway", self[.goAway]), ("stall", self[.stalled]),
        ]
    }

    public static func += (a: inout FaultCounts, b: FaultCounts) {
        a.counts += b.counts
        a.heldNanos.add(b.heldNanos)
        a.retries += b.retries
    }
}
