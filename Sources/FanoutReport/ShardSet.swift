import FanoutMetrics

/// The shards of one run given to `fanout merge` (run, push or serve folders): each K of one N, once, and all N of
/// them; otherwise a `.shardSet` refusal (exit 5) naming the folder, or the shards missing.
public struct ShardSet {
    private var seen: [Int: String] = [:]
    /// N, from the first shard added (0 before).
    public private(set) var count = 0

    public init() {}

    /// `folder`'s shard: refused when its N is not the others' or its K was given already.
    public mutating func add(_ shard: Shard, folder: String) throws(ReportReadError) {
        if count == 0 { count = shard.count }
        guard shard.count == count else {
            throw ReportReadError(
                file: folder, "shard \(shard) is one of \(shard.count), the others of \(count)", refusal: .shardSet)
        }
        if let other = seen[shard.index] {
            throw ReportReadError(file: folder, "shard \(shard) is also in \(other)", refusal: .shardSet)
        }
        seen[shard.index] = folder
    }

    /// Refused when a K from 0 to N − 1 was not added.
    public func checkWhole() throws(ReportReadError) {
        let missing = (0..<count).filter { seen[$0] == nil }
        guard missing.isEmpty else {
            throw ReportReadError(
                file: "merge",
                "missing shard" + (missing.count > 1 ? "s " : " ")
                    + missing.map { "\($0)/\(count)" }.joined(separator: ", ") + " of \(count)", refusal: .shardSet)
        }
    }
}
