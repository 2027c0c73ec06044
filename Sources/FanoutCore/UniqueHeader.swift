/// A header value unique to its response (an id such as `apns-id`): at most 48 bytes, held inline so that a
/// response needs no allocation for it, and sent with HPACK's "never indexed" representation. Indexed, every
/// such value would enter nghttp2's dynamic table, where values that never repeat evict useful entries, and
/// nghttp2 compares each new one against all of them (one chain per name): 100 or more `memcmp` per response.
public struct UniqueHeader: Sendable {
    public static let capacity = 48
    public let name: StaticString
    public let count: Int
    @usableFromInline var storage: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)

    /// A value of `count` bytes (at most ``capacity``) written by `fill` (inlinable: the caller's closure is
    /// inlined, not called through a context).
    @inlinable
    public init(name: StaticString, count: Int, fill: (UnsafeMutableRawBufferPointer) -> Void) {
        precondition(count <= UniqueHeader.capacity, "UniqueHeader: value over \(UniqueHeader.capacity) bytes")
        self.name = name
        self.count = count
        withUnsafeMutableBytes(of: &storage) { fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<count])) }
    }

    @inlinable
    public func withValue<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        withUnsafeBytes(of: storage) { body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }

    public var value: String { withValue { String(decoding: $0, as: UTF8.self) } }
}
