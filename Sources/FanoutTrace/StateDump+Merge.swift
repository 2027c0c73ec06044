import FanoutCore

/// One dump of several pipelines (the workers of `fanout serve`, each with its own devices): every activity line
/// of them all sorted as text, then every device line sorted as text, then one totals line — written as it is
/// produced: each pipeline's ids are sorted once, its lines rendered a batch at a time, the batches merged line by
/// line (no line is held beyond its batch).
extension StateDump {
    /// Appends the merged dump to `out`, handing it to `flush` whenever it holds `chunkBytes` or more (as `write`).
    /// Lines are compared as text, as a sort of the lines would; each pipeline's lines come in that order already:
    /// its ids' byte order, unless an id holds a byte JSON escapes or one below `#` (then its escaped text's
    /// order). `totals` is the pipelines' accounting added up. Each pipeline renders `batchLines` lines at a time
    /// (its store read once per batch: each read copies its columns, a retain each).
    public static func writeMerged(
        _ pipelines: [Pipeline], totals: Accounting, nowMillis: Int64, to out: inout [UInt8], chunkBytes: Int,
        batchLines: Int = 1024, flush: (inout [UInt8]) throws -> Void
    ) rethrows {
        let plain = pipelines.allSatisfy { isPlain($0.store.activityIds) && isPlain($0.store.deviceIds) }
        var lines = 0
        lines += try mergeLines(pipelines, \.activityIds, plain: plain, batchLines, to: &out, chunkBytes, flush) {
            k, store, a, bytes in appendActivity(a, pipelines[k], store, nowMillis: nowMillis, to: &bytes)
        }
        lines += try mergeLines(pipelines, \.deviceIds, plain: plain, batchLines, to: &out, chunkBytes, flush) {
            _, store, d, bytes in appendDevice(d, store, nowMillis: nowMillis, to: &bytes)
        }
        // No line at all: the lines joined by newlines and ended by one are a lone newline.
        if lines == 0 { out.append(UInt8(ascii: "\n")) }
        appendTotals(totals, to: &out)
    }

    /// Merges the lines of the ids (`ids` of each pipeline's store, each pipeline's in line order) into `out`,
    /// smallest line first (on equal lines, the lower pipeline); `render(k, store, id, &bytes)` appends the line of
    /// pipeline `k`'s `id` to `bytes` (its store read once per batch). Returns the number of lines.
    private static func mergeLines(
        _ pipelines: [Pipeline], _ ids: KeyPath<ActivityStore, ByteInterner>, plain: Bool, _ batchLines: Int,
        to out: inout [UInt8], _ chunkBytes: Int, _ flush: (inout [UInt8]) throws -> Void,
        render: (Int, ActivityStore, Int32, inout [UInt8]) -> Void
    ) rethrows -> Int {
        let orders = pipelines.map { lineOrder($0.store[keyPath: ids], plain: plain) }
        let n = orders.count
        var bytes = [[UInt8]](repeating: [], count: n)
        var ends = [[Int]](repeating: [], count: n)
        var next = [Int](repeating: 0, count: n)  // the next line of the batch
        var taken = [Int](repeating: 0, count: n)  // ids rendered so far
        func refill(_ k: Int) {
            bytes[k].removeAll(keepingCapacity: true)
            ends[k].removeAll(keepingCapacity: true)
            next[k] = 0
            let upper = min(taken[k] + batchLines, orders[k].count)
            let store = pipelines[k].store
            for id in orders[k][taken[k]..<upper] {
                render(k, store, id, &bytes[k])
                ends[k].append(bytes[k].count)
            }
            taken[k] = upper
        }
        for k in 0..<n { refill(k) }
        var count = 0
        while true {
            // The smallest head (the pipelines are few: a scan).
            var best = -1
            var bestStart = 0
            for k in 0..<n where next[k] < ends[k].count {
                let start = next[k] == 0 ? 0 : ends[k][next[k] - 1]
                if best >= 0 {
                    let end = ends[k][next[k]]
                    let bestEnd = ends[best][next[best]]
                    let smaller = bytes[k].withUnsafeBytes { x in
                        bytes[best].withUnsafeBytes { y in
                            compareBytes(
                                UnsafeRawBufferPointer(rebasing: x[start..<end]),
                                UnsafeRawBufferPointer(rebasing: y[bestStart..<bestEnd])) < 0
                        }
                    }
                    if !smaller { continue }
                }
                best = k
                bestStart = start
            }
            guard best >= 0 else { return count }
            out.append(contentsOf: bytes[best][bestStart..<ends[best][next[best]]])
            next[best] += 1
            count += 1
            if next[best] == ends[best].count && taken[best] < orders[best].count { refill(best) }
            if out.count >= chunkBytes { try flush(&out) }
        }
    }

    /// The ids in the order of their lines' text.
    private static func lineOrder(_ ids: ByteInterner, plain: Bool) -> [Int32] {
        if plain { return sortedIds(ids) }
        var scratch = ([UInt8](), [UInt8]())
        return (0..<Int32(ids.count)).sorted { x, y in
            ids.withBytes(x) { a in
                ids.withBytes(y) { b in
                    scratch.0.removeAll(keepingCapacity: true)
                    scratch.1.removeAll(keepingCapacity: true)
                    JSONWriter.appendString(a, to: &scratch.0, escaping: .pythonStyle)
                    JSONWriter.appendString(b, to: &scratch.1, escaping: .pythonStyle)
                    return scratch.0.lexicographicallyPrecedes(scratch.1)
                }
            }
        }
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
