/// A scanned tape read together with the bytes it was scanned from (`JSONTape.reading(_:)`): the values
/// are read here, on demand. A view, not an owner: it is valid while its maker holds the bytes and the
/// tape is not scanned again, so it is made where the bytes are lent and never stored beyond that scope.
public struct JSONDocument {
    @usableFromInline let entries: UnsafePointer<JSONTape.Entry>?
    /// Number of entries.
    public let count: Int
    /// The document's bytes.
    public let bytes: UnsafeRawBufferPointer

    @usableFromInline
    init(entries: UnsafePointer<JSONTape.Entry>?, count: Int, bytes: UnsafeRawBufferPointer) {
        self.entries = entries
        self.count = count
        self.bytes = bytes
    }

    /// A document with no entries (a placeholder between documents; reads nothing).
    public init() {
        self.init(entries: nil, count: 0, bytes: UnsafeRawBufferPointer(start: nil, count: 0))
    }

    @inline(__always)
    public subscript(index: Int) -> JSONTape.Entry {
        precondition(UInt(bitPattern: index) < UInt(bitPattern: count), "tape index out of range")
        return entries.unsafelyUnwrapped[index]
    }
}

extension JSONDocument {
    /// Index of the value of member `key` in the object at `object`, or -1. Duplicate keys: the
    /// last one wins (the whole object is walked).
    @inline(__always)
    public func member(_ object: Int, _ key: StaticString) -> Int {
        let keyPointer = UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
        return member(object, keyPointer)
    }

    public func member(_ object: Int, _ key: UnsafeRawBufferPointer) -> Int {
        let end = Int(self[object].next)
        var i = object + 1
        var found = -1
        while i < end {
            if stringEquals(i, key) { found = i + 1 }
            i = Int(self[i + 1].next)
        }
        return found
    }

    /// True when the string entry at `index` (a key or a value) equals `other` after unescaping.
    @inline(__always)
    public func stringEquals(_ index: Int, _ other: StaticString) -> Bool {
        stringEquals(index, UnsafeRawBufferPointer(start: other.utf8Start, count: other.utf8CodeUnitCount))
    }

    @inline(__always)
    public func stringEquals(_ index: Int, _ other: UnsafeRawBufferPointer) -> Bool {
        let e = self[index]
        let start = Int(e.start)
        let length = Int(e.end) &- start
        if !e.flag {
            guard length == other.count else { return false }
            if length == 0 { return true }
            return memoryEqual(bytes.baseAddress! + start, other.baseAddress!, length)
        }
        return escapedStringEquals(index, other)
    }

    /// `stringEquals` for a string written with escapes: decoded on the fly, compared byte by byte.
    @inline(never)
    func escapedStringEquals(_ index: Int, _ other: UnsafeRawBufferPointer) -> Bool {
        var matched = 0
        var ok = true
        forEachUnescapedByte(index) { byte in
            if !ok { return }
            if matched >= other.count || other[matched] != byte {
                ok = false
                return
            }
            matched += 1
        }
        return ok && matched == other.count
    }

    /// Byte length of the string entry at `index` once unescaped.
    public func unescapedCount(_ index: Int) -> Int {
        let e = self[index]
        if !e.flag { return Int(e.end - e.start) }
        var count = 0
        forEachUnescapedByte(index) { _ in count += 1 }
        return count
    }

    /// Appends the unescaped UTF-8 bytes of the string entry at `index` to `buffer`.
    @inline(__always)
    public func appendUnescaped(_ index: Int, to buffer: inout [UInt8]) {
        let e = self[index]
        if !e.flag {
            let start = Int(e.start)
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<Int(e.end)]))
            return
        }
        forEachUnescapedByte(index) { buffer.append($0) }
    }

    /// Appends the unescaped UTF-8 bytes of the string entry at `index` to `buffer`.
    @inline(__always)
    func appendUnescaped(_ index: Int, to buffer: inout ByteBuffer) {
        let e = self[index]
        if !e.flag {
            buffer.append(bytes.baseAddress! + Int(e.start), count: Int(e.end) &- Int(e.start))
            return
        }
        forEachUnescapedByte(index) { buffer.append($0) }
    }

    /// Raw bytes of an entry (string contents without quotes, or a number token).
    @inline(__always)
    public func rawBytes(_ index: Int) -> UnsafeRawBufferPointer {
        let e = self[index]
        return UnsafeRawBufferPointer(rebasing: bytes[Int(e.start)..<Int(e.end)])
    }

    /// Integral number in Int64 range (`3`, `3.0`, `1e3`), else nil (also for non-numbers).
    @inline(__always)
    public func int64(_ index: Int) -> Int64? {
        let e = self[index]
        guard e.kind == .number else { return nil }
        let p = (bytes.baseAddress! + Int(e.start)).assumingMemoryBound(to: UInt8.self)
        return JSONNumber.int64(p, Int(e.end - e.start), fractional: e.flag)
    }

    /// Any JSON number as a Double (finite by construction of the scanner), else nil.
    @inline(__always)
    public func double(_ index: Int) -> Double? {
        let e = self[index]
        guard e.kind == .number else { return nil }
        let p = (bytes.baseAddress! + Int(e.start)).assumingMemoryBound(to: UInt8.self)
        return JSONNumber.parseDouble(p, Int(e.end - e.start))
    }

    /// Calls `body` with every byte of the unescaped UTF-8 contents of a string entry.
    /// The scanner has already checked the escapes, so decoding cannot fail here.
    @inline(__always)
    func forEachUnescapedByte(_ index: Int, _ body: (UInt8) -> Void) {
        let e = self[index]
        let p = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var i = Int(e.start)
        let end = Int(e.end)
        while i < end {
            let c = p[i]
            if c != UInt8(ascii: "\\") {
                body(c)
                i += 1
                continue
            }
            let kind = p[i + 1]
            switch kind {
            case UInt8(ascii: "b"): body(0x08)
            case UInt8(ascii: "f"): body(0x0C)
            case UInt8(ascii: "n"): body(0x0A)
            case UInt8(ascii: "r"): body(0x0D)
            case UInt8(ascii: "t"): body(0x09)
            case UInt8(ascii: "u"):
                var scalar = JSONTape.hex4(p, i + 2, end)!
                if scalar >= 0xD800 && scalar <= 0xDBFF {
                    let low = JSONTape.hex4(p, i + 8, end)!
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                UTF8Writer.forEachByte(of: scalar, body)
                i += 6
                continue
            default: body(kind)  // \" \\ \/
            }
            i += 2
        }
    }
}

@inline(__always)
func memoryEqual(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ count: Int) -> Bool {
    // Whole words, then the last (overlapping) word; short keys in one or two loads.
    if count >= 8 {
        var i = 0
        while i &+ 8 < count {
            if word(a, i) != word(b, i) { return false }
            i &+= 8
        }
        return word(a, count &- 8) == word(b, count &- 8)
    }
    if count >= 4 {
        let last = count &- 4
        return a.loadUnaligned(as: UInt32.self) == b.loadUnaligned(as: UInt32.self)
            && a.loadUnaligned(fromByteOffset: last, as: UInt32.self)
                == b.loadUnaligned(fromByteOffset: last, as: UInt32.self)
    }
    var i = 0
    while i < count {
        if a.load(fromByteOffset: i, as: UInt8.self) != b.load(fromByteOffset: i, as: UInt8.self) { return false }
        i &+= 1
    }
    return true
}

@inline(__always)
private func word(_ p: UnsafeRawPointer, _ offset: Int) -> UInt64 {
    p.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
}

/// Byte-wise (= Unicode code point) ordering of UTF-8 strings.
@inline(__always)
public func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let n = min(a.count, b.count)
    var i = 0
    while i < n {
        let x = a[i]
        let y = b[i]
        if x != y { return x < y ? -1 : 1 }
        i += 1
    }
    return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
}

enum UTF8Writer {
    @inline(__always)
    static func forEachByte(of scalar: UInt32, _ body: (UInt8) -> Void) {
        switch scalar {
        case 0..<0x80:
            body(UInt8(scalar))
        case 0x80..<0x800:
            body(UInt8(0xC0 | (scalar >> 6)))
            body(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            body(UInt8(0xE0 | (scalar >> 12)))
            body(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            body(UInt8(0x80 | (scalar & 0x3F)))
        default:
            body(UInt8(0xF0 | (scalar >> 18)))
            body(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            body(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            body(UInt8(0x80 | (scalar & 0x3F)))
        }
    }
}
