import FanoutCore

/// One dump of several pipelines (the workers of `fanout serve`, each with its own devices): every activity line
/// of them all sorted as text, then every device line sorted as text, then one totals line — written as it is
/// produced (no line is held: each pipeline's ids are sorted once, then merged).
extension StateDump {
    /// Appends the merged dump to `out`, handing it to `flush` whenever it holds `chunkBytes` or more (as `write`).
    /// Lines sort by their text, which is their escaped id then `"`: the ids' own byte order unless an id holds a
    /// byte JSON escapes or one below `#` (then each comparison escapes both ids). `totals` is the pipelines'
    /// accounting added up.
    public static func writeMerged(
        _ pipelines: [Pipeline], totals: Accounting, nowMillis: Int64, to out: inout [UInt8], chunkBytes: Int,
        flush: (inout [UInt8]) throws -> Void
    ) rethrows {
        let plain = pipelines.allSatisfy { isPlain($0.store.activityIds) && isPlain($0.store.deviceIds) }
        var lines = 0
        var ordered = pipelines.map { lineOrder($0.store.activityIds, plain: plain) }
        lines += try merge(pipelines, ordered, \.store.activityIds, plain: plain) { k, a in
            appendActivity(a, pipelines[k], nowMillis: nowMillis, to: &out)
            if out.count >= chunkBytes { try flush(&out) }
        }
        ordered = pipelines.map { lineOrder($0.store.deviceIds, plain: plain) }
        lines += try merge(pipelines, ordered, \.store.deviceIds, plain: plain) { k, d in
            appendDevice(d, pipelines[k], nowMillis: nowMillis, to: &out)
            if out.count >= chunkBytes { try flush(&out) }
        }
        // No line at all: the lines joined by newlines and ended by one are a lone newline.
        if lines == 0 { out.append(UInt8(ascii: "\n")) }
        appendTotals(totals, to: &out)
    }

    /// Calls `body(k, id)` for every id of every pipeline, in line order; returns how many.
    private static func merge(
        _ pipelines: [Pipeline], _ ordered: [[Int32]], _ ids: KeyPath<Pipeline, ByteInterner>, plain: Bool,
        _ body: (Int, Int32) throws -> Void
    ) rethrows -> Int {
        var next = [Int](repeating: 0, count: pipelines.count)
        var scratch = ([UInt8](), [UInt8]())
        var count = 0
        while true {
            // The smallest head (the pipelines are few: a scan; on equal lines the lower pipeline goes first).
            var best = -1
            for k in 0..<pipelines.count where next[k] < ordered[k].count {
                if best < 0 {
                    best = k
                    continue
                }
                let a = pipelines[k][keyPath: ids]
                let b = pipelines[best][keyPath: ids]
                let smaller = a.withBytes(ordered[k][next[k]]) { x in
                    b.withBytes(ordered[best][next[best]]) { y in lineLess(x, y, plain: plain, &scratch) }
                }
                if smaller { best = k }
            }
            guard best >= 0 else { return count }
            try body(best, ordered[best][next[best]])
            next[best] += 1
            count += 1
        }
    }

    /// The ids in the order of their lines' text.
    private static func lineOrder(_ ids: ByteInterner, plain: Bool) -> [Int32] {
        if plain { return sortedIds(ids) }
        var scratch = ([UInt8](), [UInt8]())
        return (0..<Int32(ids.count)).sorted { x, y in
            ids.withBytes(x) { a in ids.withBytes(y) { b in lineLess(a, b, plain: false, &scratch) } }
        }
    }

    /// Whether a line naming id `a` sorts before one naming `b` (the rest of two lines never decides: ids are
    /// unique across the pipelines).
    private static func lineLess(
        _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, plain: Bool, _ scratch: inout ([UInt8], [UInt8])
    ) -> Bool {
        if plain { return compareBytes(a, b) < 0 }
        scratch.0.removeAll(keepingCapacity: true)
        scratch.1.removeAll(keepingCapacity: true)
        JSONWriter.appendString(a, to: &scratch.0, escaping: .pythonStyle)
        JSONWriter.appendString(b, to: &scratch.1, escaping: .pythonStyle)
        return scratch.0.lexicographicallyPrecedes(scratch.1)
    }

    /// No id holds a byte the dump escapes (`"`, `\`, controls) or one that sorts below the closing `"`: the ids'
    /// byte order is their lines' order.
    static func isPlain(_ ids: ByteInterner) -> Bool {
        for id in 0..<Int32(ids.count) {
            let plain = ids.withBytes(id) { bytes in
                bytes.allSatisfy { $0 > UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
            }
            if !plain { return false }
        }
        return true
    }
}
