#if canImport(Glibc)
import Glibc
#endif

/// A request's regular headers in one byte buffer (names lowercase, as HTTP/2 sends them), in arrival order:
/// appending one costs no allocation once the buffer has grown, and looking one up is a scan with `memcmp`
/// (a request has a handful).
public struct HeaderList: Sendable {
    public private(set) var bytes: [UInt8] = []
    /// Per field: where its name starts, where its value starts, where its value ends.
    private var spans: [(name: Int32, value: Int32, end: Int32)] = []

    public init() {
        bytes.reserveCapacity(256)
        spans.reserveCapacity(12)
    }

    public init(_ pairs: [(String, String)]) {
        self.init()
        for (n, v) in pairs { append(name: Array(n.utf8), value: Array(v.utf8)) }
    }

    public init(_ pairs: [(name: [UInt8], value: [UInt8])]) {
        self.init()
        for p in pairs { append(name: p.name, value: p.value) }
    }

    public mutating func append(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let start = Int32(bytes.count)
        // Typed: appended by memcpy, not byte by byte.
        bytes.append(contentsOf: name.assumingMemoryBound(to: UInt8.self))
        let valueStart = Int32(bytes.count)
        bytes.append(contentsOf: value.assumingMemoryBound(to: UInt8.self))
        spans.append((start, valueStart, Int32(bytes.count)))
    }

    public mutating func append(name: [UInt8], value: [UInt8]) {
        name.withUnsafeBytes { n in value.withUnsafeBytes { v in append(name: n, value: v) } }
    }

    public var count: Int { spans.count }

    /// The buffer's start and every field's offsets, for handing the fields to nghttp2 without copying them.
    public func withFields<R>(_ body: (UnsafePointer<UInt8>?, [(name: Int32, value: Int32, end: Int32)]) -> R) -> R {
        bytes.withUnsafeBufferPointer { body($0.baseAddress, spans) }
    }

    /// Bytes the list's buffers hold (their capacity).
    public var storageBytes: Int { bytes.capacity + spans.capacity * MemoryLayout<(Int32, Int32, Int32)>.stride }

    /// Empties the list, keeping its capacity.
    public mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
    }

    public func name(_ i: Int) -> ArraySlice<UInt8> { bytes[Int(spans[i].name)..<Int(spans[i].value)] }
    public func value(_ i: Int) -> ArraySlice<UInt8> { bytes[Int(spans[i].value)..<Int(spans[i].end)] }

    /// The first value of the header `name` (lowercase).
    @inline(__always)
    public func value(_ name: StaticString) -> ArraySlice<UInt8>? {
        let n = name.utf8CodeUnitCount
        return bytes.withUnsafeBytes { buffer -> ArraySlice<UInt8>? in
            let key = name.utf8Start
            for s in spans where Int(s.value - s.name) == n {
                // Inline: the names are short, a call to memcmp costs more than the comparison.
                let field = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self) + Int(s.name)
                var i = n - 1
                while i >= 0 && field[i] == key[i] { i -= 1 }
                if i < 0 { return bytes[Int(s.value)..<Int(s.end)] }
            }
            return nil
        }
    }

    /// Whether some header name appears twice (pairwise: a request has a handful).
    public var hasDuplicates: Bool {
        bytes.withUnsafeBytes { buffer in
            for i in 1..<max(spans.count, 1) {
                let a = spans[i]
                let length = Int(a.value - a.name)
                for j in 0..<i {
                    let b = spans[j]
                    if Int(b.value - b.name) == length
                        && memcmp(buffer.baseAddress! + Int(a.name), buffer.baseAddress! + Int(b.name), length) == 0
                    {
                        return true
                    }
                }
            }
            return false
        }
    }
}
