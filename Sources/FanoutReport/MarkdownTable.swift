import FanoutMetrics

/// summary.md's tables of counts and of percentiles, one writer for run, serve and push folders.
public enum MarkdownTable {
    /// `| column | countColumn |` with a row per key, keys ascending, then a blank line; nothing when `counts` is
    /// empty.
    public static func counts<Key: Comparable & CustomStringConvertible>(
        _ column: String, _ countColumn: String, _ counts: [Key: Int]
    ) -> String {
        guard !counts.isEmpty else { return "" }
        var md = "| \(column) | \(countColumn) |\n|---|---:|\n"
        for (key, n) in counts.sorted(by: { $0.key < $1.key }) { md += "| \(key) | \(n) |\n" }
        return md + "\n"
    }

    /// `| column | count | p50 | p90 | p99 | p99.9 | max |` with a row per histogram, in the order given, each value
    /// written by `value` (nanoseconds to the table's unit); no blank line after, as the callers follow it with
    /// their own text.
    static func percentiles(
        _ column: String, _ rows: [(String, LatencyHistogram)], value: (UInt64) -> String
    ) -> String {
        var md = "| \(column) | count | p50 | p90 | p99 | p99.9 | max |\n|---|---:|---:|---:|---:|---:|---:|\n"
        for (name, h) in rows {
            let v = h.values(atPercentiles: [50, 90, 99, 99.9])
            md += "| \(name) | \(h.totalCount) | \(value(v[0])) | \(value(v[1])) | \(value(v[2])) | "
            md += "\(value(v[3])) | \(value(h.max)) |\n"
        }
        return md
    }
}
