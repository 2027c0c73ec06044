/// A UUID's text: 8-4-4-4-12 lowercase hex digits (36 bytes) of a 128-bit value, most significant first. The one
/// formatter: fanout push's request ids (FanoutWire's `H2UUIDHeader`) and fanout serve's generated `apns-id`,
/// `apns-request-id` and `apns-unique-id`; the one check is ``PayloadValidator/isCanonicalUUID(_:)``.
public enum UUIDText {
    /// The text's length: 32 digits and 4 dashes.
    public static let count = 36

    /// Writes the 36 bytes at `out`: eight digits at a time, branch-free (a digit-by-digit loop cost ~680
    /// instructions under callgrind).
    @inline(__always)
    public static func format(high: UInt64, low: UInt64, into raw: UnsafeMutableRawPointer) {
        let dash = UInt8(ascii: "-")
        let a = digits(UInt32(truncatingIfNeeded: high >> 32))
        let b = digits(UInt32(truncatingIfNeeded: high))
        let c = digits(UInt32(truncatingIfNeeded: low >> 32))
        let d = digits(UInt32(truncatingIfNeeded: low))
        // 8-4-4-4-12: a, dash, b's first and last four, dash, c's first four, dash, c's last four, d.
        raw.storeBytes(of: a.bigEndian, as: UInt64.self)
        raw.storeBytes(of: dash, toByteOffset: 8, as: UInt8.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: b >> 32).bigEndian, toByteOffset: 9, as: UInt32.self)
        raw.storeBytes(of: dash, toByteOffset: 13, as: UInt8.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: b).bigEndian, toByteOffset: 14, as: UInt32.self)
        raw.storeBytes(of: dash, toByteOffset: 18, as: UInt8.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: c >> 32).bigEndian, toByteOffset: 19, as: UInt32.self)
        raw.storeBytes(of: dash, toByteOffset: 23, as: UInt8.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: c).bigEndian, toByteOffset: 24, as: UInt32.self)
        raw.storeBytes(of: d.bigEndian, toByteOffset: 28, as: UInt64.self)
    }

    /// The eight lowercase hex digits of `x`, the most significant in the word's highest byte (stored big-endian:
    /// in reading order).
    @inline(__always)
    static func digits(_ x: UInt32) -> UInt64 {
        // Each nibble into a byte of its own (nibble k in byte k).
        var v = UInt64(x)
        v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF
        v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF
        v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F
        // 1 in the bytes that hold 10-15 (n + 6 reaches 16), which become a-f.
        let letters = ((v &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        return v &+ 0x3030_3030_3030_3030 &+ letters &* 0x27
    }
}
