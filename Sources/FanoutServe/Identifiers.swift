#if canImport(Glibc)
import Glibc
#endif

/// Random version-4 UUIDs for generated `apns-id`, `apns-request-id` and `apns-unique-id` values, without
/// Foundation (whose `uuidString` formats through `sprintf`, a tenth of a request's cost): a xorshift128+
/// stream seeded once from the system generator, formatted by hand, lowercase as APNs writes them.
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

    mutating func make() -> String {
        var hi = next()
        var lo = next()
        hi = (hi & ~0xF000) | 0x4000  // version 4
        lo = (lo & ~(0xC << 60)) | (0x8 << 60)  // variant 10
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 36) { out in
            var i = 0
            func put(_ value: UInt64, nibbles: Int) {
                for k in stride(from: nibbles - 1, through: 0, by: -1) {
                    out[i] = digits.utf8Start[Int((value >> UInt64(k * 4)) & 0xF)]
                    i += 1
                }
            }
            put(hi >> 32, nibbles: 8)
            out[i] = UInt8(ascii: "-"); i += 1
            put(hi >> 16 & 0xFFFF, nibbles: 4)
            out[i] = UInt8(ascii: "-"); i += 1
            put(hi & 0xFFFF, nibbles: 4)
            out[i] = UInt8(ascii: "-"); i += 1
            put(lo >> 48, nibbles: 4)
            out[i] = UInt8(ascii: "-"); i += 1
            put(lo & 0xFFFF_FFFF_FFFF, nibbles: 12)
            return i
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
