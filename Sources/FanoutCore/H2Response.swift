/// A response as HTTP/2 submits it: status, headers (lowercase names), body. FanoutAPNs answers with it (as
/// `APNsAnswer`) and FanoutWire sends it, so an answer crosses from the service to the wire without a copy.
public struct H2Response: Sendable {
    public var status: Int
    /// Headers whose values are unique to this response (ids such as `apns-id`): held inline, and sent first
    /// (after `:status`) without HPACK indexing.
    public var id: UniqueHeader?
    public var extraId: UniqueHeader?
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(
        status: Int, id: UniqueHeader? = nil, extraId: UniqueHeader? = nil,
        headers: [(name: String, value: String)] = [], body: [UInt8] = []
    ) {
        self.status = status
        self.id = id
        self.extraId = extraId
        self.headers = headers
        self.body = body
    }

    /// Every header in the order sent after `:status` (without `content-length`).
    public var allHeaders: [(name: String, value: String)] {
        [id, extraId].compactMap { $0.map { ($0.name.description, $0.value) } } + headers
    }
}
