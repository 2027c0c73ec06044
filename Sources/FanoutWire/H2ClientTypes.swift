import FanoutCore

// What a client connection takes and gives back: requests (their shared content, their own UUID header), outcomes,
// failures, settings.

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
    /// The header's name: one of a few, a byte in the request (a `StaticString` would add three words to every
    /// request moved through the queues).
    public enum Name: UInt8, Sendable {
        case apnsId = 1
        case apnsRequestId = 2

        /// Lowercase (it is sent as it is, not copied and lower-cased by nghttp2).
        public var text: StaticString {
            switch self {
            case .apnsId: "apns-id"
            case .apnsRequestId: "apns-request-id"
            }
        }
    }

    public var name: Name
    public var high: UInt64
    public var low: UInt64

    public init(name: Name, high: UInt64, low: UInt64) {
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

/// A request's method (HTTP/2 `:method`), a byte in the request.
public enum H2Method: UInt8, Sendable {
    case post, get, put, delete

    public var text: StaticString {
        switch self {
        case .post: "POST"
        case .get: "GET"
        case .put: "PUT"
        case .delete: "DELETE"
        }
    }
}

/// One request for ``H2ClientConnection/submit(_:)``: its path, its batch's headers and body, and optionally one
/// header of its own.
///
/// Kept small and flat — two references and plain words, no `StaticString` and no Optional inside — because every
/// request is moved into a connection's queue, out to its stream's record and back: with a `StaticString` method
/// and an optional `H2UUIDHeader` (of a `StaticString` name) each move and each `nil` of an optional request went
/// through the runtime's generic value witnesses (`scripts/callgrind-push.sh`: ~900 instructions a request).
public struct H2ClientRequest: Sendable {
    public var method: H2Method
    public var path: [UInt8]
    public var content: H2RequestContent
    /// The unique header's name (0: none) and value's words, stored flat (``uniqueHeader``).
    var uniqueName: UInt8
    var uniqueHigh: UInt64
    var uniqueLow: UInt64
    /// The caller's handle for the request, handed back with its response.
    public var tag: Int
    /// When the caller handed the request over (its own clock, `EventLoop.hrtimeNanos`; 0: not said), handed back
    /// with its response: `submittedNanos − handedNanos` is the request's wait for a stream (the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS) or a connection. A request sent again keeps its first.
    public var handedNanos: UInt64 = 0

    public var headers: HeaderList { content.headers }
    public var body: [UInt8] { content.body }

    /// One more header of this request alone (e.g. its `apns-id`), so that `content` can be shared by many requests.
    public var uniqueHeader: H2UUIDHeader? {
        get { H2UUIDHeader.Name(rawValue: uniqueName).map { H2UUIDHeader(name: $0, high: uniqueHigh, low: uniqueLow) } }
        set {
            uniqueName = newValue?.name.rawValue ?? 0
            uniqueHigh = newValue?.high ?? 0
            uniqueLow = newValue?.low ?? 0
        }
    }

    public init(
        method: H2Method = .post, path: [UInt8], content: H2RequestContent, uniqueHeader: H2UUIDHeader? = nil,
        tag: Int
    ) {
        self.method = method
        self.path = path
        self.content = content
        uniqueName = uniqueHeader?.name.rawValue ?? 0
        uniqueHigh = uniqueHeader?.high ?? 0
        uniqueLow = uniqueHeader?.low ?? 0
        self.tag = tag
    }

    /// A request with headers and a body of its own.
    public init(method: H2Method = .post, path: [UInt8], headers: HeaderList, body: [UInt8], tag: Int) {
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
    /// No answer within the request deadline (``ClientDeadlines/requestNanos``, from the request's
    /// ``H2ClientRequest/handedNanos``): its stream was reset (RST_STREAM CANCEL), or it was still queued.
    case timeout
    /// The connection's queue held ``H2ClientSettings/maxQueued`` requests already: failed at once, never sent.
    case queueFull
    /// The connection's stream ids ran out (or came within ``H2ClientSettings/streamIdMargin`` of the end): it
    /// drains as after a GOAWAY, and the request, never sent, is handed back (``H2ClientResponse/unprocessed``).
    case streamIdsExhausted

    public var description: String {
        switch self {
        case .reset(let code): "reset (\(code))"
        case .goAway: "GOAWAY"
        case .connectionEnded: "connection ended"
        case .notSubmitted(let code): "not submitted (\(code))"
        case .responseTooLarge(let part): "response too large (\(part))"
        case .timeout: "timeout"
        case .queueFull: "dropped (queue full)"
        case .streamIdsExhausted: "stream ids used up"
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
    /// The request, when it failed without the server having processed it — never sent (queued at a GOAWAY, at the
    /// stream ids' end or at the connection's end), above a GOAWAY's last stream id, or refused by the server
    /// (RST_STREAM REFUSED_STREAM, RFC 9113 §8.7) — so that it may be sent again elsewhere.
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
    /// Requests waiting for a stream, at most; past it a request fails at once (``H2ClientFailure/queueFull``).
    public var maxQueued = 100_000
    /// nghttp2's freed blocks the connection keeps for reuse (its allocator, `NGHTTP2Pool`), at most, bounded as a
    /// server connection's are (``H2ServerSettings/memoryCacheBytes``): past it a freed block goes back to malloc.
    /// 1 MiB, not the server's 64 KiB: a client has a few connections, each with up to 1,000 streams' blocks
    /// freed and taken again at its rate. `scripts/callgrind-push.sh` (100 streams, release build): 21,434
    /// instructions per request with 64 KiB (at 582452f; the difference in malloc and free), 21,001 with 1 MiB
    /// (the commit that set it), 20,956 at main's fa83d1b (no bound).
    public var memoryCacheBytes = 1 << 20
    /// The connection drains (as after a GOAWAY: nothing more is sent on it, its queue is handed back, it closes
    /// once its open streams ended; ``H2ClientConnection/onDraining``) when fewer than this many requests' stream
    /// ids are left (a client has 2^30 in all), so that its replacement is ready before the last id is spent.
    public var streamIdMargin = 10_000
    /// The first stream id (odd, 1 by default): a test starts a connection near the end of its ids this way
    /// (`nghttp2_session_set_next_stream_id`).
    public var firstStreamId: Int32 = 1

    public init() {}
}

