import FanoutCore


/// A request as the service judges it (copied out of the HTTP/2 stream).
public struct RequestInput: Sendable {
    public var method: [UInt8]
    public var path: [UInt8]
    public var headers: HeaderList {
        didSet { known = KnownHeaders(headers) }
    }
    /// Where the headers APNs reads are in `headers`, and whether a name repeats (one pass, at init).
    public private(set) var known: KnownHeaders
    /// At most the body limit + 1 bytes.
    public var body: [UInt8]
    /// Monotonic nanoseconds: first HEADERS frame.
    public var arrivalNanos: UInt64

    public init(
        method: String, path: String, headers: [(String, String)], body: [UInt8], arrivalNanos: UInt64 = 0
    ) {
        self.method = Array(method.utf8)
        self.path = Array(path.utf8)
        self.headers = HeaderList(headers)
        known = KnownHeaders(self.headers)
        self.body = body
        self.arrivalNanos = arrivalNanos
    }

    public init(
        method: [UInt8], path: [UInt8], headers: HeaderList, body: [UInt8],
        arrivalNanos: UInt64
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        known = KnownHeaders(headers)
        self.body = body
        self.arrivalNanos = arrivalNanos
    }

    @inline(__always)
    func header(_ name: KnownHeaders.Name) -> ArraySlice<UInt8>? {
        known.value(name, in: headers)
    }
}
