import FanoutMetrics

/// `fanout serve --shard K/N`: what its summary adds; and what a merge of the N shards' folders adds.
extension ServeReport {
    /// A shard `fanout merge` added, with its folder.
    public typealias MergedShard = (shard: Shard, folder: String)

    /// summary.json's `shard` ("K/N"), `shards` (N), `configHash`, and `requests.notThisShard` (token pushes to
    /// another shard's device); a merge's `shards`, `configHash`, `mergedShards` (the folders, in shard order) and
    /// `requests.notThisShard` (added); nothing for one unsharded serve.
    static func shardJSON(_ info: Info, _ s: ServeStats, merged: [MergedShard], into object: inout [String: Any]) {
        if let shard = info.shard {
            object["shard"] = shard.description
            object["shards"] = shard.count
        } else if !merged.isEmpty {
            object["shards"] = merged.count
            object["mergedShards"] = merged.map(\.folder)
        } else {
            return
        }
        object["configHash"] = info.configHash ?? ""
        var requests = object["requests"] as? [String: Any] ?? [:]
        requests["notThisShard"] = s.notThisShard
        object["requests"] = requests
    }

    /// summary.md's line for a shard, or for the shards merged (empty for one unsharded serve).
    static func shardMarkdown(_ info: Info, _ s: ServeStats, merged: [MergedShard]) -> String {
        if !merged.isEmpty {
            return "Shards: " + merged.map { "\($0.shard) (`\($0.folder)`)" }.joined(separator: ", ")
                + " merged: \(s.notThisShard) token pushes to another shard's device (not its shard's; answered 400 "
                + "BadDeviceToken). Counts are the shards' added: a broadcast reached every shard, so it counts once "
                + "per shard in the requests and in the service, validate, route and fanout samples, and once in the "
                + "accounting (its verdict; its deliveries on each shard's own subscribers). Served: the longest "
                + "shard's time; event loops and peaks: the shards' added.\n\n"
        }
        guard let shard = info.shard else { return "" }
        return "Shard \(shard) of the devices: \(s.notThisShard) token pushes to another shard's device "
            + "(not this shard's; answered 400 BadDeviceToken).\n\n"
    }
}
