/// summary.md's tables of counts, one writer for run, serve and push folders.
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
}
