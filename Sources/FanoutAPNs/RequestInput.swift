import FanoutCore


/// A request as the service judges it (copied out of the HTTP/2 stream).
public struct RequestInput: Sendable {
    public var method: [UInt8]
    public var path: [UInt8]
    public var headers: HeaderList
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
        self.body = body
        self.arrivalNanos = arrivalNanos
    }

    func header(_ name: StaticString) -> ArraySlice<UInt8>? {
        headers.value(name)
    }
}
