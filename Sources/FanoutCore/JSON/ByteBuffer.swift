/// Owner of a block of manually allocated memory; frees it in `deinit`.
///
/// The hot-path buffers (`ByteBuffer`, the tape of `JSONTape`) keep their base pointer, count and
/// capacity as plain stored properties of a struct, so that reading and appending compile to loads
/// and stores with no uniqueness check, no dynamic exclusivity check and no generic code. This
/// class only ties the memory's lifetime to the values that point into it, and tells (through
/// `isKnownUniquelyReferenced`) whether a value may mutate the memory in place.
@usableFromInline
final class RawAllocation {
    /// Invariant: `pointer` is the start of `byteCount` bytes allocated with 16-byte alignment, owned
    /// by this object; every value that points into it holds a reference to this object.
    private(set) var pointer: UnsafeMutableRawPointer
    private(set) var byteCount: Int

    init(byteCount: Int) {
        self.byteCount = max(byteCount, 16)
        pointer = UnsafeMutableRawPointer.allocate(byteCount: self.byteCount, alignment: 16)
    }

    /// Moves to a block of at least `byteCount` bytes, keeping the first `keeping` bytes.
    /// Pointers into the old block are invalid afterwards.
    func grow(to byteCount: Int, keeping: Int) {
        let newCount = max(byteCount, self.byteCount * 2)
        let newPointer = UnsafeMutableRawPointer.allocate(byteCount: newCount, alignment: 16)
        if keeping > 0 { newPointer.copyMemory(from: pointer, byteCount: keeping) }
        pointer.deallocate()
        pointer = newPointer
        self.byteCount = newCount
    }

    deinit { pointer.deallocate() }
}

/// A growable byte buffer for writing JSON on the hot path: capacity is reserved once and reused,
/// appends are a bounds check and a store (or a `memcpy`). Copies share the memory until one is
/// reset: `removeAll()` takes fresh memory when the buffer is shared, and appends do not check, so
/// **every fill starts with `removeAll()`** (then a copy never sees another's later writes). The
/// type is internal and its users (`PayloadEncoder.encode`) keep to that.
///
/// Invariants: `base` points into `allocation` (valid for `capacity` bytes, the first `count`
/// initialized); they are updated together whenever the allocation grows.
@usableFromInline
struct ByteBuffer {
    private var allocation: RawAllocation
    @usableFromInline private(set) var base: UnsafeMutablePointer<UInt8>
    @usableFromInline private(set) var count: Int
    @usableFromInline private(set) var capacity: Int

    init(capacity: Int) {
        allocation = RawAllocation(byteCount: capacity)
        base = allocation.pointer.assumingMemoryBound(to: UInt8.self)
        count = 0
        self.capacity = allocation.byteCount
    }

    /// Empties the buffer, keeping its capacity; takes fresh memory when shared with a copy.
    @inline(__always)
    mutating func removeAll() {
        if !isKnownUniquelyReferenced(&allocation) {
            allocation = RawAllocation(byteCount: capacity)
            base = allocation.pointer.assumingMemoryBound(to: UInt8.self)
        }
        count = 0
    }

    @inlinable
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Makes room for `n` more bytes.
    @inline(__always)
    mutating func reserve(_ n: Int) {
        if _slowPath(n > capacity &- count) { grow(count + n) }
    }

    @inline(never)
    private mutating func grow(_ minimum: Int) {
        if !isKnownUniquelyReferenced(&allocation) {
            let fresh = RawAllocation(byteCount: max(minimum, capacity))
            fresh.pointer.copyMemory(from: base, byteCount: count)
            allocation = fresh
        } else {
            allocation.grow(to: minimum, keeping: count)
        }
        base = allocation.pointer.assumingMemoryBound(to: UInt8.self)
        capacity = allocation.byteCount
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count &+= 1
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeRawPointer, count n: Int) {
        reserve(n)
        appendReserved(bytes, count: n)
    }

    /// Appends `n` bytes without a capacity check; the caller reserved room for them.
    @inline(__always)
    mutating func appendReserved(_ bytes: UnsafeRawPointer, count n: Int) {
        let target = UnsafeMutableRawPointer(base + count)
        if n >= 8 && n <= 32 {
            // Keys, literals and short strings: whole words, the last one overlapping (no call to memcpy).
            var i = 0
            while i &+ 8 < n {
                let word = bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                target.storeBytes(of: word, toByteOffset: i, as: UInt64.self)
                i &+= 8
            }
            let last = bytes.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
            target.storeBytes(of: last, toByteOffset: n &- 8, as: UInt64.self)
        } else if n >= 4 && n < 8 {
            let first = bytes.loadUnaligned(as: UInt32.self)
            let last = bytes.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self)
            target.storeBytes(of: first, as: UInt32.self)
            target.storeBytes(of: last, toByteOffset: n &- 4, as: UInt32.self)
        } else {
            target.copyMemory(from: bytes, byteCount: n)
        }
        count &+= n
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let p = bytes.baseAddress else { return }
        append(p, count: bytes.count)
    }

    @inline(__always)
    mutating func append(_ literal: StaticString) {
        append(literal.utf8Start, count: literal.utf8CodeUnitCount)
    }

    /// Appends a literal without a capacity check; the caller reserved room for it.
    @inline(__always)
    mutating func appendReserved(_ literal: StaticString) {
        appendReserved(literal.utf8Start, count: literal.utf8CodeUnitCount)
    }

    /// Appends a byte without a capacity check; the caller reserved room for it.
    @inline(__always)
    mutating func appendReserved(_ byte: UInt8) {
        base[count] = byte
        count &+= 1
    }

    /// Overwrites 4 bytes at `offset` (offset + 4 ≤ count) with a little-endian UInt32.
    @inline(__always)
    mutating func storeUInt32(_ value: UInt32, at offset: Int) {
        precondition(offset >= 0 && offset &+ 4 <= count)
        UnsafeMutableRawPointer(base + offset).storeBytes(of: value.littleEndian, as: UInt32.self)
    }

    /// Appends a little-endian UInt32 without a capacity check; the caller reserved room for it.
    @inline(__always)
    mutating func appendReservedUInt32(_ value: UInt32) {
        UnsafeMutableRawPointer(base + count).storeBytes(of: value.littleEndian, as: UInt32.self)
        count &+= 4
    }

    /// A content-record value: a tag byte and 8 little-endian bytes (`ContentRecord`).
    @inline(__always)
    mutating func appendRecordWord(_ tag: UInt8, _ word: UInt64) {
        reserve(9)
        base[count] = tag
        UnsafeMutableRawPointer(base + (count &+ 1)).storeBytes(of: word.littleEndian, as: UInt64.self)
        count &+= 9
    }

    /// Counts `n` bytes that the caller wrote after the contents itself (through `base`), in room it reserved.
    @inline(__always)
    mutating func appendedReserved(_ n: Int) {
        precondition(n >= 0 && n <= capacity &- count)
        count &+= n
    }

    /// Drops the bytes from `newCount` on (`newCount` ≤ `count`).
    @inline(__always)
    mutating func truncate(to newCount: Int) {
        precondition(newCount >= 0 && newCount <= count)
        count = newCount
    }
}

// MARK: JSON writing into a ByteBuffer (the payload encoder's fast path)

extension ByteBuffer {
    /// The most bytes `appendJSONIntReserved` writes (`-9223372036854775808`).
    static var jsonIntBytes: Int { 20 }

    /// Decimal digits of an Int64, as `JSONWriter.appendInt`.
    @inline(__always)
    mutating func appendJSONInt(_ value: Int64) {
        reserve(ByteBuffer.jsonIntBytes)
        appendJSONIntReserved(value)
    }

    /// `appendJSONInt` without a capacity check: the caller reserved `jsonIntBytes`.
    @inline(__always)
    mutating func appendJSONIntReserved(_ value: Int64) {
        var magnitude = value.magnitude
        if value < 0 { appendReserved(UInt8(ascii: "-")) }
        if magnitude < 10 {
            appendReserved(UInt8(ascii: "0") &+ UInt8(magnitude))
            return
        }
        // The digit count from the bit length (Bit Twiddling Hacks' log10), then two digits per division. 10^t by
        // products (a table read through `withUnsafeBytes(of:)` was copied to the stack on every call).
        let t = ((64 &- magnitude.leadingZeroBitCount) &* 1233) >> 12
        var power: UInt64 = 1
        for _ in 0..<t { power = power &* 10 }
        let digits = magnitude >= power ? t &+ 1 : t
        var k = count &+ digits
        count = k
        let pairs = ByteBuffer.digitPairs.utf8Start
        while magnitude >= 100 {
            let q = magnitude / 100
            let r = Int(truncatingIfNeeded: magnitude &- q &* 100) &* 2
            k &-= 2
            base[k] = pairs[r]
            base[k &+ 1] = pairs[r &+ 1]
            magnitude = q
        }
        if magnitude >= 10 {
            let r = Int(truncatingIfNeeded: magnitude) &* 2
            base[k &- 2] = pairs[r]
            base[k &- 1] = pairs[r &+ 1]
        } else {
            base[k &- 1] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude)
        }
    }

    /// "00" to "99", back to back.
    static let digitPairs: StaticString = """
        00010203040506070809101112131415161718192021222324252627282930313233343536373839\
        40414243444546474849505152535455565758596061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899
        """

    /// `"…"` with `JSONWriter.Escaping.unicodeControls`, as `JSONWriter.appendString`.
    @inline(__always)
    mutating func appendJSONString(_ bytes: UnsafeRawBufferPointer) {
        reserve(bytes.count &+ 2)
        appendJSONStringReserved(bytes)
    }

    /// `appendJSONString` when the caller reserved room for the bytes and the quotes (`bytes.count + 2`); a string
    /// that needs escapes goes on with checked appends.
    @inline(__always)
    mutating func appendJSONStringReserved(_ bytes: UnsafeRawBufferPointer) {
        let n = bytes.count
        // The common case (nothing to escape): the bytes judged and copied in one pass.
        guard let p = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            appendReserved(UInt8(ascii: "\""))
            appendReserved(UInt8(ascii: "\""))
            return
        }
        let plain: Bool
        if n >= 8 {
            // Judged and copied a word at a time in one pass (room for n + 2 bytes is reserved); the last word
            // overlaps. Written past `count` only, so a string that needs escapes is written again below.
            let target = UnsafeMutableRawPointer(base + (count &+ 1))
            let raw = UnsafeRawPointer(p)
            var i = 0
            var special: UInt64 = 0
            while i &+ 8 < n {
                let w = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                target.storeBytes(of: w, toByteOffset: i, as: UInt64.self)
                special |= JSONScan.writingMask(UInt64(littleEndian: w))
                if special != 0 { break }
                i &+= 8
            }
            if special == 0 {
                let w = raw.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
                target.storeBytes(of: w, toByteOffset: n &- 8, as: UInt64.self)
                if JSONScan.writingMask(UInt64(littleEndian: w)) == 0 {
                    base[count] = UInt8(ascii: "\"")
                    base[count &+ 1 &+ n] = UInt8(ascii: "\"")
                    count &+= n &+ 2
                    return
                }
            }
            plain = false
        } else if n >= 4 {
            // Two overlapping halves in one word: a byte counted twice changes nothing when none is special.
            let raw = UnsafeRawPointer(p)
            let low = UInt64(UInt32(littleEndian: raw.loadUnaligned(as: UInt32.self)))
            let high = UInt64(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self)))
            plain = JSONScan.writingMask(low | high << 32) == 0
        } else {
            plain = false
        }
        if plain {
            appendReserved(UInt8(ascii: "\""))
            appendReserved(UnsafeRawPointer(p), count: n)
            appendReserved(UInt8(ascii: "\""))
            return
        }
        appendJSONStringEscaping(p, n)
    }

    /// `appendJSONString` for bytes that may need escapes (or are short): judged byte by byte.
    @inline(never)
    private mutating func appendJSONStringEscaping(_ p: UnsafePointer<UInt8>, _ n: Int) {
        appendReserved(UInt8(ascii: "\""))
        var runStart = 0
        var i = JSONScan.firstSpecialForWriting(p, 0, n)
        while i < n {
            let c = p[i]
            if c >= 0x20 && c != UInt8(ascii: "\"") && c != UInt8(ascii: "\\") {
                i &+= 1
                continue
            }
            if i > runStart { append(p + runStart, count: i &- runStart) }
            appendEscape(c)
            i &+= 1
            runStart = i
            i = JSONScan.firstSpecialForWriting(p, i, n)
        }
        if n > runStart { append(p + runStart, count: n &- runStart) }
        append(UInt8(ascii: "\""))
    }

    @inline(never)
    private mutating func appendEscape(_ c: UInt8) {
        if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") {
            append(UInt8(ascii: "\\"))
            append(c)
            return
        }
        let hex: StaticString = "0123456789abcdef"
        reserve(6)
        appendReserved(UInt8(ascii: "\\"))
        appendReserved(UInt8(ascii: "u"))
        appendReserved(UInt8(ascii: "0"))
        appendReserved(UInt8(ascii: "0"))
        appendReserved(hex.utf8Start[Int(c >> 4)])
        appendReserved(hex.utf8Start[Int(c & 0xF)])
    }

    /// The most bytes the fast path of `appendJSONDoubleReserved` writes: a sign, then at most 16 digits of `m`
    /// and at most 17 fraction digits, 20 in all with the point (`appendDecimal`). Beyond it: checked appends.
    static var jsonDoubleBytes: Int { 20 }

    /// The same text as `JSONWriter.appendDouble`.
    @inline(__always)
    mutating func appendJSONDouble(_ value: Double) {
        reserve(ByteBuffer.jsonDoubleBytes)
        appendJSONDoubleReserved(value)
    }

    /// `appendJSONDouble` when the caller reserved `jsonDoubleBytes`.
    @inline(__always)
    mutating func appendJSONDoubleReserved(_ value: Double) {
        precondition(value.isFinite, "JSON has no representation for \(value)")
        if value == 0 {
            appendReserved(value.sign == .minus ? "-0.0" : "0.0")
            return
        }
        let magnitude = abs(value)
        if magnitude < 9.007199254740992e15 && magnitude >= 1e-17 {
            // k = 0 cannot give a magnitude below 1 (its rounding is 0 or 1). The scale is 10^k exactly: every
            // power of ten to 10^22 is a Double, so each product by 10 is exact.
            var k = magnitude < 1 ? 1 : 0
            var scale: Double = magnitude < 1 ? 10 : 1
            while k <= 17 {
                let v = magnitude * scale
                // `v.rounded()` (half away from zero) without libm's `round`: below 2^53 the integer part
                // converts exactly and `v - t` is exact; at or above it `round(v) ≥ 2^53` fails the test anyway.
                if v < 9.007199254740992e15 {
                    let t = Double(Int64(v))
                    let m = v - t >= 0.5 ? t + 1 : t
                    if m < 9.007199254740992e15 && m / scale == magnitude {
                        if value < 0 { appendReserved(UInt8(ascii: "-")) }
                        appendDecimalReserved(UInt64(m), fractionDigits: k)
                        return
                    }
                }
                k += 1
                scale *= 10
            }
        }
        appendDoubleSlow(value)
    }

    @inline(never)
    private mutating func appendDoubleSlow(_ value: Double) {
        var text: [UInt8] = []
        JSONWriter.appendDouble(value, to: &text)
        text.withUnsafeBytes { append($0) }
    }

    /// `m / 10^k` in plain decimal notation, as `JSONWriter.appendDecimal`, without a capacity check: m < 2^53 and
    /// k ≤ 17, at most 19 bytes, reserved by the caller.
    @inline(__always)
    mutating func appendDecimalReserved(_ m: UInt64, fractionDigits k: Int) {
        // m < 2^53 has at most 16 digits; with k ≤ 17 the text is at most 20 bytes.
        // A payload's doubles have few digits: counted by a loop (a table read would be copied to the stack).
        var digits = 1
        var bound: UInt64 = 10
        while m >= bound {
            digits &+= 1
            bound = bound &* 10
        }
        let integerDigits = digits > k ? digits - k : 1
        let total = integerDigits &+ 1 &+ (k == 0 ? 1 : k)
        let start = count
        count = start &+ total
        // The digits of m right to left, two a division, then the point moved in: first the fraction's k
        // digits (zeros where m has fewer), the point, the integer part (a zero when there is none).
        var n = m
        var i = start &+ total &- 1
        if k == 0 {
            base[i] = UInt8(ascii: "0")
            i &-= 1
        } else {
            var left = k
            let pairs = ByteBuffer.digitPairs.utf8Start
            while left >= 2 {
                let q = n / 100
                let r = Int(truncatingIfNeeded: n &- q &* 100) &* 2
                base[i &- 1] = pairs[r]
                base[i] = pairs[r &+ 1]
                n = q
                i &-= 2
                left &-= 2
            }
            if left == 1 {
                base[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: n % 10)
                n /= 10
                i &-= 1
            }
        }
        base[i] = UInt8(ascii: ".")
        i &-= 1
        for _ in 0..<integerDigits {
            base[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: n % 10)
            n /= 10
            i &-= 1
        }
    }
}

/// Word-at-a-time byte classification for scanning and writing strings.
enum JSONScan {
    @inline(__always)
    static func repeated(_ byte: UInt8) -> UInt64 { 0x0101_0101_0101_0101 &* UInt64(byte) }

    /// High bit set in each byte of `w` that is `"`, `\` or below 0x20. Bytes after the first such
    /// byte may be flagged too (borrows), so only the lowest flagged byte is meaningful.
    @inline(__always)
    static func writingMask(_ w: UInt64) -> UInt64 {
        let high: UInt64 = 0x8080_8080_8080_8080
        let q = w ^ repeated(UInt8(ascii: "\""))
        let b = w ^ repeated(UInt8(ascii: "\\"))
        let zeroQ = (q &- repeated(1)) & ~q
        let zeroB = (b &- repeated(1)) & ~b
        let control = (w &- repeated(0x20)) & ~w
        return (zeroQ | zeroB | control) & high
    }

    /// As `writingMask`, and bytes of at least 0x80 flagged too.
    @inline(__always)
    static func scanningMask(_ w: UInt64) -> UInt64 {
        writingMask(w) | (w & 0x8080_8080_8080_8080)
    }

    /// The first index ≥ `start` whose byte is `"`, `\` or a control character; `n` when there is none; or,
    /// when the last word has one, the index where fewer than 8 bytes remain (the caller checks those one by
    /// one).
    @inline(__always)
    static func firstSpecialForWriting(_ p: UnsafePointer<UInt8>, _ start: Int, _ n: Int) -> Int {
        var i = start
        while i &+ 8 <= n {
            let w = UInt64(littleEndian: UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self))
            let mask = writingMask(w)
            if mask != 0 { return i &+ (mask.trailingZeroBitCount >> 3) }
            i &+= 8
        }
        // Fewer than 8 left: the last whole word (overlapping bytes already judged) clears them at once.
        if i < n && n >= 8 {
            let w = UInt64(littleEndian: UnsafeRawPointer(p + (n &- 8)).loadUnaligned(as: UInt64.self))
            if writingMask(w) == 0 { return n }
        }
        return i
    }
}
