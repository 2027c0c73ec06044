/// Names of a few bytes (HTTP/2 pseudo-headers, the headers APNs reads) compared without a call to `memcmp`.
public enum ShortBytes {
    /// Whether the `text.utf8CodeUnitCount` bytes at `bytes` equal `text`, a text of 4 to 16 bytes: two overlapping
    /// words each side, compared inline (a call to `memcmp`, or a loop over the bytes, costs more for names this
    /// short). The caller has checked that `bytes` holds exactly that many (a switch on the length, as a rule).
    @inlinable @inline(__always)
    public static func equal(_ bytes: UnsafeRawPointer, _ text: StaticString) -> Bool {
        let b = UnsafeRawPointer(text.utf8Start)
        let n = text.utf8CodeUnitCount
        assert(n >= 4 && n <= 16, "ShortBytes.equal: a text of 4 to 16 bytes")
        if n >= 8 {
            return bytes.loadUnaligned(as: UInt64.self) == b.loadUnaligned(as: UInt64.self)
                && bytes.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
                    == b.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
        }
        return bytes.loadUnaligned(as: UInt32.self) == b.loadUnaligned(as: UInt32.self)
            && bytes.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)
                == b.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)
    }
}
