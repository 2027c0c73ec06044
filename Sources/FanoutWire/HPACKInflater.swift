internal import CNGHTTP2

/// Decodes HPACK header blocks (one decoder per direction of a connection, its dynamic table kept from block to
/// block): what a peer would read from HEADERS frames. For tests of what the server sends; not on any hot path.
final class HPACKInflater {
    private var inflater: OpaquePointer?

    init() {
        precondition(nghttp2_hd_inflate_new(&inflater) == 0, "nghttp2_hd_inflate_new failed")
    }

    deinit { nghttp2_hd_inflate_del(inflater) }

    /// The fields of one whole header block, in order; nil if it does not decode.
    func decode(_ block: [UInt8]) -> [(name: String, value: String)]? {
        var fields: [(name: String, value: String)] = []
        var at = 0
        while true {
            var nv = nghttp2_nv()
            var flags: Int32 = 0
            let n = block.withUnsafeBufferPointer { b in
                nghttp2_hd_inflate_hd2(inflater, &nv, &flags, b.baseAddress! + at, b.count - at, 1)
            }
            if n < 0 { return nil }
            at += n
            if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                fields.append((
                    String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self),
                    String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self)))
            }
            if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                nghttp2_hd_inflate_end_headers(inflater)
                return fields
            }
            if n == 0 && at >= block.count { return nil }
        }
    }
}
