import FanoutCore
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
    /// Output backpressure (as nghttp2's `libevent-server.c`): no more frames are taken from nghttp2 while this
    /// many bytes wait on the socket, and reading stops until they drain (a client that does not read).
    public var outputWatermarkBytes = 64 * 1024
    /// How long a finished connection's socket may take to flush what is queued before it is closed anyway.
    public var drainMillis: UInt64 = 5000
    /// A finished request goes back to the pool only if its buffers hold at most this many bytes in all
    /// (headers, path, method, body), so an idle connection keeps at most 64 × this.
    public var pooledRequestBytes = 16 * 1024
    /// nghttp2's blocks a connection keeps for reuse once freed (its allocator, ``NGHTTP2Pool``); past this, a
    /// freed block goes back to malloc: what a burst of streams leaves a connection holding (at most this times
    /// the connections). With 100 streams in flight serve's pool kept at most 59,760 bytes (push-bench.json,
    /// under push and under h2load alike).
    public var memoryCacheBytes = 64 << 10

    public init() {}
}

/// The server side of one HTTP/2 connection: nghttp2 driven through its memory interface
/// (`nghttp2_session_mem_recv` / `mem_send`) from the loop's read callback, optionally under TLS over memory
/// BIOs. Every request is handed to the delegate once complete; responses are submitted from the loop
/// thread. Confined to its loop's thread.
public final class H2ServerConnection {
    /// The socket, TLS, and nghttp2's input and output (shared with the client side).
    let transport: H2Transport
    /// The socket; nil for an in-memory connection (`init(output:settings:)`), whose bytes go to `output`.
    public var stream: TCPStream? { transport.stream }
    public let settings: H2ServerSettings
    /// Held strongly until the connection finishes (then cleared): a weak reference would give the delegate a
    /// side table, and every retain and release of it the slow path.
    @exclusivity(unchecked) public var delegate: (any H2ServerDelegate)?
    /// The owner's state for this connection (e.g. its provider-token verdicts), kept with it so that finding
    /// it costs no lookup per request.
    @exclusivity(unchecked) public var context: AnyObject?
    /// Open streams of every connection on the loop (server-wide budget); nil: no budget.
    @exclusivity(unchecked) public var budget: StreamBudget?
    @exclusivity(unchecked) var session: OpaquePointer?
    /// nghttp2's allocator for the session (deleted in deinit, before it): at most `settings.memoryCacheBytes`
    /// kept free.
    let memory: NGHTTP2Pool
    @exclusivity(unchecked) var streams = StreamTable()
    /// Finished requests, reused for new streams (their buffers keep their capacity).
    @exclusivity(unchecked) var pool: [H2Request] = []
    /// Streams whose request is not complete yet (no END_STREAM), oldest first: the request deadline reads the
    /// head only. Linked through the requests themselves (no allocation).
    @exclusivity(unchecked) var incomplete = IncompleteRequests()

    /// A response's header names and values, and where each is (reused).
    @exclusivity(unchecked) var headerBytes: [UInt8] = []
    @exclusivity(unchecked) var headerRanges: [(name: Int32, value: Int32, end: Int32, flags: UInt8)] = []

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

    /// The stream the last callback was about: nghttp2 calls back several times per frame for one stream
    /// (each header, each data chunk), so most lookups skip the dictionary.
    /// Unretained: `streams` holds it, and it is cleared or replaced whenever it leaves `streams` (a stream's close,
    /// the same id inserted again, the connection's end).
    @exclusivity(unchecked) var lastStream: Unmanaged<H2Request>?

    @inline(__always)
    func stream(_ id: Int32) -> H2Request? { withStream(id, else: nil) { $0 } }

    /// `body` with the request of stream `id`, borrowed (no retain and release: nghttp2 calls back per header
    /// field and per DATA chunk), or `fallback` when the stream is not open.
    @inline(__always)
    func withStream<R>(_ id: Int32, else fallback: R, _ body: (H2Request) -> R) -> R {
        if let last = lastStream, last._withUnsafeGuaranteedRef({ $0.streamId }) == id {
            return last._withUnsafeGuaranteedRef(body)
        }
        guard let found = streams.find(id) else { return fallback }
        let unmanaged = Unmanaged.passUnretained(found)
        lastStream = unmanaged
        return unmanaged._withUnsafeGuaranteedRef(body)
    }
    var finished: Bool {
        get { transport.finished }
        set { transport.finished = newValue }
    }
    /// A GOAWAY was sent (``goAway(reason:errorCode:endReason:)``): no new stream will be served.
    @exclusivity(unchecked) public internal(set) var goingAway = false
    /// Output stopped at the watermark (reading too), until the socket drains.
    @exclusivity(unchecked) public internal(set) var outputPaused = false
    /// The client sent GOAWAY (with this error code); nghttp2 found an invalid frame (this library error).
    @exclusivity(unchecked) var peerGoAwayCode: UInt32?
    @exclusivity(unchecked) var invalidFrameError: Int32?
    /// What the idle and stall clocks last saw (see ``idleNanos(now:)``).
    @exclusivity(unchecked) var idle = (sinceNanos: UInt64(0), opened: -1, written: -1)

    public let openedNanos: UInt64
    /// Whether a valid HTTP/2 preface and SETTINGS arrived.
    @exclusivity(unchecked) public internal(set) var prefaceReceived = false
    /// Streams the client opened (HEADERS), and requests complete (END_STREAM) handed to the delegate.
    @exclusivity(unchecked) public internal(set) var streamsOpened = 0
    @exclusivity(unchecked) public internal(set) var requestsReceived = 0
    /// Answers nghttp2 accepted for sending (`nghttp2_submit_response` returned 0).
    @exclusivity(unchecked) public internal(set) var responsesSubmitted = 0
    /// Answers given to ``respond(to:with:)`` that could not be submitted: the stream was already closed or reset
    /// (or answered), or nghttp2 refused the submission.
    @exclusivity(unchecked) public internal(set) var answersDropped = 0
    /// Streams closed (reset by either side, or at the connection's end) before an answer was submitted.
    @exclusivity(unchecked) public internal(set) var streamsReset = 0
    /// New streams refused with RST_STREAM REFUSED_STREAM because the loop's ``budget`` was spent.
    @exclusivity(unchecked) public internal(set) var streamsRefused = 0
    /// Streams reset (CANCEL) because their request was not complete by the request deadline.
    @exclusivity(unchecked) public internal(set) var requestTimeouts = 0
    /// Requests refused (RST_STREAM REFUSED_STREAM) by the owner with ``refuse(_:)`` before they were judged,
    /// e.g. because too many answer bytes wait unsent for this client.
    @exclusivity(unchecked) public internal(set) var requestsRefused = 0
    /// Answer-body bytes submitted and not yet taken by nghttp2 for sending: what this client's answers hold in
    /// memory (a client that does not read keeps them here once the output pauses).
    @exclusivity(unchecked) public internal(set) var unsentAnswerBytes = 0
    /// Times output stopped at ``H2ServerSettings/outputWatermarkBytes`` (and reading with it).
    @exclusivity(unchecked) public internal(set) var outputPauses = 0
    /// Trailer fields received (HEADERS after the request's headers): counted against the header-list limit, not
    /// kept.
    @exclusivity(unchecked) public internal(set) var trailerFields = 0
    /// Why the connection ended (a protocol error, a TLS failure, a timeout, shutdown), if it did.
    public internal(set) var endReason: String? {
        get { transport.endReason }
        set { transport.endReason = newValue }
    }

    public init(stream: TCPStream, tls context: TLSContext?, settings: H2ServerSettings) throws(TLSError) {
        transport = H2Transport(
            stream: stream, output: nil, tls: try context.map { c throws(TLSError) in try TLSSession(context: c) },
            watermark: settings.outputWatermarkBytes)
        self.settings = settings
        memory = NGHTTP2Pool(cacheLimit: settings.memoryCacheBytes)
        openedNanos = EventLoop.hrtimeNanos
    }

    /// A cleartext connection without a socket: input comes from ``receive(_:)``, output goes to `output` (the
    /// fuzz target and tests drive the server side this way).
    public init(output: @escaping (UnsafeRawBufferPointer) -> Void, settings: H2ServerSettings) {
        transport = H2Transport(stream: nil, output: output, tls: nil, watermark: .max)
        self.settings = settings
        memory = NGHTTP2Pool(cacheLimit: settings.memoryCacheBytes)
        openedNanos = EventLoop.hrtimeNanos
    }

    /// An in-memory connection over TLS (`context`, a server's): ``receive(_:)`` takes ciphertext and `output`
    /// gets TLS records, as a socket's would (the serve fuzz target's TLS inputs).
    public init(
        output: @escaping (UnsafeRawBufferPointer) -> Void, tls context: TLSContext, settings: H2ServerSettings
    ) throws(TLSError) {
        transport = H2Transport(stream: nil, output: output, tls: try TLSSession(context: context), watermark: .max)
        self.settings = settings
        memory = NGHTTP2Pool(cacheLimit: settings.memoryCacheBytes)
        openedNanos = EventLoop.hrtimeNanos
    }

    /// Whether the connection is over TLS.
    public var isTLS: Bool { transport.tls != nil }

    /// Bytes read and written over the connection's life (socket connections).
    public var bytesRead: Int { stream?.bytesRead ?? 0 }
    /// Flushes that wrote some of nghttp2's output (a socket write, or in memory one flush's chunks).
    public var writes: Int { transport.writes }
    public var bytesWritten: Int { (stream?.bytesWritten ?? 0) + (stream?.pendingWriteBytes ?? 0) }

    /// Input for an in-memory connection, as if read from a socket.
    public func receive(_ bytes: UnsafeRawBufferPointer) {
        received(bytes)
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
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, user in
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
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, _, error, user in
            H2ServerConnection.with(user) { $0.invalidFrame(error) }
        }
        let created = memory.session(
            callbacks: callbacks, user: Unmanaged.passUnretained(self).toOpaque(), server: true)
        session = created
        var entries = [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: settings.initialMaxStreams),
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
            stream.onDrain = { _ in self.drained() }
            try stream.startReading(
                onRead: { _, bytes in self.received(bytes) },
                onEnd: { _, error in self.end(error.map { "\($0)" } ?? "closed by the client") })
        }
        if transport.tls == nil { flush() }
    }

    /// Advertises `maxConcurrentStreams` (after the first valid provider token, as APNs does).
    public func raiseStreamLimit() {
        guard let session else { return }
        var entry = nghttp2_settings_entry(
            settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: settings.maxConcurrentStreams)
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entry, 1)
    }

    // MARK: Input

    func received(_ bytes: UnsafeRawBufferPointer) {
        guard !finished else { return }
        if let reason = transport.receive(bytes, into: session) { return end(reason) }
        flush()
        delegate?.connectionDidProcessInput(self)
    }

    // MARK: nghttp2 callbacks (capture-free, forwarded here)

    /// The connection behind nghttp2's user data, borrowed for the callback: the session lives inside the
    /// connection, so no retain/release is needed per callback (8 or more per request).
    @inline(__always)
    static func with<R>(_ user: UnsafeMutableRawPointer?, _ body: (H2ServerConnection) -> R) -> R {
        Unmanaged<H2ServerConnection>.fromOpaque(user!)._withUnsafeGuaranteedRef(body)
    }

    private func beginHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
            frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
        else { return 0 }
        let id = frame.pointee.hd.stream_id
        if let budget {
            guard budget.open < budget.limit else {
                // The loop's budget of open streams is spent: this stream is refused (the client may retry it).
                budget.refused += 1
                streamsRefused += 1
                let code = NGHTTP2_REFUSED_STREAM.rawValue
                nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, code)
                return 0
            }
            budget.open += 1
        }
        streamsOpened += 1
        let request: H2Request
        if let pooled = pool.popLast() {
            pooled.reuse(streamId: id, arrivalNanos: EventLoop.hrtimeNanos)
            request = pooled
        } else {
            request = H2Request(streamId: id, arrivalNanos: EventLoop.hrtimeNanos, bodyLimit: settings.bodyLimit)
        }
        streams.insert(request)
        incomplete.append(request)
        lastStream = Unmanaged.passUnretained(request)
        return 0
    }

    private func header(
        _ frame: UnsafePointer<nghttp2_frame>, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer
    ) -> Int32 {
        withStream(frame.pointee.hd.stream_id, else: 0) { request in header(frame, name, value, request) }
    }

    @inline(__always)
    private func header(
        _ frame: UnsafePointer<nghttp2_frame>, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
        _ request: H2Request
    ) -> Int32 {
        request.headerListBytes += name.count + value.count + 32
        if request.headerListBytes > settings.maxHeaderListBytes {
            // Reset the stream (RST_STREAM); the connection goes on.
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        guard frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else {
            // A trailer (HEADERS after the body): counted against the limit above, never merged into the request.
            trailerFields += 1
            return 0
        }
        if name.first == UInt8(ascii: ":") {
            // By length (the switch below), then compared inline: every pseudo-header name is 5 to 10 bytes (a call
            // to memcmp per candidate cost more).
            func named(_ text: StaticString) -> Bool { ShortBytes.equal(UnsafeRawPointer(name.baseAddress!), text) }
            switch name.count {
            case 7:
                if named(":method") {
                    request.setPseudo(&request.method, value, seen: &request.seenMethod)
                } else if named(":scheme") {
                    if request.seenScheme { request.duplicatePseudoHeader = true }
                    request.seenScheme = true
                }
            case 5:
                if named(":path") { request.setPseudo(&request.path, value, seen: &request.seenPath) }
            case 10:
                if named(":authority") {
                    if request.seenAuthority { request.duplicatePseudoHeader = true }
                    request.seenAuthority = true
                }
            default: break
            }
        } else {
            request.headers.append(name: name, value: value)
        }
        return 0
    }

    private func data(_ streamId: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        withStream(streamId, else: 0) { request in
            request.appendBody(bytes)
            return 0
        }
    }

    private func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let type = UInt32(frame.pointee.hd.type)
        if type == NGHTTP2_SETTINGS.rawValue { prefaceReceived = true }
        if type == NGHTTP2_GOAWAY.rawValue { peerGoAwayCode = frame.pointee.goaway.error_code }
        guard type == NGHTTP2_HEADERS.rawValue || type == NGHTTP2_DATA.rawValue,
            frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0,
            let request = stream(frame.pointee.hd.stream_id)
        else { return 0 }
        incomplete.remove(request)
        request.settle()
        request.completeNanos = EventLoop.hrtimeNanos
        requestsReceived += 1
        delegate?.connection(self, received: request)
        return 0
    }

    private func streamClosed(_ streamId: Int32) -> Int32 {
        if let last = lastStream, last._withUnsafeGuaranteedRef({ $0.streamId }) == streamId { lastStream = nil }
        if let request = streams.remove(streamId) {
            budget?.open -= 1
            releaseAnswer(request)
            incomplete.remove(request)
            if !request.answered { streamsReset += 1 }
            // Reused for a later stream unless its owner keeps it, or its buffers grew large (headers, path, body).
            if !request.retained && pool.count < 64 && request.retainedBytes <= settings.pooledRequestBytes {
                pool.append(request)
            }
        }
        return 0
    }

    private func invalidFrame(_ error: Int32) -> Int32 {
        if invalidFrameError == nil { invalidFrameError = error }
        return 0
    }

}
