internal import CNGHTTP2
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

/// What the server side of a connection tells its owner.
public protocol H2ServerDelegate: AnyObject {
    /// A request is complete (headers and body up to END_STREAM). Answer it with
    /// ``H2ServerConnection/respond(to:with:)``, now or later.
    func connection(_ connection: H2ServerConnection, received request: H2Request)
    /// The connection is gone (closed by either side); its counts are final.
    func connectionClosed(_ connection: H2ServerConnection)
    /// A chunk of input was processed and the answers to it were flushed.
    func connectionDidProcessInput(_ connection: H2ServerConnection)
}

extension H2ServerDelegate {
    public func connectionDidProcessInput(_ connection: H2ServerConnection) {}
}

/// Limits and settings of a server connection.
public struct H2ServerSettings: Sendable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS advertised once the connection may send (see `initialMaxStreams`).
    public var maxConcurrentStreams: UInt32 = 1000
    /// Advertised at first (1 under token authentication, as APNs does, raised by `raiseStreamLimit`).
    public var initialMaxStreams: UInt32 = 1000
    /// SETTINGS_MAX_HEADER_LIST_SIZE; a stream whose header list is larger is reset.
    public var maxHeaderListBytes = 16 * 1024
    /// Body bytes kept per request (the answer to a larger body is the caller's, e.g. 413).
    public var bodyLimit = 5120
    /// Stop reading from a client while this many response bytes wait for it (a slow reader).
    public var maxPendingWriteBytes = 1 << 20

    public init() {}
}

/// The server side of one HTTP/2 connection: nghttp2 driven through its memory interface
/// (`nghttp2_session_mem_recv` / `mem_send`) from the loop's read callback, optionally under TLS over memory
/// BIOs. Every request is handed to the delegate once complete; responses are submitted from the loop
/// thread. Confined to its loop's thread.
public final class H2ServerConnection {
    /// The socket; nil for an in-memory connection (`init(output:settings:)`), whose bytes go to `output`.
    public let stream: TCPStream?
    private let output: ((UnsafeRawBufferPointer) -> Void)?
    public let settings: H2ServerSettings
    /// Held strongly until the connection finishes (then cleared): a weak reference would give the delegate a
    /// side table, and every retain and release of it the slow path.
    @exclusivity(unchecked) public var delegate: (any H2ServerDelegate)?
    /// The owner's state for this connection (e.g. its provider-token verdicts), kept with it so that finding
    /// it costs no lookup per request.
    @exclusivity(unchecked) public var context: AnyObject?
    @exclusivity(unchecked) private var session: OpaquePointer?
    private let tls: TLSSession?
    @exclusivity(unchecked) private var streams = StreamTable()
    /// Finished requests, reused for new streams (their buffers keep their capacity).
    @exclusivity(unchecked) private var pool: [H2Request] = []

    /// A response's header names and values, and where each is (reused).
    @exclusivity(unchecked) private var headerBytes: [UInt8] = []
    @exclusivity(unchecked) private var headerRanges: [(name: Int32, value: Int32, end: Int32, flags: UInt8)] = []

    /// The statuses APNs answers with, as static text (no String per response).
    static func statusText(_ status: Int) -> StaticString? {
        switch status {
        case 200: "200"
        case 201: "201"
        case 204: "204"
        case 400: "400"
        case 403: "403"
        case 404: "404"
        case 405: "405"
        case 410: "410"
        case 413: "413"
        case 429: "429"
        case 500: "500"
        case 503: "503"
        default: nil
        }
    }

    /// Bytes of one flush, written at once.
    @exclusivity(unchecked) private var outgoing: [UInt8] = []
    /// The stream the last callback was about: nghttp2 calls back several times per frame for one stream
    /// (each header, each data chunk), so most lookups skip the dictionary.
    @exclusivity(unchecked) private var lastStream: H2Request?

    @inline(__always)
    private func stream(_ id: Int32) -> H2Request? {
        if let last = lastStream, last.streamId == id { return last }
        let found = streams.find(id)
        lastStream = found
        return found
    }
    @exclusivity(unchecked) private var inFlush = false
    /// Inside `nghttp2_session_mem_recv` (its callbacks may submit, but must not send).
    @exclusivity(unchecked) private var inReceive = false
    @exclusivity(unchecked) private var finished = false

    /// Monotonic nanoseconds of the last bytes read (idle and preface timeouts read it).
    @exclusivity(unchecked) public private(set) var lastActivityNanos: UInt64
    public let openedNanos: UInt64
    /// Whether a valid HTTP/2 preface and SETTINGS arrived.
    @exclusivity(unchecked) public private(set) var prefaceReceived = false
    @exclusivity(unchecked) public private(set) var requestsReceived = 0
    @exclusivity(unchecked) public private(set) var streamsReset = 0
    /// Why the connection ended (a protocol error, a TLS failure, a timeout, shutdown), if it did.
    @exclusivity(unchecked) public private(set) var endReason: String?

    public init(stream: TCPStream, tls context: TLSContext?, settings: H2ServerSettings) throws(TLSError) {
        self.stream = stream
        output = nil
        self.settings = settings
        tls = try context.map { c throws(TLSError) in try TLSSession(context: c) }
        openedNanos = EventLoop.hrtimeNanos
        lastActivityNanos = openedNanos
    }

    /// A cleartext connection without a socket: input comes from ``receive(_:)``, output goes to `output` (the
    /// fuzz target and tests drive the server side this way).
    public init(output: @escaping (UnsafeRawBufferPointer) -> Void, settings: H2ServerSettings) {
        stream = nil
        self.output = output
        self.settings = settings
        tls = nil
        openedNanos = EventLoop.hrtimeNanos
        lastActivityNanos = openedNanos
    }

    /// Bytes read and written over the connection's life (socket connections).
    public var bytesRead: Int { stream?.bytesRead ?? 0 }
    public var bytesWritten: Int { (stream?.bytesWritten ?? 0) + (stream?.pendingWriteBytes ?? 0) }

    /// Input for an in-memory connection, as if read from a socket.
    public func receive(_ bytes: UnsafeRawBufferPointer) {
        received(bytes)
    }

    private func emit(_ bytes: UnsafeRawBufferPointer) {
        if let stream { stream.write(bytes) } else { output?(bytes) }
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Creates the nghttp2 session, sends the server's SETTINGS and starts reading.
    public func start() throws(UVError) {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            H2ServerConnection.with(user) { $0.beginHeaders(frame!) }
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            H2ServerConnection.with(user) {
                $0.header(
                    frame!, UnsafeRawBufferPointer(start: name, count: nameLength),
                    UnsafeRawBufferPointer(start: value, count: valueLength))
            }
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamId, data, length, user in
            H2ServerConnection.with(user) { $0.data(streamId, UnsafeRawBufferPointer(start: data, count: length)) }
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            H2ServerConnection.with(user) { $0.frameReceived(frame!) }
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamId, _, user in
            H2ServerConnection.with(user) { $0.streamClosed(streamId) }
        }
        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        // Keep up to 1000 streams' worth of closed-stream state; answer a flood with GOAWAY (nghttp2's own
        // protections against SETTINGS/PING floods stay on).
        nghttp2_option_set_max_settings(option, 64)
        var created: OpaquePointer?
        let status = nghttp2_session_server_new2(
            &created, callbacks, Unmanaged.passUnretained(self).toOpaque(), option)
        precondition(status == 0 && created != nil, "nghttp2_session_server_new2 failed: \(status)")
        session = created
        var entries = [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: settings.initialMaxStreams),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: UInt32(settings.maxHeaderListBytes)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20),
        ]
        nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        // The connection's receive window as large as a stream's (a WINDOW_UPDATE on stream 0).
        nghttp2_session_set_local_window_size(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, 1 << 20)
        if let stream {
            // Strong captures, not weak ones (a weak reference would put every retain and release of the
            // connection on the runtime's slow path): the stream drops these closures when it closes or is
            // told to close when drained, which `finish()` does, so the cycle ends with the connection.
            stream.onDrain = { s in
                guard !self.finished else { return }
                try? s.resumeReading()
            }
            try stream.startReading(
                onRead: { _, bytes in self.received(bytes) },
                onEnd: { _, error in self.end(error.map { "\($0)" } ?? "closed by the client") })
        }
        if tls == nil { flush() }
    }

    /// Advertises `maxConcurrentStreams` (after the first valid provider token, as APNs does).
    public func raiseStreamLimit() {
        guard let session else { return }
        var entry = nghttp2_settings_entry(
            settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: settings.maxConcurrentStreams)
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entry, 1)
    }

    /// Submits the response of a request that has not been answered; bytes go out at the next flush (at the
    /// end of the current read callback, or now when called outside one).
    public func respond(to request: H2Request, with response: H2Response) {
        guard let session, !request.answered, stream(request.streamId) === request else { return }
        request.answered = true
        request.response = response.body
        // Every name and value in one buffer, reused from response to response; nghttp2 copies the pairs into
        // its frame on submit.
        headerBytes.removeAll(keepingCapacity: true)
        headerRanges.removeAll(keepingCapacity: true)
        func add(_ name: some Sequence<UInt8>, _ value: some Sequence<UInt8>, flags: UInt8 = 0) {
            let n = headerBytes.count
            headerBytes.append(contentsOf: name)
            let v = headerBytes.count
            headerBytes.append(contentsOf: value)
            headerRanges.append((Int32(n), Int32(v), Int32(headerBytes.count), flags))
        }
        func bytes(_ text: StaticString) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
        }
        if let text = H2ServerConnection.statusText(response.status) {
            add(bytes(":status"), bytes(text))
        } else {
            add(bytes(":status"), String(response.status).utf8)
        }
        let never = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
        if let id = response.id { id.withValue { add(bytes(id.name), $0, flags: never) } }
        if let id = response.extraId { id.withValue { add(bytes(id.name), $0, flags: never) } }
        for header in response.headers { add(header.name.utf8, header.value.utf8) }
        if !response.body.isEmpty { add(bytes("content-length"), String(response.body.count).utf8) }
        let ranges = headerRanges
        let status: Int32 = headerBytes.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: ranges.count) { pairs in
                for (i, r) in ranges.enumerated() {
                    pairs[i] = nghttp2_nv(
                        name: base + Int(r.name), value: base + Int(r.value), namelen: Int(r.value - r.name),
                        valuelen: Int(r.end - r.value), flags: r.flags)
                }
                if response.body.isEmpty {
                    return nghttp2_submit_response(session, request.streamId, pairs.baseAddress, ranges.count, nil)
                }
                var provider = CNGHTTP2_data_provider(nil) { session, streamId, buffer, length, dataFlags, _, user in
                    H2ServerConnection.with(user) { $0.readBody(streamId, buffer!, length, dataFlags!) }
                }
                return nghttp2_submit_response(session, request.streamId, pairs.baseAddress, ranges.count, &provider)
            }
        }
        if status != 0 { streamsReset += 1 }
        if !inFlush && !inReceive { flush() }
    }

    /// Graceful end: GOAWAY with NO_ERROR and `{"reason": reason}` as debug data; streams already opened
    /// finish; the connection closes when nothing is left to send or receive.
    public func goAway(reason: String, errorCode: UInt32 = 0) {
        guard let session, !finished else { return }
        endReason = endReason ?? reason
        let debug = Array("{\"reason\":\"\(reason)\"}".utf8)
        let last = nghttp2_session_get_last_proc_stream_id(session)
        _ = debug.withUnsafeBufferPointer {
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, errorCode, $0.baseAddress, $0.count)
        }
        flush()
    }

    /// Closes at once, without GOAWAY (a client that never spoke HTTP/2).
    public func abort(reason: String) {
        endReason = endReason ?? reason
        finish()
    }


    // MARK: Input

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard !finished else { return }
        lastActivityNanos = EventLoop.hrtimeNanos
        if let tls {
            do {
                try tls.feed(bytes)
                try tls.readPlaintext { plain in self.process(plain) }
            } catch {
                tls.takeCiphertext { emit($0) }
                end("TLS: \(error)")
                return
            }
        } else {
            process(bytes)
        }
        flush()
        delegate?.connectionDidProcessInput(self)
    }

    private func process(_ bytes: UnsafeRawBufferPointer) {
        guard let session, !finished, bytes.count > 0 else { return }
        inReceive = true
        defer { inReceive = false }
        let consumed = nghttp2_session_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        if consumed < 0 {
            let code = Int32(consumed)
            if code == NGHTTP2_ERR_BAD_CLIENT_MAGIC.rawValue {
                abort(reason: "no HTTP/2 preface")
                return
            }
            // nghttp2 has queued a GOAWAY for protocol errors it detected; send it, then close.
            endReason = endReason ?? "protocol error: " + String(cString: nghttp2_strerror(code))
            nghttp2_session_terminate_session(session, UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue))
        }
    }

    // MARK: nghttp2 callbacks (capture-free, forwarded here)

    /// The connection behind nghttp2's user data, borrowed for the callback: the session lives inside the
    /// connection, so no retain/release is needed per callback (8 or more per request).
    @inline(__always)
    private static func with<R>(_ user: UnsafeMutableRawPointer?, _ body: (H2ServerConnection) -> R) -> R {
        Unmanaged<H2ServerConnection>.fromOpaque(user!)._withUnsafeGuaranteedRef(body)
    }

    private func beginHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
            frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
        else { return 0 }
        let id = frame.pointee.hd.stream_id
        let request: H2Request
        if let pooled = pool.popLast() {
            pooled.reuse(streamId: id, arrivalNanos: EventLoop.hrtimeNanos)
            request = pooled
        } else {
            request = H2Request(streamId: id, arrivalNanos: EventLoop.hrtimeNanos, bodyLimit: settings.bodyLimit)
        }
        streams.insert(request)
        lastStream = request
        return 0
    }

    private func header(
        _ frame: UnsafePointer<nghttp2_frame>, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer
    ) -> Int32 {
        guard let request = stream(frame.pointee.hd.stream_id) else { return 0 }
        request.headerListBytes += name.count + value.count + 32
        if request.headerListBytes > settings.maxHeaderListBytes {
            // Reset the stream (RST_STREAM); the connection goes on.
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        if name.first == UInt8(ascii: ":") {
            func set(_ field: inout [UInt8]) {
                if !field.isEmpty { request.duplicatePseudoHeader = true }
                field.removeAll(keepingCapacity: true)  // the reused request's buffer, no allocation
                field.append(contentsOf: value)
            }
            func named(_ text: StaticString) -> Bool {
                name.count == text.utf8CodeUnitCount && memcmp(name.baseAddress!, text.utf8Start, name.count) == 0
            }
            if named(":method") {
                set(&request.method)
            } else if named(":path") {
                set(&request.path)
            } else if named(":authority") {
                if request.seenAuthority { request.duplicatePseudoHeader = true }
                request.seenAuthority = true
            } else if named(":scheme") {
                if request.seenScheme { request.duplicatePseudoHeader = true }
                request.seenScheme = true
            }
        } else {
            request.headers.append(name: name, value: value)
        }
        return 0
    }

    private func data(_ streamId: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        stream(streamId)?.appendBody(bytes)
        return 0
    }

    private func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let type = UInt32(frame.pointee.hd.type)
        if type == NGHTTP2_SETTINGS.rawValue { prefaceReceived = true }
        guard type == NGHTTP2_HEADERS.rawValue || type == NGHTTP2_DATA.rawValue,
            frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0,
            let request = stream(frame.pointee.hd.stream_id)
        else { return 0 }
        request.completeNanos = EventLoop.hrtimeNanos
        requestsReceived += 1
        delegate?.connection(self, received: request)
        return 0
    }

    private func streamClosed(_ streamId: Int32) -> Int32 {
        if lastStream?.streamId == streamId { lastStream = nil }
        if let request = streams.remove(streamId) {
            if !request.answered { streamsReset += 1 }
            // Reused for a later stream unless its owner keeps it, or it holds a large body.
            if !request.retained && pool.count < 64 && request.body.capacity <= 8192 { pool.append(request) }
        }
        return 0
    }

    private func readBody(
        _ streamId: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ length: Int, _ flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let request = stream(streamId) else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let n = min(length, request.response.count - request.responseOffset)
        request.response.withUnsafeBytes { bytes in
            UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + request.responseOffset, byteCount: n)
        }
        request.responseOffset += n
        if request.responseOffset == request.response.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return n
    }

    // MARK: Output

    /// Sends what nghttp2 has queued (through TLS when on); closes once neither side has more to say.
    public func flush() {
        guard let session, !finished, !inFlush, !inReceive else { return }
        inFlush = true
        defer { inFlush = false }
        if let tls, !tls.handshakeDone {
            tls.takeCiphertext { emit($0) }
            return
        }
        // Everything nghttp2 has queued goes out in one write (one TLS record run, one syscall), not one per
        // frame: at 64 streams a read, per-frame writes cost more than the requests.
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
        if !outgoing.isEmpty {
            if let tls {
                let failure: TLSError? = outgoing.withUnsafeBytes { bytes -> TLSError? in
                    do {
                        try tls.writePlaintext(bytes)
                        return nil
                    } catch {
                        return (error as? TLSError) ?? TLSError("TLS write failed")
                    }
                }
                if let failure { endReason = endReason ?? "TLS: \(failure)" }
                outgoing.removeAll(keepingCapacity: true)
                tls.takeCiphertext { outgoing.append(contentsOf: $0) }
            }
            outgoing.withUnsafeBytes { emit($0) }
        } else {
            tls?.takeCiphertext { emit($0) }
        }
        if outgoing.capacity > 1 << 20 { outgoing = [] }  // a burst's buffer is not kept forever
        if let stream, stream.pendingWriteBytes > settings.maxPendingWriteBytes { stream.pauseReading() }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            inFlush = false
            endReason = endReason ?? "HTTP/2 session ended (GOAWAY)"
            finish()
        }
    }

    private func end(_ reason: String) {
        endReason = endReason ?? reason
        finish()
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        stream?.closeWhenDrained()
        streams.removeAll()
        pool.removeAll()
        lastStream = nil
        delegate?.connectionClosed(self)
        delegate = nil
    }
}
