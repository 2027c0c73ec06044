import FanoutCore

/// What the service answers a request with, before any transport: the status, the id headers (`apns-id` or
/// `apns-request-id`, held inline), other headers and the body (APNs's error JSON, or a channel API's answer).
/// FanoutServe sends it as an HTTP/2 response.
public struct APNsAnswer: Sendable {
    public var status: Int
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
