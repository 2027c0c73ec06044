import FanoutCore

/// The state dump of TRACE.md: activity lines sorted by id, device lines sorted by id, one totals
/// line. Written byte for byte as the format fixes it (key order, `", "` and `": "` separators,
/// floats for relevance, UTF-8 with escapes only where JSON requires them), so that tools outside
/// this repository can diff dumps.
public enum StateDump {
    public static func render(_ pipeline: Pipeline, nowMillis: Int64) -> [UInt8] {
        var out: [UInt8] = []
        write(pipeline, nowMillis: nowMillis, to: &out, chunkBytes: .max) { _ in }
        return out
    }

    /// The dump of one pipeline, appended to `out` line by line; whenever `out` holds `chunkBytes` or more it is
    /// handed to `flush` (which writes and empties it), so a dump of any size is written in bounded memory. What
    /// is left in `out` at the end is the caller's to write.
    public static func write(
        _ pipeline: Pipeline, nowMillis: Int64, to out: inout [UInt8], chunkBytes: Int,
        flush: (inout [UInt8]) throws -> Void
    ) rethrows {
        // Read once (each read of `pipeline.store` is a copy of its columns: a retain and a release each).
        let store = pipeline.store
        for a in sortedIds(store.activityIds) {
            appendActivity(a, pipeline, store, nowMillis: nowMillis, to: &out)
            if out.count >= chunkBytes { try flush(&out) }
        }
        for d in sortedIds(store.deviceIds) {
            appendDevice(d, store, nowMillis: nowMillis, to: &out)
            if out.count >= chunkBytes { try flush(&out) }
        }
        appendTotals(pipeline.accounting, to: &out)
    }

    static func appendDevice(_ d: Int32, _ store: ActivityStore, nowMillis: Int64, to out: inout [UInt8]) {
        JSONWriter.append("{\"device\": ", to: &out)
        appendId(store.deviceIds, d, to: &out)
        JSONWriter.append(", \"lockScreen\": ", to: &out)
        appendIdList(store.lockScreen(device: d, nowMillis: nowMillis), store.activityIds, to: &out)
        JSONWriter.append(", \"island\": ", to: &out)
        appendIdList(store.island(device: d, nowMillis: nowMillis), store.activityIds, to: &out)
        JSONWriter.append("}\n", to: &out)
    }

    static func appendActivity(
        _ a: Int32, _ pipeline: Pipeline, _ store: ActivityStore, nowMillis: Int64, to out: inout [UInt8]
    ) {
        let i = Int(a)
        JSONWriter.append("{\"activity\": ", to: &out)
        appendId(store.activityIds, a, to: &out)
        JSONWriter.append(", \"device\": ", to: &out)
        appendId(store.deviceIds, store.device[i], to: &out)
        JSONWriter.append(", \"app\": ", to: &out)
        appendId(store.appIds, store.app[i], to: &out)
        JSONWriter.append(", \"state\": \"", to: &out)
        out.append(contentsOf: store.state(a, nowMillis: nowMillis).name.utf8)
        JSONWriter.append("\", \"timestamp\": ", to: &out)
        if store.hasTimestamp[i] {
            JSONWriter.appendInt(store.timestamp[i], to: &out)
        } else {
            JSONWriter.append("null", to: &out)
        }
        JSONWriter.append(", \"content\": ", to: &out)
        let schema = store.schema[i]
        store.withContent(a) { pipeline.schemas[schema].appendJSON(record: $0, style: .python, to: &out) }
        JSONWriter.append(", \"staleDate\": ", to: &out)
        appendDate(store.staleDateSeconds(a), to: &out)
        JSONWriter.append(", \"relevance\": ", to: &out)
        JSONWriter.appendPythonFloat(store.relevance[i], to: &out)
        JSONWriter.append(", \"outcomes\": {", to: &out)
        var first = true
        for outcome in outcomes {
            let count = store.outcomeCount(outcome, for: a)
            if count == 0 { continue }
            appendCount(outcome.name, count, first: &first, to: &out)
        }
        JSONWriter.append("}}\n", to: &out)
    }

    /// Read once (`allCases` builds its array at each call).
    private static let outcomes = Outcome.allCases

    /// The totals line alone (several pipelines' dumps merged: their lines sorted, one totals line).
    public static func totalsLine(_ totals: Accounting) -> [UInt8] {
        var out: [UInt8] = []
        appendTotals(totals, to: &out)
        return out
    }

    static func appendTotals(_ totals: Accounting, to out: inout [UInt8]) {
        appendInt("{\"totals\": {\"pushes\": ", totals.pushes, to: &out)
        JSONWriter.append(", \"rejected\": {", to: &out)
        appendCounts(RejectReason.allCases.map { ($0.name, totals[$0]) }, to: &out)
        JSONWriter.append("}, \"unroutable\": {", to: &out)
        appendCounts(UnroutableReason.allCases.map { ($0.name, totals[$0]) }, to: &out)
        appendInt("}, \"routed\": ", totals.routed, to: &out)
        appendInt(", \"deliveries\": ", totals.deliveries, to: &out)
        JSONWriter.append(", \"outcomes\": {", to: &out)
        appendCounts(Outcome.allCases.map { ($0.name, totals[$0]) }, to: &out)
        appendInt("}, \"requests\": ", totals.requests, to: &out)
        appendInt(", \"limitExceeded\": ", totals.requestsLimitExceeded, to: &out)
        JSONWriter.append("}}\n", to: &out)
    }

    private static func appendInt(_ before: StaticString, _ value: Int, to out: inout [UInt8]) {
        JSONWriter.append(before, to: &out)
        JSONWriter.appendInt(Int64(value), to: &out)
    }

    /// The counts above 0 as an object's members, `"name": count`, comma-separated.
    private static func appendCounts(_ counts: [(name: String, count: Int)], to out: inout [UInt8]) {
        var first = true
        for (name, count) in counts where count > 0 { appendCount(name, count, first: &first, to: &out) }
    }

    private static func appendCount(_ name: String, _ count: Int, first: inout Bool, to out: inout [UInt8]) {
        if !first { JSONWriter.append(", ", to: &out) }
        first = false
        JSONWriter.appendString(name, to: &out)
        JSONWriter.append(": ", to: &out)
        JSONWriter.appendInt(Int64(count), to: &out)
    }

    /// An integral date as an integer, a non-integral one as a Python float, none as null.
    private static func appendDate(_ date: Double?, to out: inout [UInt8]) {
        guard let seconds = date else {
            JSONWriter.append("null", to: &out)
            return
        }
        if seconds == seconds.rounded(.towardZero) && abs(seconds) < 9.2e18 {
            JSONWriter.appendInt(Int64(seconds), to: &out)
        } else {
            JSONWriter.appendPythonFloat(seconds, to: &out)
        }
    }

    private static func appendId(_ ids: ByteInterner, _ id: Int32, to out: inout [UInt8]) {
        ids.withBytes(id) { JSONWriter.appendString($0, to: &out, escaping: .pythonStyle) }
    }

    private static func appendIdList(_ list: [Int32], _ ids: ByteInterner, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        for (k, a) in list.enumerated() {
            if k > 0 { JSONWriter.append(", ", to: &out) }
            appendId(ids, a, to: &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    /// Ids sorted by their UTF-8 bytes, i.e. by Unicode code point.
    static func sortedIds(_ ids: ByteInterner) -> [Int32] {
        (0..<Int32(ids.count)).sorted { x, y in
            ids.withBytes(x) { a in ids.withBytes(y) { b in compareBytes(a, b) < 0 } }
        }
    }
}
