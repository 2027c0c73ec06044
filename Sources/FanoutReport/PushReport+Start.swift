import FanoutMetrics
import Foundation

/// The start of a push in its folder: `--start-at` or `--barrier` (summary.json's `startAt` and `barrier`, a
/// paragraph of summary.md), read back for `fanout merge`, and a merged folder's shard starts (their spread).
extension PushReport {
    /// A barrier that was not met (its peers did not all arrive in time): the run sent nothing.
    public static let barrierTimedOutExitCode: Int32 = 8

    static func nanos(_ v: Int64?) -> Any { v.map { Int($0) as Any } ?? NSNull() }

    /// summary.json's `startAt` (null: the run started as soon as it was ready, no --start-at nor --barrier).
    static func startJSON(_ r: PushResults) -> Any {
        guard r.requestedStartSeconds != nil || r.startRefused != nil || r.barrier != nil else { return NSNull() }
        var o: [String: Any] = [
            "requestedSeconds": r.requestedStartSeconds.map { $0 as Any } ?? NSNull(),
            "skewNanos": nanos(r.startSkewNanos), "refused": r.startRefused.map { $0 as Any } ?? NSNull(),
            "maxSkewNanos": nanos(r.maxStartSkewNanos), "startedUnixNanos": nanos(r.startedUnixNanos),
        ]
        if let s = r.shardStarts {
            o["shardStartedUnixNanos"] = s.startedUnixNanos.mapValues { Int($0) }
            o["spreadNanos"] = nanos(s.spreadNanos)
            o["notStarted"] = s.notStarted
            o["withinSkew"] = s.withinSkew.map { $0 as Any } ?? NSNull()
        }
        return o
    }

    /// summary.json's `barrier` (null without --barrier).
    static func barrierJSON(_ r: PushResults) -> Any {
        guard let b = r.barrier else { return NSNull() }
        return [
            "directory": b.directory, "shards": b.shards, "marginNanos": Int(b.marginNanos),
            "timeoutNanos": Int(b.timeoutNanos), "readyUnixNanos": b.readyUnixNanos.map { nanos($0) },
            "ownReadyUnixNanos": Int(b.ownReadyUnixNanos), "metUnixNanos": nanos(b.metUnixNanos),
            "startUnixNanos": nanos(b.startUnixNanos), "timedOut": b.timedOut.map { $0 as Any } ?? NSNull(),
        ] as [String: Any]
    }

    /// summary.json's `startAt` and `barrier` read back into `r` (absent from older folders: nothing set).
    static func readStart(_ root: [String: Any], into r: inout PushResults) {
        func int64(_ o: [String: Any], _ key: String) -> Int64? { (o[key] as? NSNumber).map { $0.int64Value } }
        if let start = root["startAt"] as? [String: Any] {
            r.requestedStartSeconds = (start["requestedSeconds"] as? NSNumber)?.doubleValue
            r.startSkewNanos = int64(start, "skewNanos")
            r.startRefused = start["refused"] as? String
            r.maxStartSkewNanos = int64(start, "maxSkewNanos")
            r.startedUnixNanos = int64(start, "startedUnixNanos")
        }
        if let b = root["barrier"] as? [String: Any], let directory = b["directory"] as? String,
            let shards = b["shards"] as? Int
        {
            var record = PushBarrierRecord(
                directory: directory, shards: shards, marginNanos: int64(b, "marginNanos") ?? 0,
                timeoutNanos: int64(b, "timeoutNanos") ?? 0, ownReadyUnixNanos: int64(b, "ownReadyUnixNanos") ?? 0)
            let ready = (b["readyUnixNanos"] as? [Any] ?? []).map { ($0 as? NSNumber)?.int64Value }
            if ready.count == shards { record.readyUnixNanos = ready }
            record.metUnixNanos = int64(b, "metUnixNanos")
            record.startUnixNanos = int64(b, "startUnixNanos")
            record.timedOut = b["timedOut"] as? String
            r.barrier = record
        }
    }

    /// summary.md's paragraph on the start: the requested or barrier-fixed t0 and the skew; for a merged folder each
    /// shard's start, their spread and whether it is within --max-start-skew.
    static func startMarkdown(_ r: PushResults) -> String {
        var md = ""
        func ms(_ v: Int64) -> String { String(format: "%.3f ms", Double(v) / 1e6) }
        if let b = r.barrier {
            md += "Barrier `\(b.directory)` (`--barrier`): \(b.shards) shards, "
            if let start = b.startUnixNanos {
                md += "met; start = latest ready instant + margin "
                md += String(format: "%g s", Double(b.marginNanos) / 1e9)
                md += " = " + String(format: "%.3f", Double(start) / 1e9) + " (UNIX seconds)"
                md += r.shards > 1 ? " (the first shard's barrier).\n\n" : ".\n\n"
                let ready = b.readyUnixNanos.enumerated().map { k, v in
                    "ready-\(k) " + (v.map { String(format: "%.3f", Double($0) / 1e9) } ?? "—")
                }
                md += "Ready instants: " + ready.joined(separator: ", ") + ".\n\n"
            } else {
                md += "**not met**: \(b.timedOut ?? "") (exit status \(barrierTimedOutExitCode)).\n\n"
            }
        }
        if let requested = r.requestedStartSeconds {
            let how = r.barrier == nil ? "`--start-at`" : "fixed by the barrier"
            md += "Start at \(String(format: "%.3f", requested)) (UNIX seconds, \(how)); start skew (actual t0 − "
            md += "requested) \(r.startSkewNanos.map(ms) ?? "unknown")"
            md += r.shards > 1 ? ", the largest of the shards'" : ""
            md += r.maxStartSkewNanos.map { "; --max-start-skew \(ms($0))" } ?? ""
            md += ".\n\n"
        }
        if let s = r.shardStarts, r.shards > 1 {
            md += "Shard starts (actual t0, UNIX seconds): "
            md += s.startedUnixNanos.sorted { $0.key < $1.key }.map {
                "\($0.key) " + String(format: "%.6f", Double($0.value) / 1e9)
            }.joined(separator: ", ")
            if !s.notStarted.isEmpty { md += "; not started: " + s.notStarted.joined(separator: ", ") }
            md += "; spread (latest − earliest) " + (s.spreadNanos.map(ms) ?? "none")
            if let within = s.withinSkew {
                md += within
                    ? ", every shard started within --max-start-skew"
                    : ", **not** every shard started within --max-start-skew"
            }
            md += ".\n\n"
        }
        return md
    }
}
