internal import CNGHTTP2
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

/// One request for ``H2ClientConnection/submit(_:)``: its path, regular headers (lowercase names) and body. The
/// body array is the caller's: it is retained, not copied, until the stream is done with it.
public struct H2ClientRequest: Sendable {
    public var method: StaticString
    public var path: [UInt8]
    public var headers: HeaderList
    /// One more header of this request alone (e.g. its `apns-id`), so that `headers` can be shared by many requests.
    public var uniqueHeader: (name: StaticString, value: [UInt8])?
    public var body: [UInt8]
    /// The caller's handle for the request, handed back with its response.
    public var tag: Int

    public init(
        method: StaticString = "POST", path: [UInt8], headers: HeaderList,
        uniqueHeader: (name: StaticString, value: [UInt8])? = nil, body: [UInt8], tag: Int
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.uniqueHeader = uniqueHeader
        self.body = body
        self.tag = tag
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
    /// The `apns-id` header's bytes (empty when absent).
    public var apnsId: [UInt8]
    /// The body, up to ``H2ClientSettings/bodyLimit`` bytes (APNs's JSON reason).
    public var body: [UInt8]
    public var failure: H2ClientFailure?
    /// The request, when it failed without the server having processed it — never sent (queued at a GOAWAY or at
    /// the connection's end), or above a GOAWAY's last stream id — so that it may be sent again elsewhere.
    public var unprocessed: H2ClientRequest?
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
    public var onResponse: ((H2ClientConnection, H2ClientResponse) -> Void)?
    /// Called once when the server's first SETTINGS arrived (requests go out from then on).
    public var onReady: ((H2ClientConnection) -> Void)?
    /// Called once when the connection ended (``endReason`` says why); every request has been answered or failed.
    public var onClosed: ((H2ClientConnection) -> Void)?

    private let scheme: [UInt8]
    private let authority: [UInt8]
    private let tls: TLSSession?
    /// Where an in-memory connection's bytes go (``init(loop:output:settings:)``); nil with a socket.
    let output: ((UnsafeRawBufferPointer) -> Void)?
    // The hot fields are `@exclusivity(unchecked)`: the connection is confined to its loop's thread and no access
    // overlaps another (callgrind: the dynamic checks were ~10% of a request's instructions).
    @exclusivity(unchecked) var session: OpaquePointer?
    @exclusivity(unchecked) private(set) var stream: TCPStream?
    /// What a queue slot holds once its request left.
    private let vacant = H2ClientRequest(path: [], headers: HeaderList(), body: [], tag: 0)
    @exclusivity(unchecked) private var queue: [H2ClientRequest] = []
    @exclusivity(unchecked) private var queueHead = 0
    @exclusivity(unchecked) private var outgoing: [UInt8] = []
    @exclusivity(unchecked) private var inReceive = false
    @exclusivity(unchecked) private var inFlush = false
    @exclusivity(unchecked) private var finished = false

    /// The server's first SETTINGS arrived.
    @exclusivity(unchecked) public private(set) var isReady = false
    /// The server sent GOAWAY (no request is sent on this connection any more).
    @exclusivity(unchecked) public private(set) var goAwayReceived = false
    public private(set) var endReason: String?
    /// nghttp2's last error message (a protocol error it answered with GOAWAY or RST_STREAM by itself).
    var protocolError: String?
    /// Streams open now, and requests waiting for a free stream.
    @exclusivity(unchecked) public private(set) var openStreams = 0
    public var queuedRequests: Int { queue.count - queueHead }
    /// Requests handed to nghttp2, answers that ended, and requests failed (by kind).
    @exclusivity(unchecked) public private(set) var requestsSubmitted = 0
    @exclusivity(unchecked) public private(set) var responsesReceived = 0
    public private(set) var streamsReset = 0
    public private(set) var failedByGoAway = 0
    public private(set) var failedByConnectionEnd = 0
    public private(set) var failedSubmissions = 0
    public internal(set) var responsesTooLarge = 0
    /// The most requests that waited in the queue at once.
    @exclusivity(unchecked) public private(set) var maxQueued = 0
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
        scheme = Array((context == nil ? "http" : "https").utf8)
        self.authority = Array((authority ?? (host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)")).utf8)
        tls = try context.map { c throws(TLSError) in try TLSSession(clientContext: c, serverName: serverName ?? host) }
        output = nil
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
        self.output = output
        scheme = Array("http".utf8)
        authority = Array("in-memory".utf8)
        tls = nil
        startSession()
        flush()
    }

    deinit {
        if let stream, !stream.isClosed { stream.close() }
        if let session { nghttp2_session_del(session) }
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
            if !inReceive { flush() }
            return
        }
        queue.append(request)
        maxQueued = max(maxQueued, queuedRequests)
    }

    /// The last `content-length` value sent, as text (requests of one event share their body's length).
    @exclusivity(unchecked) private var lastContentLength = (count: -1, text: [UInt8]())

    private var streamLimit: Int { min(settings.maxConcurrentStreams, serverMaxConcurrentStreams) }

    /// Sends queued requests while streams are free.
    private func pump() {
        // Not into a session that is ending (a protocol error, a flood): nghttp2 would refuse the streams as if the
        // server had (REFUSED_STREAM); they wait, and fail unsent at the end.
        guard isReady, !finished, !goAwayReceived, endReason == nil else { return }
        let limit = streamLimit
        // The slot's request is moved out (swapped with an empty one): no copy, no retain of its arrays.
        var request = vacant
        while queueHead < queue.count && openStreams < limit {
            swap(&request, &queue[queueHead])
            queueHead += 1
            send(request)
        }
        if queueHead == queue.count {
            queue.removeAll(keepingCapacity: queue.capacity <= 4096)
            queueHead = 0
        } else if queueHead > 4096 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
    }

    private func send(_ request: H2ClientRequest) {
        guard let session else { return }
        let record = ClientStream(request: request, submittedNanos: EventLoop.hrtimeNanos, settings: settings)
        let user = Unmanaged.passRetained(record).toOpaque()
        if request.body.count != lastContentLength.count {
            lastContentLength = (request.body.count, Array(String(request.body.count).utf8))
        }
        let contentLength = lastContentLength.text
        let unique = request.uniqueHeader
        let id: Int32 = request.headers.withFields { base, fields in
            let count = 5 + fields.count + (unique == nil ? 0 : 1)
            return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: count) { pairs in
                func nv(
                    _ name: UnsafePointer<UInt8>, _ nameCount: Int, _ value: UnsafePointer<UInt8>?, _ valueCount: Int,
                    flags: UInt8 = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
                ) -> nghttp2_nv {
                    nghttp2_nv(
                        name: UnsafeMutablePointer(mutating: name), value: UnsafeMutablePointer(mutating: value),
                        namelen: nameCount, valuelen: valueCount, flags: flags)
                }
                return request.path.withUnsafeBufferPointer { path in
                    scheme.withUnsafeBufferPointer { scheme in
                        authority.withUnsafeBufferPointer { authority in
                            contentLength.withUnsafeBufferPointer { length in
                                let method = request.method
                                pairs[0] = nv(
                                    StaticString(":method").utf8Start, 7, method.utf8Start, method.utf8CodeUnitCount)
                                pairs[1] = nv(StaticString(":scheme").utf8Start, 7, scheme.baseAddress, scheme.count)
                                pairs[2] = nv(
                                    StaticString(":authority").utf8Start, 10, authority.baseAddress, authority.count)
                                pairs[3] = nv(StaticString(":path").utf8Start, 5, path.baseAddress, path.count)
                                pairs[4] = nv(
                                    StaticString("content-length").utf8Start, 14, length.baseAddress, length.count)
                                for (i, f) in fields.enumerated() {
                                    pairs[5 + i] = nv(
                                        base! + Int(f.name), Int(f.value - f.name), base! + Int(f.value),
                                        Int(f.end - f.value))
                                }
                                return (unique?.value ?? []).withUnsafeBufferPointer { value in
                                    if let unique {
                                        // Never indexed (HPACK): a value sent once would only churn the table.
                                        pairs[count - 1] = nv(
                                            unique.name.utf8Start, unique.name.utf8CodeUnitCount, value.baseAddress,
                                            value.count, flags: UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue))
                                    }
                                    if request.body.isEmpty {
                                        return nghttp2_submit_request(session, nil, pairs.baseAddress, count, nil, user)
                                    }
                                    var provider = CNGHTTP2_data_provider(nil) {
                                        session, id, buffer, length, flags, _, _ in
                                        H2ClientConnection.readBody(session, id, buffer!, length, flags!)
                                    }
                                    return nghttp2_submit_request(
                                        session, nil, pairs.baseAddress, count, &provider, user)
                                }
                            }
                        }
                    }
                }
            }
        }
        if id < 0 {
            Unmanaged<ClientStream>.fromOpaque(user).release()
            failedSubmissions += 1
            deliver(H2ClientResponse(
                tag: request.tag, status: 0, apnsId: [], body: [], failure: .notSubmitted(id), unprocessed: nil,
                submittedNanos: 0, endNanos: EventLoop.hrtimeNanos))
            return
        }
        openStreams += 1
        link(record, id)
        requestsSubmitted += 1
    }

    private func fail(_ request: H2ClientRequest, _ failure: H2ClientFailure, submittedNanos: UInt64) {
        switch failure {
        case .goAway: failedByGoAway += 1
        case .connectionEnded: failedByConnectionEnd += 1
        case .reset: streamsReset += 1
        case .notSubmitted: failedSubmissions += 1
        case .responseTooLarge: responsesTooLarge += 1
        }
        deliver(H2ClientResponse(
            tag: request.tag, status: 0, apnsId: [], body: [], failure: failure,
            unprocessed: submittedNanos == 0 ? request : nil,
            submittedNanos: submittedNanos, endNanos: EventLoop.hrtimeNanos))
    }

    private func deliver(_ response: H2ClientResponse) {
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

    // MARK: Connection

    private func startSession() {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            session, frame, name, nameLength, value, valueLength, _, _ in
            H2ClientConnection.header(
                session, frame!, UnsafeRawBufferPointer(start: name, count: nameLength),
                UnsafeRawBufferPointer(start: value, count: valueLength))
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { session, _, streamId, data, length, _ in
            H2ClientConnection.data(session, streamId, UnsafeRawBufferPointer(start: data, count: length))
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { session, frame, user in
            H2ClientConnection.with(user) { $0.frameReceived(session, frame!) }
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { session, streamId, code, user in
            H2ClientConnection.with(user) { $0.streamClosed(session, streamId, code) }
        }
        H2ClientConnection.watchErrors(callbacks)
        var created: OpaquePointer?
        let status = nghttp2_session_client_new(&created, callbacks, Unmanaged.passUnretained(self).toOpaque())
        precondition(status == 0 && created != nil, "nghttp2_session_client_new failed: \(status)")
        session = created
        var entries = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: settings.windowBytes),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: UInt32(clamping: settings.maxResponseHeaderBytes)),
        ]
        nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        nghttp2_session_set_local_window_size(
            created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(min(settings.windowBytes, 1 << 30)))
    }

    private func connected(_ result: Result<TCPStream, UVError>) {
        guard !finished else { return }
        switch result {
        case .failure(let error):
            stream = nil
            end("connect: \(error)")
        case .success(let stream):
            do {
                try stream.startReading(
                    onRead: { [unowned self] _, bytes in self.received(bytes) },
                    onEnd: { [unowned self] _, error in
                        self.end(error.map { "\($0)" } ?? "closed by the server")
                    })
                if let tls {
                    try tls.startHandshake()
                    tls.takeCiphertext { stream.write($0) }
                } else {
                    flush()
                }
            } catch {
                end("\(error)")
            }
        }
    }

    /// Input, as read from the socket (or handed in by a test).
    func received(_ bytes: UnsafeRawBufferPointer) {
        guard !finished else { return }
        if let tls {
            do {
                try tls.feed(bytes)
                try tls.readPlaintext { plain in self.process(plain) }
            } catch {
                tls.takeCiphertext { stream?.write($0) }
                end("TLS: \(error)")
                return
            }
        } else {
            process(bytes)
        }
        pump()
        flush()
    }

    private func process(_ bytes: UnsafeRawBufferPointer) {
        guard let session, !finished, bytes.count > 0 else { return }
        inReceive = true
        defer { inReceive = false }
        let consumed = nghttp2_session_mem_recv(
            session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        if consumed < 0 {
            endReason = endReason ?? "protocol error: " + String(cString: nghttp2_strerror(Int32(consumed)))
            nghttp2_session_terminate_session(session, UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue))
        }
    }

    /// Sends what nghttp2 has queued (through TLS when on), in one write; ends the connection once neither side
    /// has more to say.
    func flush() {
        guard let session, !finished, !inFlush, !inReceive, stream.map({ !$0.isClosed }) ?? (output != nil) else {
            return
        }
        inFlush = true
        defer { inFlush = false }
        if let tls, let stream, !tls.handshakeDone {
            tls.takeCiphertext { stream.write($0) }
            return
        }
        outgoing.removeAll(keepingCapacity: true)
        while true {
            var data: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 {
                endReason = endReason ?? "nghttp2: " + String(cString: nghttp2_strerror(Int32(n)))
                break
            }
            if n == 0 { break }
            outgoing.append(contentsOf: UnsafeRawBufferPointer(start: data, count: n))
        }
        if let tls, let stream {
            if !outgoing.isEmpty {
                let failed: Bool = outgoing.withUnsafeBytes { bytes in
                    do {
                        try tls.writePlaintext(bytes)
                        return false
                    } catch {
                        return true
                    }
                }
                if failed { endReason = endReason ?? "TLS write failed" }
            }
            tls.takeCiphertext { stream.write($0) }
        } else if !outgoing.isEmpty {
            outgoing.withUnsafeBytes { bytes in if let stream { stream.write(bytes) } else { output?(bytes) } }
        }
        if let overflow = unsentOverflow() {
            end(overflow)
            return
        }
        if outgoing.capacity > 1 << 20 { outgoing = [] }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            inFlush = false
            end(endReason ?? (goAwayReceived ? "GOAWAY from the server" : protocolError ?? "session ended"))
        }
    }

    /// The end: the socket closes once written, open streams and queued requests fail, the owner is told.
    private func end(_ reason: String) {
        guard !finished else { return }
        finished = true
        endReason = endReason ?? reason
        stream?.closeWhenDrained(withinMillis: 1000)
        // Streams still open: nghttp2 would close them in nghttp2_session_del without our callbacks; fail them here.
        if let session {
            // Sent and still open: the server may have processed them (not handed back for another try).
            let failure = H2ClientFailure.connectionEnded
            while let head = openList {
                let record = head.takeUnretainedValue()
                unlink(record)
                nghttp2_session_set_stream_user_data(session, record.streamId, nil)
                head.release()
                openStreams -= 1
                finishStream(record, failure: failure)
            }
        }
        let waiting = queue[queueHead...]
        queue = []
        queueHead = 0
        for request in waiting { fail(request, goAwayReceived ? .goAway : .connectionEnded, submittedNanos: 0) }
        onClosed?(self)
        // onResponse stays: a request submitted after the end still fails in it (it was dropped unanswered, found
        // by the push fuzz target); the owner's closure must not hold the connection strongly.
        onReady = nil
        onClosed = nil
    }

    /// The streams open now, newest first, linked through their records (to fail them at the end; nghttp2 offers
    /// no iteration). Each record is retained by its stream's user data while it is in the list; a list, not a set
    /// of ids: no hashing per request.
    @exclusivity(unchecked) private var openList: Unmanaged<ClientStream>?

    private func link(_ record: ClientStream, _ id: Int32) {
        record.streamId = id
        record.older = openList
        if let head = openList { head.takeUnretainedValue().newer = Unmanaged.passUnretained(record) }
        openList = Unmanaged.passUnretained(record)
    }

    private func unlink(_ record: ClientStream) {
        if let newer = record.newer {
            newer.takeUnretainedValue().older = record.older
        } else {
            openList = record.older
        }
        if let older = record.older { older.takeUnretainedValue().newer = record.newer }
        record.newer = nil
        record.older = nil
    }

    // MARK: nghttp2 callbacks

    @inline(__always)
    static func with<R>(_ user: UnsafeMutableRawPointer?, _ body: (H2ClientConnection) -> R) -> R {
        Unmanaged<H2ClientConnection>.fromOpaque(user!)._withUnsafeGuaranteedRef(body)
    }

    @inline(__always)
    static func record(_ session: OpaquePointer?, _ id: Int32) -> ClientStream? {
        guard let user = nghttp2_session_get_stream_user_data(session, id) else { return nil }
        return Unmanaged<ClientStream>.fromOpaque(user).takeUnretainedValue()
    }

    private static func header(
        _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>, _ name: UnsafeRawBufferPointer,
        _ value: UnsafeRawBufferPointer
    ) -> Int32 {
        guard let record = record(session, frame.pointee.hd.stream_id) else { return 0 }
        // Past the header bound: nghttp2 resets the stream and hands over no more of the block.
        guard record.bounds.admit(field: name.count + value.count) else {
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        guard frame.pointee.headers.cat == NGHTTP2_HCAT_RESPONSE else { return 0 }
        func named(_ text: StaticString) -> Bool {
            name.count == text.utf8CodeUnitCount && memcmp(name.baseAddress!, text.utf8Start, name.count) == 0
        }
        if named(":status") {
            var status = 0
            for byte in value where byte >= 0x30 && byte <= 0x39 { status = status * 10 + Int(byte - 0x30) }
            record.status = status
        } else if named("apns-id") {
            record.apnsId = Array(value)
        }
        return 0
    }

    private static func data(_ session: OpaquePointer?, _ id: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard let record = record(session, id) else { return 0 }
        if !record.bounds.admit(body: bytes.count) { return bodyTooLarge(session, id) }
        let room = record.bodyLimit - record.response.count
        if room > 0 { record.response.append(contentsOf: bytes.prefix(room)) }
        return 0
    }

    private func frameReceived(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let type = UInt32(frame.pointee.hd.type)
        if type == NGHTTP2_SETTINGS.rawValue && frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
            if !isReady {
                isReady = true
                onReady?(self)
            }
        } else if type == NGHTTP2_GOAWAY.rawValue {
            goAwayReceived = true
            endReason = endReason ?? "GOAWAY from the server (error \(frame.pointee.goaway.error_code))"
        } else if type == NGHTTP2_HEADERS.rawValue || type == NGHTTP2_DATA.rawValue,
            frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0,
            let record = H2ClientConnection.record(session, frame.pointee.hd.stream_id)
        {
            record.endNanos = EventLoop.hrtimeNanos
        }
        return 0
    }

    private func streamClosed(_ session: OpaquePointer?, _ id: Int32, _ code: UInt32) -> Int32 {
        guard let user = nghttp2_session_get_stream_user_data(session, id) else { return 0 }
        nghttp2_session_set_stream_user_data(session, id, nil)
        let record = Unmanaged<ClientStream>.fromOpaque(user).takeRetainedValue()
        unlink(record)
        openStreams -= 1
        if record.endNanos != 0 && record.status != 0 {
            finishStream(record, failure: nil)
        } else if goAwayReceived && code == NGHTTP2_REFUSED_STREAM.rawValue {
            finishStream(record, failure: .goAway)
        } else {
            finishStream(record, failure: code == 0 ? .connectionEnded : .reset(code))
        }
        return 0
    }

    private func finishStream(_ record: ClientStream, failure: H2ClientFailure?) {
        let failure = record.bounds.exceeded.map { H2ClientFailure.responseTooLarge($0) } ?? failure
        switch failure {
        case nil: responsesReceived += 1
        case .reset: streamsReset += 1
        case .goAway: failedByGoAway += 1
        case .connectionEnded: failedByConnectionEnd += 1
        case .notSubmitted: failedSubmissions += 1
        case .responseTooLarge: responsesTooLarge += 1
        }
        deliver(H2ClientResponse(
            tag: record.request.tag, status: failure == nil ? record.status : 0, apnsId: record.apnsId,
            body: record.response, failure: failure, unprocessed: failure == .goAway ? record.request : nil,
            submittedNanos: record.submittedNanos, endNanos: failure == nil ? record.endNanos : EventLoop.hrtimeNanos))
    }

    private static func readBody(
        _ session: OpaquePointer?, _ id: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ length: Int,
        _ flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let record = record(session, id) else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let n = min(length, record.body.count - record.bodyOffset)
        record.body.withUnsafeBytes { bytes in
            UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + record.bodyOffset, byteCount: n)
        }
        record.bodyOffset += n
        if record.bodyOffset == record.body.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return n
    }
}

/// One open stream's state, nghttp2's stream user data (retained from submit to close).
final class ClientStream {
    /// Kept whole (its arrays retained, not copied): a stream refused by a GOAWAY hands it back for another try.
    let request: H2ClientRequest
    var body: [UInt8] { request.body }
    var bodyOffset = 0
    let submittedNanos: UInt64
    var status = 0
    var apnsId: [UInt8] = []
    var response: [UInt8] = []
    var endNanos: UInt64 = 0
    let bodyLimit: Int
    /// The answer's header fields and body bytes so far, against the connection's bounds.
    var bounds: ResponseBounds
    /// Its stream, and its neighbours in the connection's list of open streams (not retained: the stream's user
    /// data holds the record while it is listed).
    var streamId: Int32 = 0
    var newer: Unmanaged<ClientStream>?
    var older: Unmanaged<ClientStream>?

    init(request: H2ClientRequest, submittedNanos: UInt64, settings: H2ClientSettings) {
        bodyLimit = settings.bodyLimit
        bounds = ResponseBounds(settings)
        self.request = request
        self.submittedNanos = submittedNanos
    }
}
