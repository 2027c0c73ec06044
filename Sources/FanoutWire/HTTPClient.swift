internal import CCurl
import Glibc
import UVLoop

/// A request the HTTP client could not start, or an unusable URL: libcurl's code and message.
public struct HTTPClientError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// An HTTP client on a libuv loop: libcurl's multi-socket interface (`curl_multi_socket_action`) driven by one
/// ``UVLoop/Poll`` per socket libcurl asks to watch (`CURLMOPT_SOCKETFUNCTION`) and one ``UVLoop/Timer`` for
/// libcurl's timeouts (`CURLMOPT_TIMERFUNCTION`), as curl's `docs/examples/multi-uv.c`. Requests run
/// concurrently on the loop's thread; HTTP/1.1 with keep-alive (connections are reused from libcurl's cache) or
/// HTTP/2 (prior knowledge on `http://`, ALPN `h2` on `https://`, streams multiplexed on one connection); TLS is
/// checked against the system's CA bundle or `caFile` (one file; not the system's CA directory).
///
/// Lifecycle: every easy handle is removed and cleaned up when its request completes (or in ``close()``);
/// ``close()`` completes what is still in flight as ``Response/Outcome/cancelled``, cleans the multi handle up
/// and closes every poll handle and the timer. Call it once, on the loop's thread, before closing the loop.
/// libcurl's callbacks are capture-free and forward to this object through `Unmanaged` (unretained: the
/// multi handle, which holds the pointer, is cleaned up in ``close()``, before this object can go).
public final class HTTPClient {
    public enum Version: Sendable {
        /// HTTP/1.1, connections kept alive and reused.
        case http1_1
        /// HTTP/2: prior knowledge (h2c) on `http://`, ALPN `h2` on `https://` (1.1 if the server refuses `h2`).
        case http2
    }

    public struct Options: Sendable {
        public var version = Version.http1_1
        /// PEM file of the CAs a TLS server's certificate must chain to (nil: the system's CA bundle).
        public var caFile: String?
        /// A request's whole time (connect, send, answer) before it ends as ``Response/Outcome/timedOut``.
        public var timeoutMillis = 10_000
        /// Bytes of an answer's body kept (the rest is read and counted, not kept).
        public var maxBodyBytes = 64 * 1024
        /// Idle connections kept open for reuse at most (`CURLMOPT_MAXCONNECTS`); 0: libcurl's default, 4 × the
        /// requests in flight when a connection is returned, which closes most connections after a burst when few
        /// are in flight, so that the next burst opens new ones.
        public var maxCachedConnections = 0
        public init() {}
    }

    public struct Response: Sendable {
        public enum Outcome: Sendable, Equatable {
            /// An HTTP answer arrived (any status).
            case answered
            /// No complete answer within the timeout.
            case timedOut
            /// Connection refused, name unresolved, TLS failure, protocol error…: libcurl's message, with the
            /// reason where libcurl has one that names no time or size (``HTTPClient/failureText(_:osErrno:detail:)``).
            case failed(String)
            /// ``HTTPClient/close()`` came first.
            case cancelled
        }
        public var outcome: Outcome
        /// The status of the answer; 0 when there was none.
        public var status: Int
        /// The protocol the answer came over: "1.1", "2", or "" when none.
        public var httpVersion: String
        /// The body (at most `maxBodyBytes`) and its full length.
        public var body: [UInt8]
        public var bodyBytes: Int
        /// From ``HTTPClient/post(url:body:headers:completion:)`` to the request leaving (libcurl's
        /// `CURLOPT_PREREQFUNCTION`, once its connection was made or reused), the connection's own setup (name,
        /// TCP, TLS: `CURLINFO_APPCONNECT_TIME_T` or `CONNECT_TIME_T`) left out: the client's own lateness. nil
        /// when the request never left (no connection, cancelled first).
        public var queuedNanos: UInt64? = nil
    }

    public typealias Completion = (Response) -> Void

    /// A request in flight: its easy handle, its header list, what it read, libcurl's error text, whom to tell.
    final class Request {
        let easy: UnsafeMutableRawPointer
        var headers: UnsafeMutablePointer<curl_slist>?
        var body: [UInt8] = []
        var bodyBytes = 0
        let maxBodyBytes: Int
        /// When it was posted, and when libcurl was about to send it (0: not yet).
        let postedNanos = EventLoop.hrtimeNanos
        var leavingNanos: UInt64 = 0
        /// `CURLOPT_ERRORBUFFER`: libcurl's words for a failure (OpenSSL's reason for a TLS one); freed after the
        /// easy handle, which writes it, is cleaned up.
        let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        let completion: Completion
        init(easy: UnsafeMutableRawPointer, maxBodyBytes: Int, completion: @escaping Completion) {
            self.easy = easy
            self.maxBodyBytes = maxBodyBytes
            self.completion = completion
            errorText.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        }
        deinit { errorText.deallocate() }
    }

    public let loop: EventLoop
    public let options: Options
    private let multi: UnsafeMutableRawPointer
    private var timer: UVLoop.Timer?
    private var polls: [Int32: Poll] = [:]
    private var requests: [UnsafeMutableRawPointer: Request] = [:]
    private var closing = false
    /// Sockets a poll could not be set up for: failed with `CURL_CSELECT_ERR` on the next turn (their transfers
    /// only: a socket callback returning -1 would abort every transfer of the multi handle).
    private var failedSockets: [Int32] = []
    private var failedSocketsTimer: UVLoop.Timer?
    /// Tests: a watch that fails for this socket, as a poll that cannot be set up would.
    var watchFails: (Int32) -> Bool = { _ in false }

    /// Requests started and not completed yet.
    public var inFlight: Int { requests.count }
    /// Sockets watched right now (a test sees them go).
    public var watchedSockets: Int { polls.count }
    var watchedSocketNumbers: [Int32] { Array(polls.keys) }

    private static let globalInit: CURLcode = CCurl_global_init()

    /// libcurl's version, e.g. "7.88.1".
    public static var libcurlVersion: String {
        _ = globalInit
        return String(cString: CCurl_version_info().pointee.version)
    }

    /// libcurl before 8.0 cannot reuse a connection opened with HTTP/2 prior knowledge (see `post`).
    public static let priorKnowledgeReuseBroken: Bool = {
        _ = globalInit
        return CCurl_version_info().pointee.version_num < 0x08_00_00
    }()

    /// A client on `loop` (its thread). Throws if libcurl cannot be set up.
    public init(loop: EventLoop, options: Options = Options()) throws(HTTPClientError) {
        guard HTTPClient.globalInit == CURLE_OK else {
            throw HTTPClientError("curl_global_init: \(String(cString: curl_easy_strerror(HTTPClient.globalInit)))")
        }
        guard let multi = curl_multi_init() else { throw HTTPClientError("curl_multi_init failed") }
        self.loop = loop
        self.options = options
        self.multi = multi
        timer = UVLoop.Timer(loop: loop) { [unowned self] _ in self.timeoutExpired() }
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = CCurl_multi_setopt_socket(multi) { easy, socket, what, client, _ in
            HTTPClient.socketCallback(socket, what, client)
        }
        _ = CCurl_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, me)
        _ = CCurl_multi_setopt_timer(multi) { _, timeoutMillis, client in
            HTTPClient.timerCallback(timeoutMillis, client)
        }
        _ = CCurl_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, me)
        if options.maxCachedConnections > 0 {
            _ = CCurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, options.maxCachedConnections)
        }
    }

    deinit {
        precondition(closing, "HTTPClient deinitialised before close()")
    }

    /// Checks that `url` is an absolute `http://` or `https://` URL with a host (libcurl's URL parser); returns
    /// its scheme.
    public static func validate(url: String) throws(HTTPClientError) -> String {
        guard let handle = curl_url() else { throw HTTPClientError("curl_url failed") }
        defer { curl_url_cleanup(handle) }
        let code = curl_url_set(handle, CURLUPART_URL, url, 0)
        guard code == CURLUE_OK else {
            throw HTTPClientError("\(url): not a URL (\(String(cString: curl_url_strerror(code))))")
        }
        var scheme: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK, let scheme else {
            throw HTTPClientError("\(url): no scheme")
        }
        let text = String(cString: scheme).lowercased()
        curl_free(scheme)
        guard text == "http" || text == "https" else {
            throw HTTPClientError("\(url): expected an http:// or https:// URL, got \(text)://")
        }
        var host: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_HOST, &host, 0) == CURLUE_OK, let host else {
            throw HTTPClientError("\(url): no host")
        }
        curl_free(host)
        return text
    }

    /// Starts `POST url` with `body` and `headers` ("Name: value" each); `completion` runs on the loop's thread
    /// when it ends, however it ends (never from inside this call).
    public func post(url: String, body: [UInt8], headers: [String] = [], completion: @escaping Completion)
        throws(HTTPClientError)
    {
        guard !closing else { throw HTTPClientError("the HTTP client is closed") }
        guard let easy = curl_easy_init() else { throw HTTPClientError("curl_easy_init failed") }
        let request = Request(easy: easy, maxBodyBytes: options.maxBodyBytes, completion: completion)
        var list: UnsafeMutablePointer<curl_slist>?
        // No `Expect: 100-continue` round trip before a larger body (HTTP/1.1).
        for line in headers + ["Expect:"] {
            guard let next = curl_slist_append(list, line) else {
                curl_slist_free_all(list)
                curl_easy_cleanup(easy)
                throw HTTPClientError("curl_slist_append failed")
            }
            list = next
        }
        request.headers = list
        var failed: CURLcode = CURLE_OK
        func set(_ code: CURLcode) { if failed == CURLE_OK { failed = code } }
        let https = url.prefix(8).lowercased() == "https://"
        set(CCurl_easy_setopt_string(easy, CURLOPT_URL, url))
        set(CCurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        set(CCurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list))
        set(CCurl_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
        body.withUnsafeBytes { bytes in
            // Copied by libcurl: the request does not keep `body` alive.
            set(CCurl_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(
                mutating: bytes.baseAddress ?? UnsafeRawPointer(("" as StaticString).utf8Start))))
        }
        switch options.version {
        case .http1_1: set(CCurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1)))
        case .http2:
            let v = https ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
            set(CCurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(v)))
            // No CURLOPT_PIPEWAIT: with libcurl 7.88 and the multi-socket interface, transfers queued behind a
            // connection whose multiplexing is not confirmed yet fail with "Error in the HTTP2 framing layer" once
            // it is (curl issue 10634, fixed in 8.0). Without it, requests started before the first connection's
            // SETTINGS arrive open connections of their own; later ones are multiplexed on the open connections.
            if !https && HTTPClient.priorKnowledgeReuseBroken {
                // libcurl before 8.0 fails every transfer that reuses an h2c prior-knowledge connection (the same
                // error, the curl tool too): each request gets a connection of its own there.
                set(CCurl_easy_setopt_long(easy, CURLOPT_FRESH_CONNECT, 1))
                set(CCurl_easy_setopt_long(easy, CURLOPT_FORBID_REUSE, 1))
            }
        }
        set(CCurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, options.timeoutMillis))
        if https {
            if let caFile = options.caFile { set(CCurl_easy_setopt_string(easy, CURLOPT_CAINFO, caFile)) }
            // The CAs are the CA file's alone (the system bundle, or `caFile`), without the system's CA directory:
            // with a directory libcurl (7.87+) does not cache the store, and every new connection parsed the
            // whole system bundle (~140 certificates, ~40 ms of the loop's time) — a backend failing its TLS
            // handshakes, each retry on a new connection, then held up the loop (serving too) and turned the
            // failures into timeouts. With the CA file alone libcurl keeps the parsed store for the multi handle.
            set(CCurl_easy_setopt_pointer(easy, CURLOPT_CAPATH, nil))
        }
        set(CCurl_easy_setopt_write(easy) { data, size, count, request in
            HTTPClient.received(data, size * count, request)
        })
        set(CCurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(request).toOpaque()))
        set(CCurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, request.errorText))
        set(CCurl_easy_setopt_prereq(easy) { request, _, _, _, _ in
            HTTPClient.leaving(request)
        })
        set(CCurl_easy_setopt_pointer(easy, CURLOPT_PREREQDATA, Unmanaged.passUnretained(request).toOpaque()))
        guard failed == CURLE_OK else {
            curl_slist_free_all(list)
            curl_easy_cleanup(easy)
            throw HTTPClientError("curl_easy_setopt: \(String(cString: curl_easy_strerror(failed)))")
        }
        let added = curl_multi_add_handle(multi, easy)
        guard added == CURLM_OK else {
            curl_slist_free_all(list)
            curl_easy_cleanup(easy)
            throw HTTPClientError("curl_multi_add_handle: \(String(cString: curl_multi_strerror(added)))")
        }
        requests[easy] = request
    }

    /// Completes every request in flight as cancelled, cleans libcurl up and closes every handle on the loop.
    /// Once only; the loop then has nothing of this client left open.
    public func close() {
        precondition(!closing, "HTTPClient.close() called twice")
        closing = true
        let pending = Array(requests.values)
        requests.removeAll()
        for request in pending {
            curl_multi_remove_handle(multi, request.easy)
            var response = Response(outcome: .cancelled, status: 0, httpVersion: "", body: [], bodyBytes: 0)
            if request.leavingNanos != 0 { response.queuedNanos = request.leavingNanos &- request.postedNanos }
            finish(request, response)
        }
        // May tell the socket callback to stop watching the cached connections' sockets.
        curl_multi_cleanup(multi)
        for poll in polls.values where !poll.isClosed { poll.close() }
        polls.removeAll()
        timer?.close()
        timer = nil
        failedSocketsTimer?.close()
        failedSocketsTimer = nil
    }

    // MARK: libcurl callbacks (capture-free, forward to one method each)

    private static func socketCallback(_ socket: curl_socket_t, _ what: Int32, _ client: UnsafeMutableRawPointer?)
        -> Int32
    {
        guard let client else { preconditionFailure("curl socket callback without a client") }
        return Unmanaged<HTTPClient>.fromOpaque(client).takeUnretainedValue().watch(socket, what)
    }

    private static func timerCallback(_ timeoutMillis: Int, _ client: UnsafeMutableRawPointer?) -> Int32 {
        guard let client else { preconditionFailure("curl timer callback without a client") }
        Unmanaged<HTTPClient>.fromOpaque(client).takeUnretainedValue().arm(timeoutMillis)
        return 0
    }

    private static func leaving(_ request: UnsafeMutableRawPointer?) -> Int32 {
        guard let request else { return 0 }
        let owner = Unmanaged<Request>.fromOpaque(request).takeUnretainedValue()
        if owner.leavingNanos == 0 { owner.leavingNanos = EventLoop.hrtimeNanos }
        return 0  // CURL_PREREQFUNC_OK
    }

    private static func received(
        _ data: UnsafeMutablePointer<CChar>?, _ count: Int, _ request: UnsafeMutableRawPointer?
    ) -> Int {
        guard let request else { return 0 }
        let owner = Unmanaged<Request>.fromOpaque(request).takeUnretainedValue()
        owner.bodyBytes += count
        let keep = min(count, owner.maxBodyBytes - owner.body.count)
        if keep > 0, let data {
            owner.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: keep))
        }
        return count
    }

    /// libcurl wants `socket` watched for `what` (in, out, both) or no longer (`CURL_POLL_REMOVE`, before it
    /// closes the socket).
    private func watch(_ socket: Int32, _ what: Int32) -> Int32 {
        if what == CURL_POLL_REMOVE {
            // Closed already if the loop's owner closed every handle (`EventLoop.closeRemainingHandles`).
            if let poll = polls.removeValue(forKey: socket), !poll.isClosed { poll.close() }
            return 0
        }
        if closing && timer == nil { return 0 }
        if watchFails(socket) {
            failLater(socket)
            return 0
        }
        var events: Poll.Events = []
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { events.insert(.readable) }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { events.insert(.writable) }
        do {
            let poll: Poll
            if let existing = polls[socket] {
                guard !existing.isClosed else { return -1 }  // closed behind libcurl's back: fail its transfers
                poll = existing
            } else {
                poll = try Poll(loop: loop, socket: socket) { [unowned self] poll, status, events in
                    self.ready(poll.socket, status: status, events: events)
                }
                polls[socket] = poll
            }
            try poll.start(events)
            return 0
        } catch {
            failLater(socket)
            return 0
        }
    }

    /// A socket that cannot be watched: its transfers fail on the loop's next turn (`CURL_CSELECT_ERR` for it
    /// alone), the others go on.
    private func failLater(_ socket: Int32) {
        if let poll = polls.removeValue(forKey: socket), !poll.isClosed { poll.close() }
        failedSockets.append(socket)
        if failedSocketsTimer == nil {
            failedSocketsTimer = UVLoop.Timer(loop: loop) { [unowned self] _ in self.failSockets() }
        }
        failedSocketsTimer?.start(afterMillis: 0)
    }

    private func failSockets() {
        guard !closing else { return }
        let sockets = failedSockets
        failedSockets.removeAll()
        var running: Int32 = 0
        for socket in sockets { _ = curl_multi_socket_action(multi, socket, CURL_CSELECT_ERR, &running) }
        completeFinished()
    }

    /// libcurl's next timeout: -1 none, 0 as soon as possible — on the loop's next turn (never from inside this
    /// callback, which libcurl forbids). libcurl asking for "now" again from inside its own timeout, more than
    /// `zeroRearmLimit` times in a row with no socket activity between, gets 1 ms (as curl's multi-uv.c always
    /// does): the loop never spins on it. Always 1 ms cost a new request ~1 ms a timer pass (3 ms at the median,
    /// 15 ms at p99, at 2,000 events/s: make trigger-bench).
    private func arm(_ timeoutMillis: Int) {
        guard let timer else { return }
        if timeoutMillis < 0 {
            timer.stop()
            return
        }
        if timeoutMillis == 0 && inTimeout { zeroRearms += 1 } else { zeroRearms = 0 }
        timer.start(afterMillis: timeoutMillis == 0 && zeroRearms > Self.zeroRearmLimit ? 1 : UInt64(timeoutMillis))
    }

    /// Consecutive "now" timeouts libcurl asked for from inside its own timeout, and how many run at once.
    private var inTimeout = false
    private(set) var zeroRearms = 0
    static let zeroRearmLimit = 4

    private func ready(_ socket: Int32, status: Int32, events: Poll.Events) {
        guard !closing else { return }
        var flags: Int32 = 0
        // An error on the socket (libuv stops the poll and says only that): no flags, as curl's multi-uv.c, so
        // libcurl checks the socket itself and meets the error where it is — "Connection refused" at connect,
        // "Connection reset by peer" at recv. (CURL_CSELECT_ERR made it fail the transfer as "select/poll returned
        // error", whatever the error was.)
        if status >= 0 {
            if events.contains(.readable) { flags |= CURL_CSELECT_IN }
            if events.contains(.writable) { flags |= CURL_CSELECT_OUT }
        }
        var running: Int32 = 0
        _ = curl_multi_socket_action(multi, socket, flags, &running)
        // libcurl did not act on it (the socket neither removed nor watched again, and libuv stopped its poll):
        // it is told the poll failed, and fails what waits on the socket, rather than wait on a poll that cannot
        // fire (or watch a socket whose error nobody consumes, again and again).
        if status < 0, let poll = polls[socket], !poll.isClosed, !poll.isActive {
            _ = curl_multi_socket_action(multi, socket, CURL_CSELECT_ERR, &running)
        }
        completeFinished()
    }

    private func timeoutExpired() {
        guard !closing else { return }
        inTimeout = true
        defer { inTimeout = false }
        var running: Int32 = 0
        _ = curl_multi_socket_action(multi, CCurl_socket_timeout(), 0, &running)
        completeFinished()
    }

    /// Every transfer libcurl has finished: removed, cleaned up, its completion called.
    private func completeFinished() {
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let result = message.pointee.data.result
            curl_multi_remove_handle(multi, easy)
            guard let request = requests.removeValue(forKey: easy) else { continue }
            var status = 0
            _ = CCurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            var version = 0
            _ = CCurl_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
            let outcome: Response.Outcome
            switch result {
            case CURLE_OK: outcome = .answered
            case CURLE_OPERATION_TIMEDOUT where request.leavingNanos == 0:
                // No connection within the timeout: a failure to connect, counted apart from unanswered requests.
                outcome = .failed("Timeout was reached (connecting: the request never left)")
            case CURLE_OPERATION_TIMEDOUT: outcome = .timedOut
            default:
                var osErrno = 0
                _ = CCurl_easy_getinfo_long(easy, CURLINFO_OS_ERRNO, &osErrno)
                outcome = .failed(
                    HTTPClient.failureText(result, osErrno: Int32(osErrno), detail: String(cString: request.errorText)))
            }
            let versionText =
                status == 0 ? "" : version == Int(CURL_HTTP_VERSION_2_0) ? "2" : version == Int(CURL_HTTP_VERSION_1_0)
                ? "1.0" : "1.1"
            var response = Response(
                outcome: outcome, status: outcome == .answered ? status : 0, httpVersion: versionText,
                body: request.body, bodyBytes: request.bodyBytes)
            if request.leavingNanos != 0 {
                var connect: curl_off_t = 0
                var appConnect: curl_off_t = 0
                _ = CCurl_easy_getinfo_off(easy, CURLINFO_CONNECT_TIME_T, &connect)
                _ = CCurl_easy_getinfo_off(easy, CURLINFO_APPCONNECT_TIME_T, &appConnect)
                let setup = UInt64(max(connect, appConnect, 0)) &* 1000
                let waited = request.leavingNanos &- request.postedNanos
                response.queuedNanos = waited > setup ? waited - setup : 0
            }
            finish(request, response)
        }
    }

    private func finish(_ request: Request, _ response: Response) {
        curl_easy_cleanup(request.easy)
        curl_slist_free_all(request.headers)
        request.headers = nil
        request.completion(response)
    }
}
