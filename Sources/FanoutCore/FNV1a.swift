/// FNV-1a, 64 bits: the one byte hash the house uses where a value must be stable across machines, processes and
/// versions (shard slices, draw keys, trace and flag hashes, content records). Not for hostile keys.
public enum FNV1a {
    public static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    public static let prime: UInt64 = 0x100_0000_01b3

    /// The hash of `bytes`, continuing from `h` (the offset basis to start).
    @inlinable @inline(__always)
    public static func hash(_ bytes: UnsafeRawBufferPointer, from h: UInt64 = offsetBasis) -> UInt64 {
        var h = h
        for b in bytes { h = (h ^ UInt64(b)) &* prime }
        return h
    }

    /// A hash as 16 lowercase hex digits (the configuration, flags and trace hashes reports show).
    public static func hex(_ h: UInt64) -> String {
        let digits = String(h, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The hash of a collection of bytes, continuing from `h`.
    @inlinable @inline(__always)
    public static func hash(_ bytes: some Collection<UInt8>, from h: UInt64 = offsetBasis) -> UInt64 {
        var h = h
        for b in bytes { h = (h ^ UInt64(b)) &* prime }
        return h
    }
}
