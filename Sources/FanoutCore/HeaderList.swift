#if canImport(Glibc)
import Glibc
#endif

/// A request's regular headers in one byte buffer (names lowercase, as HTTP/2 sends them), in arrival order:
/// appending one costs no allocation once the buffer has grown, and looking one up is a scan with `memcmp`
/// (a request has a handful).
///
/// The buffers are kept at their full length and only their first `used` bytes and `count` spans are the list:
/// appending is a `memcpy` into room already there, and emptying the list is resetting two counts (an array's
/// generic `append(contentsOf:)` and `removeAll(keepingCapacity:)` cost ~100 instructions per call, several per
/// request). The arrays stay copy-on-write: a copy of the list is not changed by appending to the original.
public struct HeaderList: Sendable {
    /// The fields' bytes, then room (zeros, or bytes of fields removed).
    @usableFromInline var storage: [UInt8]
    @usableFromInline var used = 0
    /// Per field: where its name starts, where its value starts, where its value ends; the first `count` are
    /// the list's.
    @usableFromInline var spans: [(name: Int32, value: Int32, end: Int32)]
    /// How many fields the list holds. Stored under another name so that the inlinable `append` can set it (a
    /// `public internal(set)` property's setter is not usable from inlinable code).
    public var count: Int { fieldCount }
    @usableFromInline var fieldCount = 0

    @usableFromInline static let noSpan: (name: Int32, value: Int32, end: Int32) = (0, 0, 0)

    public init() {
        storage = Array(repeating: 0, count: 256)
        spans = Array(repeating: Self.noSpan, count: 12)
    }

    public init(_ pairs: [(String, String)]) {
        self.init()
        for (n, v) in pairs { append(name: Array(n.utf8), value: Array(v.utf8)) }
    }

    public init(_ pairs: [(name: [UInt8], value: [UInt8])]) {
        self.init()
        for p in pairs { append(name: p.name, value: p.value) }
    }

    /// The fields' bytes (names and values, back to back).
    public var bytes: ArraySlice<UInt8> { storage[..<used] }

    /// Inlinable and always inlined: into the server's header callback (a call across the module cost ~400
    /// instructions a request, 4 calls); growing stays out of line.
    @inlinable @inline(__always)
    public mutating func append(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let start = used
        let valueStart = start + name.count
        let end = valueStart + value.count
        if _slowPath(end > storage.count) { grow(bytes: end) }
        if _slowPath(fieldCount == spans.count) { growSpans() }
        storage.withUnsafeMutableBytes { b in
            if name.count > 0 { memcpy(b.baseAddress! + start, name.baseAddress!, name.count) }
            if value.count > 0 { memcpy(b.baseAddress! + valueStart, value.baseAddress!, value.count) }
        }
        spans[fieldCount] = (Int32(start), Int32(valueStart), Int32(end))
        used = end
        fieldCount += 1
    }

    /// Room for at least `bytes` bytes (at least doubled, as an array grows).
    @usableFromInline @inline(never)
    mutating func grow(bytes: Int) {
        storage.append(contentsOf: repeatElement(0, count: max(bytes, 2 * storage.count) - storage.count))
    }

    /// Room for as many spans again (at least 4).
    @usableFromInline @inline(never)
    mutating func growSpans() {
        spans.append(contentsOf: repeatElement(Self.noSpan, count: max(fieldCount, 4)))
    }

    public mutating func append(name: [UInt8], value: [UInt8]) {
        name.withUnsafeBytes { n in value.withUnsafeBytes { v in append(name: n, value: v) } }
    }

    /// The buffer's start and every field's offsets, for handing the fields to nghttp2 without copying them.
    /// Inlinable: specialized where it is called (generic across the module, it cost ~300 instructions a request).
    @inlinable
    public func withFields<R>(
        _ body: (UnsafePointer<UInt8>?, UnsafeBufferPointer<(name: Int32, value: Int32, end: Int32)>) -> R
    ) -> R {
        storage.withUnsafeBufferPointer { b in
            spans.withUnsafeBufferPointer { s in body(b.baseAddress, UnsafeBufferPointer(rebasing: s[..<count])) }
        }
    }

    /// Bytes the list's buffers hold (their capacity).
    public var storageBytes: Int { storage.capacity + spans.capacity * MemoryLayout<(Int32, Int32, Int32)>.stride }

    /// Empties the list, keeping its capacity.
    public mutating func removeAll() {
        used = 0
        fieldCount = 0
    }

    /// Inlinable (as `value(_:)`): a call across the module cost ~35 instructions a look-up, two a request.
    @inlinable
    public func name(_ i: Int) -> ArraySlice<UInt8> {
        precondition(i >= 0 && i < count, "HeaderList: field index out of range")
        return storage[Int(spans[i].name)..<Int(spans[i].value)]
    }

    @inlinable
    public func value(_ i: Int) -> ArraySlice<UInt8> {
        precondition(i >= 0 && i < count, "HeaderList: field index out of range")
        return storage[Int(spans[i].value)..<Int(spans[i].end)]
    }

    /// The first value of the header `name` (lowercase).
    @inline(__always)
    public func value(_ name: StaticString) -> ArraySlice<UInt8>? {
        let n = name.utf8CodeUnitCount
        return withFields { base, spans -> ArraySlice<UInt8>? in
            let key = name.utf8Start
            for s in spans where Int(s.value - s.name) == n {
                // Inline: the names are short, a call to memcmp costs more than the comparison.
                let field = base! + Int(s.name)
                var i = n - 1
                while i >= 0 && field[i] == key[i] { i -= 1 }
                if i < 0 { return storage[Int(s.value)..<Int(s.end)] }
            }
            return nil
        }
    }

    /// Whether some header name appears twice (pairwise: a request has a handful).
    public var hasDuplicates: Bool {
        withFields { base, spans in
            for i in 1..<max(spans.count, 1) {
                let a = spans[i]
                let length = Int(a.value - a.name)
                for j in 0..<i {
                    let b = spans[j]
                    if Int(b.value - b.name) == length
                        && memcmp(base! + Int(a.name), base! + Int(b.name), length) == 0
                    {
                        return true
                    }
                }
            }
            return false
        }
    }
}
