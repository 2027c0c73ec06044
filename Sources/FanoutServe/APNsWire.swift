import FanoutAPNs
import FanoutWire

extension ProviderKey {
    /// A provider key verified by OpenSSL (FanoutWire's `ES256Key`).
    public init(_ key: ES256Key) {
        self.init(verify: { key.verify(message: $0, signature: $1) })
    }
}

extension H2Response {
    /// The service's answer on the wire.
    @inline(__always)
    init(_ answer: APNsAnswer) {
        self.init(
            status: answer.status, id: answer.id, extraId: answer.extraId, headers: answer.headers, body: answer.body)
    }
}
