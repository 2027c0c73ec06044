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

    /// The pairs, in order.
    init(_ fields: [(name: [UInt8], value: [UInt8])]) {
        pairs = .allocate(capacity: fields.count)
        bytes = .allocate(byteCount: max(1, fields.reduce(0) { $0 + $1.name.count + $1.value.count }), alignment: 1)
        var at = 0
        func place(_ text: [UInt8]) -> UnsafeMutablePointer<UInt8> {
            let start = bytes.baseAddress! + at
            text.withUnsafeBytes { if let source = $0.baseAddress { start.copyMemory(from: source, byteCount: $0.count) } }
            at += text.count
            return start.assumingMemoryBound(to: UInt8.self)
        }
        for (k, f) in fields.enumerated() {
            let lowercase = !f.name.contains { $0 >= 0x41 && $0 <= 0x5A }
            let flags = NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue | (lowercase ? NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue : 0)
            pairs[k] = nghttp2_nv(
                name: place(f.name), value: place(f.value), namelen: f.name.count, valuelen: f.value.count,
                flags: UInt8(flags))
        }
    }

    /// `first` (e.g. `content-length`), then the fields of a header list.
    init(first: [(name: [UInt8], value: [UInt8])], _ headers: HeaderList) {
        var fields = first
        headers.withFields { base, spans in
            for s in spans {
                fields.append((
                    Array(UnsafeBufferPointer(start: base! + Int(s.name), count: Int(s.value - s.name))),
                    Array(UnsafeBufferPointer(start: base! + Int(s.value), count: Int(s.end - s.value)))))
            }
        }
        self.init(fields)
    }

    func deallocate() {
        pairs.deallocate()
        bytes.deallocate()
    }
}
