import FanoutCore
#if canImport(Glibc)
import Glibc
#endif

/// Random version-4 UUIDs for generated `apns-id`, `apns-request-id` and `apns-unique-id` values, without
/// Foundation (whose `uuidString` formats through `sprintf`, a tenth of a request's cost): a xorshift128+
/// stream seeded once from the system generator, formatted by FanoutCore's ``UUIDText``, lowercase as APNs writes
/// them.
struct UUIDGenerator {
    private var s0: UInt64
    private var s1: UInt64

    init() {
        var system = SystemRandomNumberGenerator()
        s0 = system.next() | 1
        s1 = system.next()
    }

    private mutating func next() -> UInt64 {
        var x = s0
        let y = s1
        s0 = y
        x ^= x << 23
        s1 = x ^ y ^ (x >> 17) ^ (y >> 26)
        return s1 &+ y
    }

    /// A new id under the header `name`.
    mutating func make(_ name: StaticString) -> UniqueHeader {
        var hi = next()
        var lo = next()
        hi = (hi & ~0xF000) | 0x4000  // version 4
        lo = (lo & ~(0xC << 60)) | (0x8 << 60)  // variant 10
        return UniqueHeader(name: name, count: UUIDText.count) { out in
            UUIDText.format(high: hi, low: lo, into: out.baseAddress!)
        }
    }
}

/// The wall clock in UNIX milliseconds (`clock_gettime(CLOCK_REALTIME)`).
public enum WallClock {
    public static var millis: Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}

/// Whether `bytes` (at `offset`) equal `text` exactly, by memcmp.
@inline(__always)
func bytesEqual(_ bytes: UnsafeRawBufferPointer, _ text: StaticString, at offset: Int = 0, whole: Bool = true) -> Bool {
    let n = text.utf8CodeUnitCount
    guard whole ? bytes.count == offset + n : bytes.count >= offset + n else { return false }
    return n == 0 || memcmp(bytes.baseAddress! + offset, text.utf8Start, n) == 0
}

@inline(__always)
func bytesEqual(_ bytes: [UInt8], _ text: StaticString) -> Bool {
    bytes.withUnsafeBytes { bytesEqual($0, text) }
}

@inline(__always)
func bytesEqual(_ bytes: ArraySlice<UInt8>, _ text: StaticString) -> Bool {
    bytes.withUnsafeBytes { bytesEqual($0, text) }
}

extension UniqueHeader {
    /// A request's own id (`apns-id`, `apns-request-id`) under `name`, to echo; nil when over ``capacity``.
    /// Copied through the inlinable `init(name:count:fill:)` (a generic, non-inlinable initializer over any
    /// collection, removed, ran unspecialized from here, enumerating the bytes through runtime metadata look-ups:
    /// half of `fanout serve`'s CPU on a push that carries an `apns-id`; `perf record` on serve under `fanout push`,
    /// scripts/push-bench.json).
    @inline(__always)
    static func copying(_ name: StaticString, _ value: ArraySlice<UInt8>) -> UniqueHeader? {
        guard value.count <= capacity else { return nil }
        return UniqueHeader(name: name, count: value.count) { out in
            value.withUnsafeBytes { out.copyMemory(from: $0) }
        }
    }
}
