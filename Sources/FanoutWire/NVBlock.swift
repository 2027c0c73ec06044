import FanoutCore
internal import CNGHTTP2

/// Header name/value pairs for nghttp2 in memory of their own, stable until ``deallocate()``, flagged
/// NGHTTP2_NV_FLAG_NO_COPY_NAME / NO_COPY_VALUE: submitting them, nghttp2 neither copies nor lower-cases them
/// (callgrind: the copy and lower-casing of ten pairs cost ~1,000 instructions a request). A name with an
/// upper-case letter is not flagged: nghttp2 copies and lower-cases it, as HTTP/2 requires. The owner frees the
/// block once no stream can still send them: nghttp2 reads a request's pairs when it writes the stream's HEADERS,
/// and a stream's record holds what its pairs point into until the stream closes.
struct NVBlock {
    let pairs: UnsafeMutableBufferPointer<nghttp2_nv>
    private let bytes: UnsafeMutableRawBufferPointer

    /// `count` pairs of `total` bytes in all, each handed to `add` by `fill`, in order.
    private init(
        pairs count: Int, bytes total: Int,
        _ fill: (_ add: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) -> Void
    ) {
        let pairs = UnsafeMutableBufferPointer<nghttp2_nv>.allocate(capacity: count)
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, total), alignment: 1)
        var at = 0
        var k = 0
        fill { name, value in
            func place(_ text: UnsafeRawBufferPointer) -> UnsafeMutablePointer<UInt8> {
                let start = bytes.baseAddress! + at
                if let source = text.baseAddress { start.copyMemory(from: source, byteCount: text.count) }
                at += text.count
                return start.assumingMemoryBound(to: UInt8.self)
            }
            let lowercase = !name.contains { $0 >= 0x41 && $0 <= 0x5A }
            let flags = NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue | (lowercase ? NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue : 0)
            pairs[k] = nghttp2_nv(
                name: place(name), value: place(value), namelen: name.count, valuelen: value.count,
                flags: UInt8(flags))
            k += 1
        }
        precondition(k == count && at == total, "NVBlock: \(k) pairs of \(at) bytes for room for \(count) of \(total)")
        self.pairs = pairs
        self.bytes = bytes
    }

    /// The pairs, in order.
    init(_ fields: [(name: [UInt8], value: [UInt8])]) {
        self.init(pairs: fields.count, bytes: fields.reduce(0) { $0 + $1.name.count + $1.value.count }) { add in
            for f in fields { f.name.withUnsafeBytes { n in f.value.withUnsafeBytes { v in add(n, v) } } }
        }
    }

    /// `name: value` (e.g. `content-length`), then the fields of a header list, copied from its buffer.
    init(first name: StaticString, _ value: [UInt8], _ headers: HeaderList) {
        self = headers.withFields { base, spans in
            let listed = spans.last.map { Int($0.end) } ?? 0
            return NVBlock(pairs: spans.count + 1, bytes: name.utf8CodeUnitCount + value.count + listed) { add in
                value.withUnsafeBytes {
                    add(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), $0)
                }
                for s in spans {
                    add(
                        UnsafeRawBufferPointer(start: base! + Int(s.name), count: Int(s.value - s.name)),
                        UnsafeRawBufferPointer(start: base! + Int(s.value), count: Int(s.end - s.value)))
                }
            }
        }
    }

    func deallocate() {
        pairs.deallocate()
        bytes.deallocate()
    }
}
