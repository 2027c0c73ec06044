/// A strict (RFC 8259) JSON scanner that records the structure of a document on a reusable tape.
///
/// One pass over the bytes checks the grammar, UTF-8, string escapes (including surrogate pairs) and
/// number syntax, and writes one `Entry` per value and per object key. Nothing is decoded: an entry
/// holds the offsets of its bytes, and values are read on demand through a `JSONDocument`
/// (`int64`, `double`, `stringEquals`), which the reader makes from the tape and the same bytes while it
/// holds them (`reading(_:)`). The tape keeps no pointer to the bytes it scanned, so a tape that outlives
/// them (a validator's, kept between pushes) cannot read memory that is gone.
/// The tape's storage is kept between documents, so scanning allocates nothing in steady state.
///
/// Layout: an object entry is followed by its members as (key, value) pairs; an array entry by its
/// elements. Every entry's `next` is the index of the entry after it and everything it contains,
/// so siblings are walked in O(1) each.
public struct JSONTape {
    public enum Kind: UInt8, Sendable {
        case object, array, string, number, bool, null
    }

    public struct Entry: Sendable {
        public var kind: Kind
        /// string: it contains a backslash escape; number: it has a fraction or an exponent;
        /// bool: the value is `true`.
        public var flag: Bool
        /// Byte offsets: for strings the contents between the quotes; for numbers and literals the
        /// token; for containers from the opening to one past the closing bracket.
        public var start: Int32
        public var end: Int32
        /// Index of the entry following this value and all its children.
        public var next: Int32
    }

    // The entries, in memory owned by `owner` (see `RawAllocation`): appending is a capacity check
    // and a store. Invariant: `base` points to `capacity` entries inside `owner`, the first `count`
    // initialized. Copies of a tape share `owner` until one of them scans again, which takes fresh
    // memory when `owner` is shared (so a copy keeps reading its own document).
    private var owner: RawAllocation
    private var base: UnsafeMutablePointer<Entry>
    private var capacity: Int
    /// Number of entries.
    public private(set) var count: Int = 0
    /// The length of the last document scanned (its bytes are not kept: see `reading(_:)`).
    public private(set) var byteCount: Int = 0

    public init() {
        capacity = 64
        owner = RawAllocation(byteCount: capacity * MemoryLayout<Entry>.stride)
        base = owner.pointer.bindMemory(to: Entry.self, capacity: capacity)
    }

    /// A copy of the entries (this allocates; the hot path reads entries by index).
    public var entries: [Entry] { Array(UnsafeBufferPointer(start: base, count: count)) }

    @inline(__always)
    public subscript(index: Int) -> Entry {
        precondition(UInt(bitPattern: index) < UInt(bitPattern: count), "tape index out of range")
        return base[index]
    }

    /// The tape read with the bytes it was scanned from, which the caller holds now. Checks that they have
    /// the scanned length (so every entry's offsets are inside them). The document is valid while the
    /// caller holds the bytes and the tape is not scanned again: make it where the bytes are lent, read,
    /// and let it go.
    @inline(__always)
    public func reading(_ bytes: UnsafeRawBufferPointer) -> JSONDocument {
        precondition(bytes.count == byteCount, "a tape is read with the bytes it scanned")
        return JSONDocument(entries: UnsafePointer(base), count: count, bytes: bytes)
    }

    /// Drops the last scan: no bytes can be read with the tape until it scans again (`reading(_:)` fails).
    @inline(__always)
    mutating func forget() {
        count = 0
        byteCount = -1
    }

    /// Scans `bytes` as one JSON document (surrounding whitespace allowed, nothing else).
    /// Returns `nil` on success, else the byte offset where the document stopped being strict JSON.
    /// The tape keeps the entries, not the bytes: read them with `reading(bytes)`.
    public mutating func scan(_ bytes: UnsafeRawBufferPointer) -> Int? {
        if !isKnownUniquelyReferenced(&owner) {
            owner = RawAllocation(byteCount: capacity * MemoryLayout<Entry>.stride)
            base = owner.pointer.bindMemory(to: Entry.self, capacity: capacity)
        }
        count = 0
        byteCount = bytes.count
        guard let start = bytes.baseAddress, bytes.count > 0 else { return 0 }
        // The entries are written through a local writer (its base, count and capacity in registers: a store
        // through `base` cannot touch a local), copied back when the scan ends.
        var w = Writer(owner: owner, base: base, capacity: capacity)
        defer {
            base = w.base
            capacity = w.capacity
            count = w.count
        }
        return w.scan(start.assumingMemoryBound(to: UInt8.self), bytes.count)
    }

    /// The scanner's state while it runs: the entries written so far, and the open containers.
    private struct Writer {
        /// Kept alive by the tape that scans (`owner`), which the writer outlives not.
        unowned(unsafe) let owner: RawAllocation
        var base: UnsafeMutablePointer<Entry>
        var capacity: Int
        var count = 0
        /// The innermost open container, or -1. While a container is open its `next` holds the index
        /// of the container around it (its final value is set when it closes), so no stack is needed.
        var top = -1
        /// Whether `top` is an object (else an array, or none).
        var topIsObject = false

        init(owner: RawAllocation, base: UnsafeMutablePointer<Entry>, capacity: Int) {
            self.owner = owner
            self.base = base
            self.capacity = capacity
        }

        /// The scan as one loop with one place for each step (a key, a value, what follows a value), so that the
        /// compiler keeps the state in registers and no step is a call on the common path.
        @inline(__always)
        mutating func scan(_ p: UnsafePointer<UInt8>, _ n: Int) -> Int? {
            var i = JSONTape.skipWhitespace(p, 0, n)
            // What the next token may be: a key (after '{' or, in an object, ','), a value or a close.
            var expectingKey = false
            var closeAllowed = false  // just after '{' or '['
            while true {
                // --- parse one value (or a key when inside an object awaiting a key) ---
                if i >= n { return i }
                var c = p[i]
                var closedEmpty = false
                if expectingKey {
                    expectingKey = false
                    if c == UInt8(ascii: "}") && closeAllowed {
                        closeContainer(at: i + 1)
                        i += 1
                        closedEmpty = true
                    } else {
                        guard c == UInt8(ascii: "\"") else { return i }
                        var hasEscape = false
                        guard let end = JSONTape.stringEnd(p, i + 1, n, hadEscape: &hasEscape) else { return i }
                        appendLeaf(.string, flag: hasEscape, start: i + 1, end: end)
                        // The compact form (`"key":value`) first: no whitespace to skip.
                        if end + 2 < n && p[end + 1] == UInt8(ascii: ":") && p[end + 2] > 0x20 {
                            i = end + 2
                        } else {
                            i = JSONTape.skipWhitespace(p, end + 1, n)
                            guard i < n, p[i] == UInt8(ascii: ":") else { return i }
                            i = JSONTape.skipWhitespace(p, i + 1, n)
                            guard i < n else { return i }  // `{"a":` ends at the colon: no value to read
                        }
                        c = p[i]
                    }
                    closeAllowed = false
                } else if closeAllowed {
                    closeAllowed = false
                    if c == UInt8(ascii: "]") {
                        closeContainer(at: i + 1)
                        i += 1
                        closedEmpty = true
                    }
                }
                if !closedEmpty {
                    switch c {
                    case UInt8(ascii: "\""):
                        var hasEscape = false
                        guard let end = JSONTape.stringEnd(p, i + 1, n, hadEscape: &hasEscape) else { return i }
                        appendLeaf(.string, flag: hasEscape, start: i + 1, end: end)
                        i = end + 1
                    case UInt8(ascii: "{"):
                        openContainer(.object, at: i)
                        i = JSONTape.skipWhitespace(p, i + 1, n)
                        expectingKey = true
                        closeAllowed = true
                        continue
                    case UInt8(ascii: "["):
                        openContainer(.array, at: i)
                        i = JSONTape.skipWhitespace(p, i + 1, n)
                        closeAllowed = true
                        continue
                    case UInt8(ascii: "t"):
                        guard JSONTape.matchLiteral(p, i, n, "true") else { return i }
                        appendLeaf(.bool, flag: true, start: i, end: i + 4)
                        i += 4
                    case UInt8(ascii: "f"):
                        guard JSONTape.matchLiteral(p, i, n, "false") else { return i }
                        appendLeaf(.bool, flag: false, start: i, end: i + 5)
                        i += 5
                    case UInt8(ascii: "n"):
                        guard JSONTape.matchLiteral(p, i, n, "null") else { return i }
                        appendLeaf(.null, flag: false, start: i, end: i + 4)
                        i += 4
                    default:
                        // The common number inline: `0` or `[1-9][0-9]*`, an optional fraction, no sign, no
                        // exponent, under 300 digits. Anything else is scanned again by `JSONNumber.scan`.
                        var j = i
                        var fractional = false
                        var plain = false
                        if c &- UInt8(ascii: "1") < 9 {
                            j &+= 1
                            while j < n && p[j] &- UInt8(ascii: "0") < 10 { j &+= 1 }
                            plain = true
                        } else if c == UInt8(ascii: "0") {
                            j &+= 1
                            plain = true
                        }
                        if plain && j < n && p[j] == UInt8(ascii: ".") {
                            j &+= 1
                            let fractionStart = j
                            while j < n && p[j] &- UInt8(ascii: "0") < 10 { j &+= 1 }
                            fractional = true
                            plain = j > fractionStart
                        }
                        if plain && j < n && p[j] | 0x20 == UInt8(ascii: "e") { plain = false }
                        if !plain || j &- i > 300 {
                            guard let (end, isFractional) = JSONNumber.scan(p, i, n) else { return i }
                            j = end
                            fractional = isFractional
                        }
                        appendLeaf(.number, flag: fractional, start: i, end: j)
                        i = j
                    }
                }
                // --- after a complete value: the document ends, a separator or a closing bracket follows ---
                while true {
                    i = JSONTape.skipWhitespace(p, i, n)
                    guard top >= 0 else { return i == n ? nil : i }
                    guard i < n else { return i }
                    let c = p[i]
                    if c == UInt8(ascii: ",") {
                        i = JSONTape.skipWhitespace(p, i + 1, n)
                        if topIsObject {
                            guard i < n, p[i] == UInt8(ascii: "\"") else { return i }
                            expectingKey = true
                        }
                        break
                    }
                    if c == (topIsObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                        closeContainer(at: i + 1)
                        i += 1
                        continue
                    }
                    return i
                }
            }
        }

        @inline(__always)
        private mutating func openContainer(_ kind: Kind, at start: Int) {
            let index = count
            append(
                Entry(
                    kind: kind, flag: false, start: Int32(truncatingIfNeeded: start), end: 0,
                    next: Int32(truncatingIfNeeded: top)))
            top = index
            topIsObject = kind == .object
        }

        @inline(__always)
        private mutating func closeContainer(at end: Int) {
            let index = top
            top = Int(base[index].next)
            base[index].end = Int32(truncatingIfNeeded: end)
            base[index].next = Int32(truncatingIfNeeded: count)
            topIsObject = top >= 0 && base[top].kind == .object
        }

        @inline(__always)
        private mutating func appendLeaf(_ kind: Kind, flag: Bool, start: Int, end: Int) {
            append(
                Entry(
                    kind: kind, flag: flag, start: Int32(truncatingIfNeeded: start),
                    end: Int32(truncatingIfNeeded: end), next: Int32(truncatingIfNeeded: count &+ 1)))
        }

        @inline(__always)
        private mutating func append(_ entry: Entry) {
            if _slowPath(count == capacity) { grow() }
            (base + count).initialize(to: entry)
            count &+= 1
        }

        @inline(never)
        private mutating func grow() {
            owner.grow(to: capacity * 2 * MemoryLayout<Entry>.stride, keeping: count * MemoryLayout<Entry>.stride)
            capacity = owner.byteCount / MemoryLayout<Entry>.stride
            base = owner.pointer.bindMemory(to: Entry.self, capacity: capacity)
        }
    }

    @inline(__always)
    private static func skipWhitespace(_ p: UnsafePointer<UInt8>, _ start: Int, _ n: Int) -> Int {
        var i = start
        while i < n {
            let c = p[i]
            if c > 0x20 { break }
            if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { i += 1 } else { break }
        }
        return i
    }

    @inline(__always)
    private static func matchLiteral(_ p: UnsafePointer<UInt8>, _ i: Int, _ n: Int, _ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard i + count <= n else { return false }
        let l = literal.utf8Start
        for k in 0..<count where p[i + k] != l[k] { return false }
        return true
    }

    /// `scanString`'s common case inline: plain ASCII words up to the closing quote. Anything else (an escape, a
    /// control or non-ASCII byte, fewer than 8 bytes left) goes on in `scanString` from where it is: the bytes
    /// before it are plain, so the result is the same.
    @inline(__always)
    static func stringEnd(_ p: UnsafePointer<UInt8>, _ start: Int, _ n: Int, hadEscape: inout Bool) -> Int? {
        var i = start
        while i &+ 8 <= n {
            let w = UInt64(littleEndian: UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self))
            let mask = JSONScan.scanningMask(w)
            if mask != 0 {
                i &+= mask.trailingZeroBitCount >> 3
                if p[i] == UInt8(ascii: "\"") { return i }
                break
            }
            i &+= 8
        }
        return scanStringOutOfLine(p, i, n, hadEscape: &hadEscape)
    }

    @inline(never)
    static func scanStringOutOfLine(_ p: UnsafePointer<UInt8>, _ start: Int, _ n: Int, hadEscape: inout Bool) -> Int? {
        scanString(p, start, n, hadEscape: &hadEscape)
    }

    /// Scans string contents starting after the opening quote; returns the offset of the closing
    /// quote, or nil when the string is not strict JSON (control character, bad escape, lone
    /// surrogate, invalid UTF-8, no closing quote).
    @inline(__always)
    static func scanString(_ p: UnsafePointer<UInt8>, _ start: Int, _ n: Int, hadEscape: inout Bool) -> Int? {
        var i = start
        while true {
            // Eight plain ASCII bytes at a time; stop at the first byte that needs a look.
            while i &+ 8 <= n {
                let w = UInt64(littleEndian: UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self))
                let mask = JSONScan.scanningMask(w)
                if mask != 0 {
                    i &+= mask.trailingZeroBitCount >> 3
                    break
                }
                i &+= 8
            }
            guard i < n else { return nil }
            let c = p[i]
            if c == UInt8(ascii: "\"") { return i }
            if c == UInt8(ascii: "\\") {
                hadEscape = true
                guard i + 1 < n else { return nil }
                switch p[i + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    i += 2
                case UInt8(ascii: "u"):
                    guard let unit = hex4(p, i + 2, n) else { return nil }
                    if unit >= 0xD800 && unit <= 0xDBFF {
                        guard i + 7 < n, p[i + 6] == UInt8(ascii: "\\"), p[i + 7] == UInt8(ascii: "u"),
                            let low = hex4(p, i + 8, n), low >= 0xDC00 && low <= 0xDFFF
                        else { return nil }
                        i += 12
                    } else if unit >= 0xDC00 && unit <= 0xDFFF {
                        return nil
                    } else {
                        i += 6
                    }
                default:
                    return nil
                }
                continue
            }
            if c < 0x20 { return nil }
            if c < 0x80 {
                i += 1
                continue
            }
            guard let length = utf8SequenceLength(p, i, n) else { return nil }
            i += length
        }
    }

    @inline(__always)
    static func hex4(_ p: UnsafePointer<UInt8>, _ i: Int, _ n: Int) -> UInt32? {
        guard i + 4 <= n else { return nil }
        var value: UInt32 = 0
        for k in 0..<4 {
            guard let d = hexDigit(p[i + k]) else { return nil }
            value = value << 4 | UInt32(d)
        }
        return value
    }

    @inline(__always)
    static func hexDigit(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c &- UInt8(ascii: "A") &+ 10
        default: return nil
        }
    }

    /// Length of the well-formed UTF-8 sequence starting with a non-ASCII byte at `i`
    /// (Unicode Table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF).
    @inline(__always)
    static func utf8SequenceLength(_ p: UnsafePointer<UInt8>, _ i: Int, _ n: Int) -> Int? {
        let b0 = p[i]
        @inline(__always) func cont(_ k: Int, _ lo: UInt8 = 0x80, _ hi: UInt8 = 0xBF) -> Bool {
            i + k < n && p[i + k] >= lo && p[i + k] <= hi
        }
        switch b0 {
        case 0xC2...0xDF: return cont(1) ? 2 : nil
        case 0xE0: return cont(1, 0xA0) && cont(2) ? 3 : nil
        case 0xE1...0xEC, 0xEE...0xEF: return cont(1) && cont(2) ? 3 : nil
        case 0xED: return cont(1, 0x80, 0x9F) && cont(2) ? 3 : nil
        case 0xF0: return cont(1, 0x90) && cont(2) && cont(3) ? 4 : nil
        case 0xF1...0xF3: return cont(1) && cont(2) && cont(3) ? 4 : nil
        case 0xF4: return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : nil
        default: return nil
        }
    }

    /// True when `bytes` is entirely well-formed UTF-8.
    public static func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let p = base.assumingMemoryBound(to: UInt8.self)
        var i = 0
        let n = bytes.count
        while i < n {
            if p[i] < 0x80 {
                i += 1
                continue
            }
            guard let length = utf8SequenceLength(p, i, n) else { return false }
            i += length
        }
        return true
    }
}
