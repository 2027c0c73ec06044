import FanoutAPNs
import FanoutWire

extension ProviderKey {
    /// A provider key verified by OpenSSL (FanoutWire's `ES256Key`).
    public init(_ key: ES256Key) {
        self.init(verify: { key.verify(message: $0, signature: $1) })
    }
}
