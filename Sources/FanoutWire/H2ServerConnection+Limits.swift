internal import CNGHTTP2
import UVLoop

/// The open streams of every connection on one loop, against a limit: a server-wide bound on request state
/// (each open stream holds up to the header-list limit plus the body limit). Beyond it, new streams are refused
/// with RST_STREAM REFUSED_STREAM (the client may retry them). Confined to its loop's thread.
public final class StreamBudget {
    public let limit: Int
    /// Streams open now on every connection sharing the budget.
    @exclusivity(unchecked) public internal(set) var open = 0
    /// Streams refused because the budget was spent.
    @exclusivity(unchecked) public internal(set) var refused = 0
    /// Answer-body bytes submitted on every connection sharing the budget and not yet taken by nghttp2 for
    /// sending (see ``H2ServerConnection/unsentAnswerBytes``).
    @exclusivity(unchecked) public internal(set) var unsentAnswerBytes = 0

    public init(limit: Int) {
        precondition(limit > 0, "StreamBudget: limit above 0")
        self.limit = limit
    }
}

/// Requests not complete yet, oldest first, linked through the requests (`olderIncomplete`/`newerIncomplete`):
/// appending and removing cost a few pointer stores, no allocation and no reference counting (the links are
/// unmanaged: a request is linked only while its stream table holds it).
struct IncompleteRequests {
    private var oldestLink: Unmanaged<H2Request>?
    private var newestLink: Unmanaged<H2Request>?
    private(set) var count = 0

    /// The oldest incomplete request (the sweep's question; not on the per-request path).
    var oldest: H2Request? { oldestLink?.takeUnretainedValue() }

    @inline(__always)
    mutating func append(_ r: H2Request) {
        let link = Unmanaged.passUnretained(r)
        r.isIncomplete = true
        r.olderIncomplete = newestLink
        r.newerIncomplete = nil
        if let n = newestLink { n._withUnsafeGuaranteedRef { $0.newerIncomplete = link } } else { oldestLink = link }
        newestLink = link
        count += 1
    }

    @inline(__always)
    mutating func remove(_ r: H2Request) {
        guard r.isIncomplete else { return }
        r.isIncomplete = false
        let older = r.olderIncomplete
        let newer = r.newerIncomplete
        if let o = older { o._withUnsafeGuaranteedRef { $0.newerIncomplete = newer } } else { oldestLink = newer }
        if let n = newer { n._withUnsafeGuaranteedRef { $0.olderIncomplete = older } } else { newestLink = older }
        r.olderIncomplete = nil
        r.newerIncomplete = nil
        count -= 1
    }

    mutating func removeAll() {
        while let r = oldest { remove(r) }
    }
}

/// The deadlines of a server connection (nanoseconds): the HTTP/2 preface after accept; each request's headers and
/// END_STREAM after its stream opened (also how long a client may read nothing while answers wait for it); a
/// connection without an open or new stream before GOAWAY IdleTimeout. The drain deadline after GOAWAY at
/// shutdown is the owner's (one for all its connections).
public struct ConnectionDeadlines: Sendable, Equatable {
    public var prefaceNanos: UInt64
    public var requestNanos: UInt64
    public var idleNanos: UInt64

    public init(prefaceSeconds: Double, requestSeconds: Double, idleSeconds: Double) {
        prefaceNanos = deadlineNanos(prefaceSeconds)
        requestNanos = deadlineNanos(requestSeconds)
        idleNanos = deadlineNanos(idleSeconds)
    }
}

/// Deadlines read by the owner's periodic sweep, with the time passed in (tests drive them on a virtual clock).
extension H2ServerConnection {
    /// What a sweep at `now` decided for this connection.
    public enum SweepAction: Equatable, Sendable {
        case none
        /// Closed: no preface in time, or a client that read nothing for the request deadline while answers waited.
        case aborted
        /// GOAWAY IdleTimeout sent.
        case wentAway
    }

    /// The one place a server connection's deadlines are decided (the owner calls it from its periodic sweep):
    /// no preface by the preface deadline → closed; incomplete requests older than the request deadline → reset
    /// (``expireRequests(openedBeforeNanos:)``); output stalled on a client that has read nothing for the request
    /// deadline → closed; no stream open or opened for the idle deadline → GOAWAY IdleTimeout.
    @discardableResult
    public func sweep(now: UInt64, _ d: ConnectionDeadlines) -> SweepAction {
        if !prefaceReceived {
            guard now &- openedNanos >= d.prefaceNanos else { return .none }
            abort(reason: "no HTTP/2 preface in time")
            return .aborted
        }
        if incompleteRequests > 0 && now > d.requestNanos { expireRequests(openedBeforeNanos: now &- d.requestNanos) }
        let idle = idleNanos(now: now)
        if isStalled {
            guard idle >= d.requestNanos else { return .none }
            abort(reason: "output stalled (the client does not read)")
            return .aborted
        }
        guard idle >= d.idleNanos, !goingAway else { return .none }
        goAway(reason: "IdleTimeout")
        return .wentAway
    }

    /// Streams whose request is not complete yet (headers or body still to come).
    public var incompleteRequests: Int { incomplete.count }
    /// Streams open now.
    public var openStreams: Int { streams.count }

    /// Resets (RST_STREAM CANCEL) every stream opened before `openedBeforeNanos` whose request is still not
    /// complete (its headers or END_STREAM never came), and counts them in ``requestTimeouts``.
    ///
    /// - Returns: the number of streams reset.
    @discardableResult
    public func expireRequests(openedBeforeNanos: UInt64) -> Int {
        guard let session, !finished else { return 0 }
        var expired = 0
        while let r = incomplete.oldest, r.arrivalNanos < openedBeforeNanos {
            incomplete.remove(r)
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), r.streamId, NGHTTP2_CANCEL.rawValue)
            expired += 1
        }
        requestTimeouts += expired
        if expired > 0 { flush() }
        return expired
    }

    /// How long the connection has made no progress, as of `now` (monotonic nanoseconds), measured by requests,
    /// not bytes: it is idle while no stream is open and none was opened, whatever else arrives (a PING keeps
    /// nothing alive). While its output is paused on a client that does not read, it is idle as long as no byte
    /// is written (see ``isStalled``). Called by the owner's sweep; precise to the sweep's period.
    public func idleNanos(now: UInt64) -> UInt64 {
        let written = stream?.bytesWritten ?? 0
        let busy = outputPaused ? written != idle.written : (streams.count > 0 || streamsOpened != idle.opened)
        if busy || idle.opened < 0 {
            idle = (now, streamsOpened, written)
            return 0
        }
        idle.opened = streamsOpened
        return now &- idle.sinceNanos
    }

    /// Output is paused on a client that does not read (its idle time then counts the time without progress).
    public var isStalled: Bool { outputPaused }
}
