import FanoutCore
internal import CNGHTTP2
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

/// What the requests of one batch share — their regular headers (lowercase names) and body — in one object: a
/// request holds one reference to it, so a move of the request retains one object, not four arrays. The body is
/// retained, not copied, until every stream is done with it.
public final class H2RequestContent: @unchecked Sendable {  // immutable once made
    public let headers: HeaderList
    public let body: [UInt8]
    /// `content-length` (the body's length) and the headers, as nghttp2 pairs in memory of this object's own
    /// (nghttp2 does not copy them per request: a stream's record holds its content until the stream closes).
    let shared: NVBlock

    public init(headers: HeaderList, body: [UInt8]) {
        self.headers = headers
        self.body = body
        shared = NVBlock(first: "content-length", Array(String(body.count).utf8), headers)
    }

    deinit { shared.deallocate() }
}

/// A header of one request alone whose value is a UUID's text (8-4-4-4-12 lowercase hex digits) of two 64-bit
/// words (`apns-id`, `apns-request-id`): formatted at send time into a stack buffer, no array per request.
public struct H2UUIDHeader: Sendable {
    /// Lowercase (it is sent as it is, not copied and lower-cased by nghttp2).
    public var name: StaticString
    public var high: UInt64
    public var low: UInt64

    public init(name: StaticString, high: UInt64, low: UInt64) {
        self.name = name
        self.high = high
        self.low = low
    }

    /// The value's length: 32 digits and 4 dashes.
    public static let valueCount = UUIDText.count

    /// Writes the value's 36 bytes at `out` (FanoutCore's ``UUIDText``, the one UUID formatter).
    @inline(__always)
    public func format(into out: UnsafeMutablePointer<UInt8>) {
        UUIDText.format(high: high, low: low, into: UnsafeMutableRawPointer(out))
    }

    /// The value, as an array.
    public var value: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: H2UUIDHeader.valueCount) { buffer, count in
            format(into: buffer.baseAddress!)
            count = H2UUIDHeader.valueCount
        }
    }
}

/// One request for ``H2ClientConnection/submit(_:)``: its path, its batch's headers and body, and optionally one
/// header of its own.
public struct H2ClientRequest: Sendable {
    public var method: StaticString
    public var path: [UInt8]
    public var content: H2RequestContent
    /// One more header of this request alone (e.g. its `apns-id`), so that `content` can be shared by many requests.
    public var uniqueHeader: H2UUIDHeader?
    /// The caller's handle for the request, handed back with its response.
    public var tag: Int
    /// When the caller handed the request over (its own clock, `EventLoop.hrtimeNanos`; 0: not said), handed back
    /// with its response: `submittedNanos − handedNanos` is the request's wait for a stream (the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS) or a connection. A request sent again keeps its first.
    public var handedNanos: UInt64 = 0

    public var headers: HeaderList { content.headers }
    public var body: [UInt8] { content.body }

    public init(
        method: StaticString = "POST", path: [UInt8], content: H2RequestContent, uniqueHeader: H2UUIDHeader? = nil,
        tag: Int
    ) {
        self.method = method
        self.path = path
        self.content = content
        self.uniqueHeader = uniqueHeader
        self.tag = tag
    }

    /// A request with headers and a body of its own.
    public init(method: StaticString = "POST", path: [UInt8], headers: HeaderList, body: [UInt8], tag: Int) {
        self.init(method: method, path: path, content: H2RequestContent(headers: headers, body: body), tag: tag)
    }
}

/// Why a request got no complete answer.
public enum H2ClientFailure: Sendable, Equatable, CustomStringConvertible {
    /// The server reset the stream (RST_STREAM with this error code; REFUSED_STREAM is 7).
    case reset(UInt32)
    /// The server sent GOAWAY before the request was sent or above its last stream id.
    case goAway
    /// The connection ended (closed, failed, or closed by the owner) before the answer ended.
    case connectionEnded
    /// nghttp2 refused the submission (this library error code).
    case notSubmitted(Int32)
    /// The answer went past one of the client's bounds (``H2ClientSettings``): its header block ("headers") or its
    /// body ("body"); the stream was reset.
    case responseTooLarge(String)

    public var description: String {
        switch self {
        case .reset(let code): "reset (\(code))"
        case .goAway: "GOAWAY"
        case .connectionEnded: "connection ended"
        case .notSubmitted(let code): "not submitted (\(code))"
        case .responseTooLarge(let part): "response too large (\(part))"
        }
    }
}

/// A request's outcome: an answer (status, `apns-id`, body) or a failure.
public struct H2ClientResponse {
    public var tag: Int
    /// The `:status`, 0 without an answer.
    public var status: Int
    /// The `apns-id` header's bytes (empty when absent, or not kept: ``H2ClientSettings/keepsApnsId``).
    public var apnsId: [UInt8]
    /// The body, up to ``H2ClientSettings/bodyLimit`` bytes (APNs's JSON reason).
    public var body: [UInt8]
    public var failure: H2ClientFailure?
    /// The request, when it failed without the server having processed it — never sent (queued at a GOAWAY or at
    /// the connection's end), or above a GOAWAY's last stream id — so that it may be sent again elsewhere.
    public var unprocessed: H2ClientRequest?
    /// The request's ``H2ClientRequest/handedNanos``.
    public var handedNanos: UInt64
    /// When the request was handed to nghttp2 (0 if it never was), and when its answer ended (END_STREAM) or it
    /// failed, on the loop's clock (`EventLoop.hrtimeNanos`).
    public var submittedNanos: UInt64
    public var endNanos: UInt64
}

/// Settings of a client connection.
public struct H2ClientSettings: Sendable {
    /// At most this many streams open at once, below the server's SETTINGS_MAX_CONCURRENT_STREAMS.
    public var maxConcurrentStreams = 1000
    /// Response body bytes kept per stream (the rest is dropped).
    public var bodyLimit = 4096
    /// The receive windows advertised (stream and connection).
    public var windowBytes: UInt32 = 1 << 20
    /// Bounds on what a server can make the client hold (see H2ClientConnection+Bounds.swift).
    public var maxResponseHeaderBytes = 16 * 1024
    public var maxResponseHeaderFields = 100
    public var maxResponseBodyBytes = 64 * 1024
    public var maxUnsentBytes = 64 << 20
    /// Requests written at most per write when many go out at once (streams freed by one read): the server starts
    /// on the first while the client makes the next. With all 100 of a read in one write, client and server took
    /// turns (strace: `fanout serve` read 100 requests per read, answered them in one write, then waited while the
    /// client made the next 100); h2load writes at most 16 KiB at a time (~45 requests of 360 bytes). Against
    /// `fanout serve` (push-bench.json, 100 streams; runs of 14 rounds alternating with h2load, medians): 8 a
    /// write gave 96–106% of h2load's rate, 16 gave 92–94%, 32 gave 89–93% (in the same runs).
    public var requestsPerWrite = 8
    /// Whether an answer's `apns-id` is kept (``H2ClientResponse/apnsId``): an array per answer, for a caller
    /// that reads it.
    public var keepsApnsId = true

    public init() {}
}

/// The client side of one HTTP/2 connection: nghttp2's client session through its memory interface, on a
/// ``TCPStream`` connected with `uv_tcp_connect`, optionally TLS over memory BIOs (ALPN `h2` required). Requests
/// beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS (and before its first SETTINGS) wait in a queue here; each
/// ends in ``onResponse`` exactly once, answered or failed (reset, GOAWAY, the connection's end). Confined to its
/// loop's thread.
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

    /// `:scheme` and `:authority` as nghttp2 pairs (freed in deinit, after the session).
    let target: NVBlock
    /// The socket (or an in-memory connection's `output`, ``init(loop:output:settings:)``), TLS, and nghttp2's
    /// input and output (shared with the server side).
    let transport: H2Transport
    /// nghttp2's allocator (free lists per size class); outlives the session (deleted in deinit, before it).
    let pool = NGHTTP2Pool()
    // The hot fields are `@exclusivity(unchecked)`: the connection is confined to its loop's thread and no access
    // overlaps another (callgrind: the dynamic checks were ~10% of a request's instructions).
    @exclusivity(unchecked) var session: OpaquePointer?
    var stream: TCPStream? {
        get { transport.stream }
        set { transport.stream = newValue }
    }
    /// Requests waiting for a stream, from `queueHead` on; a slot is emptied (nil) when its request leaves (moved
    /// out, not copied: no retain of its arrays).
    @exclusivity(unchecked) var queue: [H2ClientRequest?] = []
    @exclusivity(unchecked) var queueHead = 0
    var finished: Bool {
        get { transport.finished }
        set { transport.finished = newValue }
    }

    /// The server's first SETTINGS arrived.
    @exclusivity(unchecked) public internal(set) var isReady = false
    /// The server sent GOAWAY (no request is sent on this connection any more).
    @exclusivity(unchecked) public internal(set) var goAwayReceived = false
    public internal(set) var endReason: String? {
        get { transport.endReason }
        set { transport.endReason = newValue }
    }
    /// nghttp2's last error message (a protocol error it answered with GOAWAY or RST_STREAM by itself).
    var protocolError: String?
    /// Streams open now, and requests waiting for a free stream.
    @exclusivity(unchecked) public internal(set) var openStreams = 0
    public var queuedRequests: Int { queue.count - queueHead }
    /// Requests handed to nghttp2, answers that ended, and requests failed (by kind).
    @exclusivity(unchecked) public internal(set) var requestsSubmitted = 0
    @exclusivity(unchecked) public internal(set) var responsesReceived = 0
    public internal(set) var streamsReset = 0
    public internal(set) var failedByGoAway = 0
    public internal(set) var failedByConnectionEnd = 0
    public internal(set) var failedSubmissions = 0
    public internal(set) var responsesTooLarge = 0
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

    /// Sends `request` now if a stream is free and the server's SETTINGS arrived, else queues it. After the
    /// connection ended, or after the server's GOAWAY, it fails at once (in ``onResponse``).
    public func submit(_ request: consuming H2ClientRequest) {
        if finished || goAwayReceived {
            fail(request, finished ? .connectionEnded : .goAway, submittedNanos: 0)
            return
        }
        if isReady && endReason == nil && queuedRequests == 0 && openStreams < streamLimit {
            send(request)
            if holdsWrites {
                heldRequests += 1
                if heldRequests < settings.requestsPerWrite { return }
                heldRequests = 0
            }
            if !transport.inReceive { flush() }
            return
        }
        queue.append(request)
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

    /// Sends queued requests while streams are free.
    func pump() {
        // Not into a session that is ending (a protocol error, a flood): nghttp2 would refuse the streams as if the
        // server had (REFUSED_STREAM); they wait, and fail unsent at the end.
        guard isReady, !finished, !goAwayReceived, endReason == nil else { return }
        let limit = streamLimit
        var unwritten = 0
        while !finished && queueHead < queue.count && openStreams < limit {
            let request = queue[queueHead].take()!
            queueHead += 1
            send(request)
            unwritten += 1
            // Written in pieces: the server starts on the first requests while the next are made.
            if unwritten == settings.requestsPerWrite {
                flush()
                unwritten = 0
            }
        }
        if queueHead == queue.count {
            queue.removeAll(keepingCapacity: queue.capacity <= 4096)
            queueHead = 0
        } else if queueHead > 4096 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
    }

    func send(_ request: consuming H2ClientRequest) {
        guard let session else { return }
        // The request moves into its record (no copy); what follows reads it there.
        let record = makeRecord(request, submittedNanos: EventLoop.hrtimeNanos)
        let user = Unmanaged.passRetained(record).toOpaque()
        let content = record.request!.content
        let unique = record.request!.uniqueHeader
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
                let method = record.request!.method
                pairs[0] = nv(":method", method.utf8Start, method.utf8CodeUnitCount, flags: noCopy)
                pairs[1] = target.pairs[0]
                pairs[2] = target.pairs[1]
                (pairs.baseAddress! + 4).update(from: shared.baseAddress!, count: shared.count)
                if let unique {
                    unique.format(into: value.baseAddress!)
                    // Never indexed (HPACK): a value sent once would only churn the table.
                    pairs[count - 1] = nghttp2_nv(
                        name: UnsafeMutablePointer(mutating: unique.name.utf8Start), value: value.baseAddress,
                        namelen: unique.name.utf8CodeUnitCount, valuelen: H2UUIDHeader.valueCount,
                        flags: UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue | NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue))
                }
                return record.request!.path.withUnsafeBufferPointer { path in
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
                tag: record.request!.tag, status: 0, apnsId: [], body: [], failure: .notSubmitted(id),
                unprocessed: nil, handedNanos: record.request!.handedNanos,
                submittedNanos: 0, endNanos: EventLoop.hrtimeNanos))
            return
        }
        openStreams += 1
        link(record, id)
        requestsSubmitted += 1
    }

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
        }
    }

    func fail(_ request: H2ClientRequest, _ failure: H2ClientFailure, submittedNanos: UInt64) {
        count(failure)
        deliver(H2ClientResponse(
            tag: request.tag, status: 0, apnsId: [], body: [], failure: failure,
            unprocessed: submittedNanos == 0 ? request : nil, handedNanos: request.handedNanos,
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
    /// of ids: no hashing per request.
    @exclusivity(unchecked) var openList: Unmanaged<ClientStream>?
    /// The record last looked up, by stream id (0: none): a response's callbacks (its header fields, frames, body
    /// chunks) come one stream at a time, so one nghttp2 lookup serves them all. Cleared when its stream closes.
    @exclusivity(unchecked) var lastRecordId: Int32 = 0
    @exclusivity(unchecked) var lastRecord: Unmanaged<ClientStream>?
    /// Records of streams that ended, for the next requests (``recycle(_:)``).
    @exclusivity(unchecked) var spareRecords: [ClientStream] = []

    func link(_ record: ClientStream, _ id: Int32) {
        record.streamId = id
        record.older = openList
        if let head = openList { head.takeUnretainedValue().newer = Unmanaged.passUnretained(record) }
        openList = Unmanaged.passUnretained(record)
    }

    func unlink(_ record: ClientStream) {
        if let newer = record.newer {
            newer.takeUnretainedValue().older = record.older
        } else {
            openList = record.older
        }
        if let older = record.older { older.takeUnretainedValue().newer = record.newer }
        record.newer = nil
        record.older = nil
    }
}
