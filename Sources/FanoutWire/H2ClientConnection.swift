import FanoutCore
internal import CNGHTTP2
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

/// The client side of one HTTP/2 connection: nghttp2's client session through its memory interface, on a
/// ``TCPStream`` connected with `uv_tcp_connect`, optionally TLS (``TLSSession``, ALPN `h2` required). Requests
/// beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS (and before its first SETTINGS) wait in a queue here (at most
/// ``H2ClientSettings/maxQueued``); each ends in ``onResponse`` exactly once, answered or failed (reset, GOAWAY, the
/// connection's end, a deadline, the queue's bound, the stream ids' end). Its deadlines are the owner's sweep's
/// (H2ClientConnection+Deadlines.swift). Confined to its loop's thread.
public final class H2ClientConnection {
    public let loop: EventLoop
    public let settings: H2ClientSettings
    /// Called once per submitted request, also for one submitted after the connection ended (it fails at once); kept
    /// after the end, so it must not capture the connection strongly (use its first argument).
    @exclusivity(unchecked) public var onResponse: ((H2ClientConnection, H2ClientResponse) -> Void)?
    /// Called once when the server's first SETTINGS arrived (requests go out from then on).
    public var onReady: ((H2ClientConnection) -> Void)?
    /// Called once when the connection ended (``endReason`` says why); every request has been answered or failed.
    public var onClosed: ((H2ClientConnection) -> Void)?
    /// Called once when the connection takes no more requests while it still runs: the server's GOAWAY, or its
    /// stream ids near their end (``H2ClientSettings/streamIdMargin``). Its queued requests are handed back
    /// (``H2ClientResponse/unprocessed``); the owner opens a replacement now, not when this one closes. May be
    /// called from inside nghttp2's callbacks.
    public var onDraining: ((H2ClientConnection) -> Void)?

    /// `:scheme` and `:authority` as nghttp2 pairs (freed in deinit, after the session).
    let target: NVBlock
    /// The socket (or an in-memory connection's `output`, ``init(loop:output:settings:)``), TLS, and nghttp2's
    /// input and output (shared with the server side).
    let transport: H2Transport
    /// nghttp2's allocator (free lists per size class); outlives the session (deleted in deinit, before it).
    let pool: NGHTTP2Pool
    // The hot fields are `@exclusivity(unchecked)`: the connection is confined to its loop's thread and no access
    // overlaps another (callgrind: the dynamic checks were ~10% of a request's instructions).
    @exclusivity(unchecked) var session: OpaquePointer?
    var stream: TCPStream? {
        get { transport.stream }
        set { transport.stream = newValue }
    }
    /// Requests waiting for a stream (moved in and out, not copied: no retain of their arrays).
    @exclusivity(unchecked) var queue = RequestQueue()
    var finished: Bool {
        get { transport.finished }
        set { transport.finished = newValue }
    }

    /// The server's first SETTINGS arrived, and every frame read with it was processed (``received(_:)``).
    @exclusivity(unchecked) public internal(set) var isReady = false
    /// The server's first SETTINGS arrived inside the receive under way: the connection becomes ready once that
    /// receive is done, so that a later SETTINGS read with it (h2 servers send their defaults, then their own limit)
    /// is applied before anything is submitted under the first one's limit.
    @exclusivity(unchecked) var settingsArrived = false
    /// The server sent GOAWAY (no request is sent on this connection any more).
    @exclusivity(unchecked) public internal(set) var goAwayReceived = false
    /// The stream ids came near their end (``H2ClientSettings/streamIdMargin``): nothing more is sent on it.
    @exclusivity(unchecked) public internal(set) var streamIdsExhausted = false
    /// The connection takes no more requests (GOAWAY received, or its stream ids near their end).
    public var isDraining: Bool { goAwayReceived || streamIdsExhausted }
    /// The connection is ready, not draining and not ended: requests routed to it go out.
    public var isUsable: Bool { isReady && !goAwayReceived && !streamIdsExhausted && !finished && endReason == nil }
    /// When the connection was opened (`EventLoop.hrtimeNanos`): its connect deadline counts from here.
    public let openedNanos: UInt64
    /// The PING in flight (sent at this time, 0: none), and when the last one was sent.
    @exclusivity(unchecked) var pingSentNanos: UInt64 = 0
    @exclusivity(unchecked) var lastPingNanos: UInt64 = 0
    /// PINGs sent, and acknowledged.
    public internal(set) var pingsSent = 0
    public internal(set) var pingsAnswered = 0
    public internal(set) var endReason: String? {
        get { transport.endReason }
        set { transport.endReason = newValue }
    }
    /// nghttp2's last error message (a protocol error it answered with GOAWAY or RST_STREAM by itself).
    var protocolError: String?
    /// Streams open now, and requests waiting for a free stream.
    @exclusivity(unchecked) public internal(set) var openStreams = 0
    public var queuedRequests: Int { queue.count }
    /// Requests handed to nghttp2, answers that ended, and requests failed (by kind).
    @exclusivity(unchecked) public internal(set) var requestsSubmitted = 0
    @exclusivity(unchecked) public internal(set) var responsesReceived = 0
    public internal(set) var streamsReset = 0
    public internal(set) var failedByGoAway = 0
    public internal(set) var failedByConnectionEnd = 0
    public internal(set) var failedSubmissions = 0
    public internal(set) var responsesTooLarge = 0
    public internal(set) var requestTimeouts = 0
    public internal(set) var droppedQueueFull = 0
    /// Requests handed back unsent when the stream ids ran out, and streams the server refused (REFUSED_STREAM,
    /// handed back).
    public internal(set) var handedBackAtStreamIds = 0
    public internal(set) var streamsRefused = 0
    /// Writes of nghttp2's output (to the socket, through TLS, or to an in-memory connection's `output`).
    public var writes: Int { transport.writes }
    /// The most requests that waited in the queue at once.
    @exclusivity(unchecked) public internal(set) var maxQueued = 0
    /// The stream limit the server advertised (nghttp2's default of 100 until its SETTINGS arrive).
    public var serverMaxConcurrentStreams: Int {
        guard let session else { return 0 }
        return Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
    }

    /// Connects to `host:port` (a numeric address: see `TCPStream.resolve`), over TLS when `tls` is given
    /// (`serverName` for SNI and the certificate check; `authority` for `:authority`, by default `host:port`).
    /// Requests may be submitted at once; they go out once the server's SETTINGS arrive.
    public init(
        loop: EventLoop, host: String, port: Int, tls context: TLSContext? = nil, serverName: String? = nil,
        authority: String? = nil, settings: H2ClientSettings = H2ClientSettings()
    ) throws {
        self.loop = loop
        self.settings = settings
        pool = NGHTTP2Pool(cacheLimit: settings.memoryCacheBytes)
        openedNanos = EventLoop.hrtimeNanos
        target = H2ClientConnection.target(
            scheme: context == nil ? "http" : "https",
            authority: authority ?? (host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"))
        let tls = try context.map { c throws(TLSError) in
            try TLSSession(clientContext: c, serverName: serverName ?? host)
        }
        transport = H2Transport(stream: nil, output: nil, tls: tls, watermark: .max)
        startSession()
        stream = try TCPStream.connect(loop: loop, host: host, port: port) { [weak self] result in
            self?.connected(result)
        }
    }

    /// A cleartext connection without a socket: the server's bytes come from ``receive(_:)``, the client's go to
    /// `output` (the client preface at once). The fuzz target and tests drive the client side this way.
    public init(loop: EventLoop, output: @escaping (UnsafeRawBufferPointer) -> Void, settings: H2ClientSettings) {
        self.loop = loop
        self.settings = settings
        pool = NGHTTP2Pool(cacheLimit: settings.memoryCacheBytes)
        openedNanos = EventLoop.hrtimeNanos
        transport = H2Transport(stream: nil, output: output, tls: nil, watermark: .max)
        target = H2ClientConnection.target(scheme: "http", authority: "in-memory")
        startSession()
        flush()
    }

    deinit {
        if let stream, !stream.isClosed { stream.close() }
        if let session { nghttp2_session_del(session) }
        target.deallocate()
    }

    static func target(scheme: String, authority: String) -> NVBlock {
        NVBlock([(Array(":scheme".utf8), Array(scheme.utf8)), (Array(":authority".utf8), Array(authority.utf8))])
    }

    // MARK: Requests

    /// Sends `request` now if a stream is free and the server's SETTINGS arrived, else queues it (at most
    /// ``H2ClientSettings/maxQueued``: past it, it fails at once as ``H2ClientFailure/queueFull``). After the
    /// connection ended, after the server's GOAWAY or once its stream ids ran out, it fails at once (in
    /// ``onResponse``), handed back unsent. A request not stamped (``H2ClientRequest/handedNanos`` 0) is stamped
    /// now: the request deadline counts from it.
    public func submit(_ request: consuming H2ClientRequest) {
        if request.handedNanos == 0 { request.handedNanos = EventLoop.hrtimeNanos }
        if finished || goAwayReceived || streamIdsExhausted {
            fail(
                request, finished ? .connectionEnded : goAwayReceived ? .goAway : .streamIdsExhausted,
                submittedNanos: 0)
            return
        }
        if isReady && endReason == nil && queuedRequests == 0 && openStreams < streamLimit {
            send(consume request)
            if holdsWrites {
                heldRequests += 1
                if heldRequests < settings.requestsPerWrite { return }
                heldRequests = 0
            }
            if !transport.inReceive { flush() }
            return
        }
        if queuedRequests >= settings.maxQueued {
            fail(request, .queueFull, submittedNanos: 0, handBack: false)
            return
        }
        queue.append(consume request)
        maxQueued = max(maxQueued, queuedRequests)
    }

    var streamLimit: Int { min(settings.maxConcurrentStreams, serverMaxConcurrentStreams) }

    /// While set (``holdWrites()``), requests submitted go to nghttp2 at once but to the socket in pieces of
    /// ``H2ClientSettings/requestsPerWrite``, the rest at ``releaseWrites()``: a burst due at one instant is a write
    /// per piece, not a write per request.
    @exclusivity(unchecked) public private(set) var holdsWrites = false
    @exclusivity(unchecked) var heldRequests = 0

    public func holdWrites() { holdsWrites = true }

    /// Writes what was held (``holdWrites()``) and stops holding.
    public func releaseWrites() {
        holdsWrites = false
        guard heldRequests > 0 else { return }
        heldRequests = 0
        if !transport.inReceive { flush() }
    }

    /// Every queued request fails with `failure` and is handed back (``H2ClientResponse/unprocessed``): all are taken
    /// out first, so that one the owner submits again meanwhile (to another connection) is not among them.
    func handBackAll(_ failure: H2ClientFailure) {
        guard !queue.isEmpty else { return }
        var waiting: [H2ClientRequest] = []
        waiting.reserveCapacity(queue.count)
        queue.removeAll { waiting.append($0) }
        for request in waiting { fail(request, failure, submittedNanos: 0) }
    }

    /// Sends queued requests while streams are free.
    func pump() {
        // Not into a session that is ending (a protocol error, a flood): nghttp2 would refuse the streams as if the
        // server had (REFUSED_STREAM); they wait, and fail unsent at the end.
        guard isReady, !finished, !goAwayReceived, endReason == nil else { return }
        let limit = streamLimit
        var unwritten = 0
        while !finished && !streamIdsExhausted && !queue.isEmpty && openStreams < limit {
            send(queue.removeFirst())
            unwritten += 1
            // Written in pieces: the server starts on the first requests while the next are made.
            if unwritten == settings.requestsPerWrite {
                flush()
                unwritten = 0
            }
        }
    }

    func send(_ request: consuming H2ClientRequest) {
        guard let session else { return }
        // nghttp2 takes no new stream: the ids' end (drained, the request handed back for the replacement), or the
        // session is ending (nghttp2 answered a protocol error in the last read with GOAWAY): handed back, as at any
        // end, and not counted as the ids' end.
        if nghttp2_session_check_request_allowed(session) == 0 {
            if Int(nghttp2_session_get_next_stream_id(session)) > streamIdDrainPoint {
                beginDrainingForStreamIds()
                fail(request, .streamIdsExhausted, submittedNanos: 0)
            } else {
                fail(request, .connectionEnded, submittedNanos: 0)
            }
            return
        }
        // The request moves into its record (no copy); what follows reads it there.
        let record = makeRecord(request, submittedNanos: EventLoop.hrtimeNanos)
        let user = Unmanaged.passRetained(record).toOpaque()
        let content = record.request.content
        let unique = record.request.uniqueHeader
        let shared = content.shared.pairs
        let count = 4 + shared.count + (unique == nil ? 0 : 1)
        let noCopy = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
        // The pairs, then the unique header's value, on the stack. nghttp2 copies only what is not flagged
        // NO_COPY: the path and the unique value; names are static or lowercase, the rest lives in `target` and
        // in the content (NVBlock), which the record holds until the stream closes.
        let id: Int32 = withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: count) { pairs in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: H2UUIDHeader.valueCount) { value in
                func nv(
                    _ name: StaticString, _ value: UnsafePointer<UInt8>?, _ valueCount: Int, flags: UInt8
                ) -> nghttp2_nv {
                    nghttp2_nv(
                        name: UnsafeMutablePointer(mutating: name.utf8Start),
                        value: UnsafeMutablePointer(mutating: value), namelen: name.utf8CodeUnitCount,
                        valuelen: valueCount, flags: flags)
                }
                let method = record.request.method.text
                pairs[0] = nv(":method", method.utf8Start, method.utf8CodeUnitCount, flags: noCopy)
                pairs[1] = target.pairs[0]
                pairs[2] = target.pairs[1]
                (pairs.baseAddress! + 4).update(from: shared.baseAddress!, count: shared.count)
                if let unique {
                    unique.format(into: value.baseAddress!)
                    // Never indexed (HPACK): a value sent once would only churn the table.
                    pairs[count - 1] = nghttp2_nv(
                        name: UnsafeMutablePointer(mutating: unique.name.text.utf8Start), value: value.baseAddress,
                        namelen: unique.name.text.utf8CodeUnitCount, valuelen: H2UUIDHeader.valueCount,
                        flags: UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue | NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue))
                }
                return record.request.path.withUnsafeBufferPointer { path in
                    let copied = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue)  // the value is copied
                    pairs[3] = nv(":path", path.baseAddress, path.count, flags: copied)
                    if content.body.isEmpty {
                        return nghttp2_submit_request(session, nil, pairs.baseAddress, count, nil, user)
                    }
                    // The record is the body's source: no lookup when nghttp2 asks for it.
                    var provider = CNGHTTP2_data_provider(user) { _, _, buffer, length, flags, source, _ in
                        H2ClientConnection.readBody(source!.pointee.ptr, buffer!, length, flags!)
                    }
                    return nghttp2_submit_request(session, nil, pairs.baseAddress, count, &provider, user)
                }
            }
        }
        if id < 0 {
            Unmanaged<ClientStream>.fromOpaque(user).release()
            failedSubmissions += 1
            deliver(H2ClientResponse(
                tag: record.request.tag, status: 0, apnsId: [], body: [], failure: .notSubmitted(id),
                unprocessed: nil, handedNanos: record.request.handedNanos,
                submittedNanos: 0, endNanos: EventLoop.hrtimeNanos))
            return
        }
        openStreams += 1
        link(record, id)
        requestsSubmitted += 1
        if !streamIdsExhausted && Int(nghttp2_session_get_next_stream_id(session)) > streamIdDrainPoint {
            beginDrainingForStreamIds()
        }
    }

    /// The next stream id past which the connection drains: ``H2ClientSettings/streamIdMargin`` requests before
    /// the last odd id (2^31 − 1).
    var streamIdDrainPoint: Int { Int(Int32.max) - 2 * max(0, settings.streamIdMargin) }

    /// A request's outcome in the connection's counts: an answer, or its failure by kind.
    @inline(__always)
    func count(_ failure: H2ClientFailure?) {
        switch failure {
        case nil: responsesReceived += 1
        case .goAway: failedByGoAway += 1
        case .connectionEnded: failedByConnectionEnd += 1
        case .reset: streamsReset += 1
        case .notSubmitted: failedSubmissions += 1
        case .responseTooLarge: responsesTooLarge += 1
        case .timeout: requestTimeouts += 1
        case .queueFull: droppedQueueFull += 1
        case .streamIdsExhausted: handedBackAtStreamIds += 1
        }
    }

    /// `request`'s failure; one never submitted (`submittedNanos` 0) is handed back for another try unless
    /// `handBack` is false (a deadline or the queue's bound: the request itself is over).
    func fail(_ request: H2ClientRequest, _ failure: H2ClientFailure, submittedNanos: UInt64, handBack: Bool = true) {
        count(failure)
        deliver(H2ClientResponse(
            tag: request.tag, status: 0, apnsId: [], body: [], failure: failure,
            unprocessed: submittedNanos == 0 && handBack ? request : nil, handedNanos: request.handedNanos,
            submittedNanos: submittedNanos, endNanos: EventLoop.hrtimeNanos))
    }

    func deliver(_ response: H2ClientResponse) {
        onResponse?(self, response)
    }

    /// Ends the connection: GOAWAY (NO_ERROR), then the socket closes once written. Open and queued requests
    /// fail with `.connectionEnded`.
    public func close(reason: String = "closed by the client") {
        guard !finished else { return }
        endReason = endReason ?? reason
        if let session, isReady {
            nghttp2_session_terminate_session(session, UInt32(NGHTTP2_NO_ERROR.rawValue))
            flush()
        }
        end(reason)
    }

    /// The streams open now, newest first, linked through their records (to fail them at the end; nghttp2 offers
    /// no iteration). Each record is retained by its stream's user data while it is in the list; a list, not a set
    /// of ids: no hashing per request. `oldestOpen` is its other end (the request deadline reads from there).
    @exclusivity(unchecked) var openList: Unmanaged<ClientStream>?
    @exclusivity(unchecked) var oldestOpen: Unmanaged<ClientStream>?
    /// The record last looked up, by stream id (0: none): a response's callbacks (its header fields, frames, body
    /// chunks) come one stream at a time, so one nghttp2 lookup serves them all. Cleared when its stream closes.
    @exclusivity(unchecked) var lastRecordId: Int32 = 0
    @exclusivity(unchecked) var lastRecord: Unmanaged<ClientStream>?
    /// Records of streams that ended, for the next requests (``recycle(_:)``).
    @exclusivity(unchecked) var spareRecords: [ClientStream] = []

    func link(_ record: ClientStream, _ id: Int32) {
        record.streamId = id
        record.older = openList
        if let head = openList {
            head.takeUnretainedValue().newer = Unmanaged.passUnretained(record)
        } else {
            oldestOpen = Unmanaged.passUnretained(record)
        }
        openList = Unmanaged.passUnretained(record)
    }

    func unlink(_ record: ClientStream) {
        if let newer = record.newer {
            newer.takeUnretainedValue().older = record.older
        } else {
            openList = record.older
        }
        if let older = record.older {
            older.takeUnretainedValue().newer = record.newer
        } else {
            oldestOpen = record.newer
        }
        record.newer = nil
        record.older = nil
    }
}
