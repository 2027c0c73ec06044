import FanoutCore

#if canImport(Glibc)
import Glibc
#endif

/// One HTTP/2 request stream as the server sees it: pseudo-headers, regular headers (names lowercase, as
/// HTTP/2 requires), at most `bodyLimit + 1` bytes of body, and when it arrived. The bytes are kept as
/// received; the layer above judges them.
public final class H2Request {
    @exclusivity(unchecked) public internal(set) var streamId: Int32
    /// The stream's first HEADERS frame arrived (monotonic nanoseconds, `uv_hrtime`).
    @exclusivity(unchecked) public internal(set) var arrivalNanos: UInt64
    /// Set by the owner when it keeps the request past its stream's close (e.g. answered by another loop):
    /// such a request is not reused for a later stream.
    @exclusivity(unchecked) public var retained = false
    /// The owner's key for the request (fanout serve: what its fault and latency draws are keyed by), 0: none.
    @exclusivity(unchecked) public var drawKey: UInt64 = 0
    /// The request was complete: headers, and the body up to END_STREAM.
    @exclusivity(unchecked) public internal(set) var completeNanos: UInt64 = 0
    @exclusivity(unchecked) public internal(set) var method: [UInt8] = []
    @exclusivity(unchecked) public internal(set) var path: [UInt8] = []
    /// Regular headers in arrival order, in one buffer.
    @exclusivity(unchecked) public internal(set) var headers = HeaderList()
    /// `:method` and `:path` arrived on this stream (until then `method` and `path` may hold the last stream's).
    @exclusivity(unchecked) var seenMethod = false
    @exclusivity(unchecked) var seenPath = false
    /// Pseudo-headers seen (`:authority`, `:scheme`): checked by nghttp2, not kept.
    @exclusivity(unchecked) var seenAuthority = false
    @exclusivity(unchecked) var seenScheme = false
    /// A pseudo-header sent twice (HTTP/2 forbids it; nghttp2 already resets most malformed ones).
    @exclusivity(unchecked) public internal(set) var duplicatePseudoHeader = false
    /// The body's first `bodyLimit + 1` bytes.
    @exclusivity(unchecked) public internal(set) var body: [UInt8] = []
    /// Body bytes the client sent in all (may exceed what was kept).
    @exclusivity(unchecked) public internal(set) var bodyBytesReceived = 0
    public let bodyLimit: Int
    /// Bytes of the header list (name + value + 32 per field, as SETTINGS_MAX_HEADER_LIST_SIZE counts).
    @exclusivity(unchecked) var headerListBytes = 0

    @exclusivity(unchecked) var response: [UInt8] = []
    @exclusivity(unchecked) var responseOffset = 0
    @exclusivity(unchecked) public internal(set) var answered = false
    /// Linked in the connection's incomplete requests (no END_STREAM yet), oldest first.
    @exclusivity(unchecked) var isIncomplete = false
    @exclusivity(unchecked) var olderIncomplete: Unmanaged<H2Request>?
    @exclusivity(unchecked) var newerIncomplete: Unmanaged<H2Request>?

    /// Where the answer's header values that are not static text are written (its ids, a status or length in
    /// digits): nghttp2 is handed them without a copy (NGHTTP2_NV_FLAG_NO_COPY_VALUE), and reads them when it
    /// writes the stream's HEADERS, before the stream closes (a pooled request is reused only after that).
    /// Allocated once per request object, kept across reuse.
    let answerValues = UnsafeMutableRawPointer.allocate(byteCount: H2Request.answerValuesBytes, alignment: 8)
    static let answerValuesBytes = 2 * UniqueHeader.capacity + 2 * 24

    init(streamId: Int32, arrivalNanos: UInt64, bodyLimit: Int) {
        self.streamId = streamId
        self.arrivalNanos = arrivalNanos
        self.bodyLimit = bodyLimit
    }

    deinit { answerValues.deallocate() }

    /// Makes a finished request ready for another stream, keeping its buffers' capacity. `method`, `path` and
    /// `body` keep the last stream's bytes until this one's arrive (``setPseudo(_:_:seen:)``, ``appendBody(_:)``)
    /// or its request is complete (``settle()``): a request of the same shape as the last (same method, a path
    /// and a body of the same length) writes its bytes over them, without emptying and refilling three arrays
    /// (~25 instructions a call through the array's generic `removeAll(keepingCapacity:)` and
    /// `append(contentsOf:)`, several calls a request).
    func reuse(streamId: Int32, arrivalNanos: UInt64) {
        self.streamId = streamId
        self.arrivalNanos = arrivalNanos
        completeNanos = 0
        seenMethod = false
        seenPath = false
        headers.removeAll()
        seenAuthority = false
        seenScheme = false
        duplicatePseudoHeader = false
        bodyBytesReceived = 0
        headerListBytes = 0
        if !response.isEmpty { response = [] }
        responseOffset = 0
        answered = false
        drawKey = 0
    }

    /// `:method` or `:path` (`seen`: whether this stream sent it before): the field's bytes become `value`. A second
    /// one is a duplicate pseudo-header (when the first was not empty, as before) and replaces the first.
    @inline(__always)
    func setPseudo(_ field: inout [UInt8], _ value: UnsafeRawBufferPointer, seen: inout Bool) {
        if seen && !field.isEmpty { duplicatePseudoHeader = true }
        seen = true
        if field.count == value.count {
            // The same length as the last stream's (or the duplicate's): written over in place.
            if value.count > 0 {
                field.withUnsafeMutableBytes { _ = memcpy($0.baseAddress!, value.baseAddress!, value.count) }
            }
        } else {
            field.removeAll(keepingCapacity: true)  // the reused request's buffer, no allocation
            // Typed: appended by memcpy, not byte by byte (the raw buffer's append went through its iterator).
            field.append(contentsOf: value.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// The request is complete: what the last stream left in `method`, `path` and `body` that this one did not
    /// replace (a pseudo-header it did not send, a shorter or no body) is dropped, so they hold this stream's bytes
    /// only.
    @inline(__always)
    func settle() {
        if _slowPath(!seenMethod && !method.isEmpty) { method.removeAll(keepingCapacity: true) }
        if _slowPath(!seenPath && !path.isEmpty) { path.removeAll(keepingCapacity: true) }
        let kept = min(bodyBytesReceived, bodyLimit + 1)
        if _slowPath(body.count != kept) { body.removeSubrange(kept...) }
    }

    /// Bytes the request's buffers hold (their capacity), which a pooled request keeps.
    var retainedBytes: Int {
        method.capacity + path.capacity + headers.storageBytes + body.capacity + response.capacity
    }

    /// The body exceeded `bodyLimit` (only `bodyLimit + 1` bytes were kept).
    public var bodyTooLarge: Bool { bodyBytesReceived > bodyLimit }


    /// A DATA chunk: the body keeps its first `bodyLimit + 1` bytes (`bodyBytesReceived` counts all). The bytes
    /// kept so far are the body's first `min(bodyBytesReceived, bodyLimit + 1)`; past them the array may still hold
    /// the last stream's (see ``reuse(streamId:arrivalNanos:)``): written over when the chunk ends exactly where
    /// they end, else dropped before the chunk is appended.
    func appendBody(_ bytes: UnsafeRawBufferPointer) {
        let have = min(bodyBytesReceived, bodyLimit + 1)
        let take = min(bytes.count, bodyLimit + 1 - have)
        if take > 0 {
            if body.count == have + take {
                body.withUnsafeMutableBytes { _ = memcpy($0.baseAddress! + have, bytes.baseAddress!, take) }
            } else {
                if body.count > have { body.removeSubrange(have...) }
                // Typed: appended by memcpy (a slice of the raw buffer was copied through its iterator).
                let typed = bytes.assumingMemoryBound(to: UInt8.self)
                body.append(contentsOf: UnsafeBufferPointer(rebasing: typed.prefix(take)))
            }
        }
        bodyBytesReceived += bytes.count
    }
}

/// RST_STREAM error codes an owner may reset a request's stream with (RFC 9113 §7).
public enum H2ResetCode: UInt32, Sendable {
    case internalError = 2
    case refusedStream = 7
    case cancel = 8
}

