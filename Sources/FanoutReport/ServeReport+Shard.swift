import FanoutMetrics

/// `fanout serve --shard K/N`: what its summary adds.
extension ServeReport {
    /// summary.json's `shard` ("K/N"), `shards` (N), `configHash`, and `requests.notThisShard` (token pushes to
    /// another shard's device); nothing without a shard.
    static func shardJSON(_ info: Info, _ s: ServeStats, into object: inout [String: Any]) {
        guard let shard = info.shard else { return }
        object["shard"] = shard.description
        object["shards"] = shard.count
        object["configHash"] = info.configHash ?? ""
        var requests = object["requests"] as? [String: Any] ?? [:]
        requests["notThisShard"] = s.notThisShard
        object["requests"] = requests
    }

    /// summary.md's line for a shard (empty without one).
    static func shardMarkdown(_ info: Info, _ s: ServeStats) -> String {
        guard let shard = info.shard else { return "" }
        return "Shard \(shard) of the devices: \(s.notThisShard) token pushes to another shard's device "
            + "(not this shard's; answered 400 BadDeviceToken).\n\n"
    }
}
