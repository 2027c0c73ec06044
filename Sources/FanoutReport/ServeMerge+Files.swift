import FanoutCore
import FanoutMetrics
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The merged summary (the shards' summary.json added key by key, the identities checked again), its summary.md, and
/// the merged state.jsonl.
extension ServeMerge {
    /// Keys whose values are booleans (each an identity or a flag): the merged one holds when every shard's does,
    /// and the identities are computed again from the added counts.
    static func isFlag(_ key: String) -> Bool { key.contains("Hold") || key == "interrupted" }

    /// Adds two summary values: numbers summed, flags and-ed, objects key by key, lists (examples) joined up to
    /// `ServeStats.examplesPerFinding`, differing texts joined with a space (`listen`). A percentile object
    /// (`count`, `p50Nanos`, …, as `ServeReport.percentiles` writes it) whose histograms are not in latency.hlog
    /// (`faults.heldFor`, `faults.retries.delay`): counts added, the mean weighted by them, the max and each
    /// percentile the larger one (an upper bound: a mixture's percentile lies within its parts').
    static func add(_ a: Any, _ b: Any, key: String) -> Any {
        if isFlag(key), let x = a as? Bool, let y = b as? Bool { return x && y }
        if let x = a as? Int, let y = b as? Int { return x + y }
        if let x = a as? Double, let y = b as? Double { return x + y }
        if let x = a as? [String: Any], let y = b as? [String: Any], x["p50Nanos"] != nil {
            var out = x
            let (n, m) = (x["count"] as? Int ?? 0, y["count"] as? Int ?? 0)
            for (k, v) in y where k.hasSuffix("Nanos") { out[k] = max(x[k] as? Int ?? 0, v as? Int ?? 0) }
            out["count"] = n + m
            let sum = (x["meanNanos"] as? Int ?? 0) * n + (y["meanNanos"] as? Int ?? 0) * m
            out["meanNanos"] = n + m == 0 ? 0 : sum / (n + m)
            return out
        }
        if let x = a as? [String: Any], let y = b as? [String: Any] {
            var out = x
            for (k, v) in y { out[k] = out[k].map { add($0, v, key: k) } ?? v }
            return out
        }
        if let x = a as? [Any], let y = b as? [Any] {
            return Array((x + y).prefix(key == "examples" ? ServeStats.examplesPerFinding : .max))
        }
        if let x = a as? String, let y = b as? String {
            return x == y || x.split(separator: " ").contains(Substring(y)) ? x : x + " " + y
        }
        return a
    }

    static func mergedSummary(_ parts: [Part], n: Int) throws(ReportReadError) -> [String: Any] {
        var m = parts[0].summary
        // Identity fields are the first shard's (checked equal); times are the earliest start and the longest run.
        let kept = Set([
            "kind", "scenario", "seed", "configHash", "shards", "transport", "auth", "gitRevision", "state",
        ])
        for p in parts.dropFirst() {
            for (k, v) in p.summary where !kept.contains(k) && k != "startedAt" && k != "elapsedSeconds" {
                m[k] = m[k].map { add($0, v, key: k) } ?? v
            }
        }
        m["shard"] = nil
        m["shards"] = n
        m["mergedShards"] = parts.map(\.folder)
        m["startedAt"] = parts.compactMap { $0.summary["startedAt"] as? String }.min() ?? ""
        let elapsed = parts.compactMap { ($0.summary["elapsedSeconds"] as? NSNumber)?.doubleValue }.max() ?? 0
        m["elapsedSeconds"] = elapsed

        func int(_ object: [String: Any]?, _ key: String) -> Int { object?[key] as? Int ?? 0 }
        func total(_ object: Any?) -> Int { (object as? [String: Int])?.values.reduce(0, +) ?? 0 }
        var requests = m["requests"] as? [String: Any] ?? [:]
        let byStatus = requests["byStatus"] as? [String: Int] ?? [:]
        let answered = byStatus.values.reduce(0, +)
        let failed = byStatus.filter { (Int($0.key) ?? 0) >= 400 }.values.reduce(0, +)
        let requestsHold = int(requests, "total") == answered && total(requests["byReason"]) == failed
        requests["identitiesHold"] = requestsHold
        let connections = m["connections"] as? [String: Any]
        let wireHolds = int(connections, "responsesSubmitted") + int(connections, "answersDropped")
            == int(requests, "total")
        requests["wireIdentityHolds"] = wireHolds
        requests["ratePerSecond"] = elapsed > 0 ? (Double(int(requests, "total")) / elapsed * 10).rounded() / 10 : 0
        m["requests"] = requests
        var accounting = m["accounting"] as? [String: Any] ?? [:]
        let accountingHolds =
            int(accounting, "pushes")
                == total(accounting["rejected"]) + total(accounting["unroutable"]) + int(accounting, "routed")
            && int(accounting, "deliveries") == total(accounting["outcomes"])
        accounting["identitiesHold"] = accountingHolds
        m["accounting"] = accounting
        guard requestsHold, wireHolds, accountingHolds else {
            throw ReportReadError(
                file: "merge",
                "the added counts break an identity (requests \(requestsHold), wire \(wireHolds), accounting "
                    + "\(accountingHolds))")
        }
        return m
    }

    static func markdown(_ m: [String: Any], parts: [Part]) -> String {
        let requests = m["requests"] as? [String: Any] ?? [:]
        let accounting = m["accounting"] as? [String: Any] ?? [:]
        var md = "# fanout serve — \(m["scenario"] ?? ""), \(parts.count) shards merged\n\n"
        md += "Shards: " + parts.map { "\($0.shard) (`\($0.folder)`)" }.joined(separator: ", ") + "; seed "
        md += "\(m["seed"] ?? ""), started \(m["startedAt"] ?? ""), "
        md += "served \(m["elapsedSeconds"] ?? 0) s (the longest).\n\n"
        md += "Counts are the shards' added: a broadcast reached every shard, so it counts once per shard in the "
        md += "requests and in the service, validate, route and fanout samples, and once in the accounting (its "
        md += "verdict; its deliveries on each shard's own subscribers).\n\n"
        md += "## Requests\n\n| answer | count |\n|---|---:|\n"
        for (status, n) in (requests["byStatus"] as? [String: Int] ?? [:]).sorted(by: { $0.key < $1.key }) {
            md += "| \(status) | \(n) |\n"
        }
        md += "| **total** | **\(requests["total"] ?? 0)** |\n\n"
        for (reason, n) in (requests["byReason"] as? [String: Int] ?? [:]).sorted(by: { $0.key < $1.key }) {
            md += "- \(reason): \(n)\n"
        }
        md += "\nNot this shard's (token pushes sent to the wrong shard): \(requests["notThisShard"] ?? 0). "
        md += "Accepted: \(requests["acceptedPushes"] ?? 0) pushes, \(requests["acceptedBroadcasts"] ?? 0) broadcasts "
        md += "(once per shard). Identities: requests \(requests["identitiesHold"] ?? false), wire "
        md += "\(requests["wireIdentityHolds"] ?? false), accounting \(accounting["identitiesHold"] ?? false).\n\n"
        md += "## Devices\n\n\(accounting["pushes"] ?? 0) pushes, \(accounting["routed"] ?? 0) routed, "
        md += "\(accounting["deliveries"] ?? 0) deliveries; outcomes: "
        md += (accounting["outcomes"] as? [String: Int] ?? [:]).sorted(by: { $0.key < $1.key })
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ".\n\n"
        md += "## Latency (the shards' histograms added)\n\n| metric | count | p50 µs | p99 µs | max µs |\n"
        md += "|---|---:|---:|---:|---:|\n"
        let latency = m["latency"] as? [String: Any] ?? [:]
        for name in ServeMetric.allCases.map(\.name) {
            guard let p = latency[name] as? [String: Any] else { continue }
            func micros(_ key: String) -> String { String(format: "%.1f", Double(p[key] as? Int ?? 0) / 1000) }
            md += "| \(name) | \(p["count"] ?? 0) | \(micros("p50Nanos")) | \(micros("p99Nanos")) | "
            md += "\(micros("maxNanos")) |\n"
        }
        return md
    }

    /// state.jsonl of the shards merged into `path`: every line in the order serve writes them (activity lines,
    /// then device lines, each sorted as text; each shard's file is, and their devices are disjoint), then one
    /// totals line, the shards' added. Streamed; a temporary file renamed into place, nothing left on a failure.
    public static func writeState(_ parts: [Part], to path: String) throws {
        let files = try parts.map { p -> UnsafeMutablePointer<FILE> in
            let name = (p.folder as NSString).appendingPathComponent("state.jsonl")
            guard let f = fopen(name, "r") else { throw ReportReadError(file: name, "cannot open the file") }
            return f
        }
        defer { for f in files { fclose(f) } }
        var heads: [[UInt8]?] = []
        var buffer: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(buffer) }
        func next(_ k: Int) -> [UInt8]? {
            let n = getline(&buffer, &capacity, files[k])
            guard n > 0, let buffer else { return nil }
            return buffer.withMemoryRebound(to: UInt8.self, capacity: n) {
                Array(UnsafeBufferPointer(start: $0, count: n))
            }
        }
        for k in files.indices { heads.append(next(k)) }
        let out = try StreamedFile(path: path)
        var chunk: [UInt8] = []
        var totals: [String: Any]?
        let totalsPrefix = Array("{\"totals\": ".utf8)
        do {
            while true {
                var best = -1
                for k in heads.indices {
                    guard let line = heads[k] else { continue }
                    if best < 0 || line.lexicographicallyPrecedes(heads[best]!) { best = k }
                }
                guard best >= 0, let line = heads[best] else { break }
                heads[best] = next(best)
                if line.starts(with: totalsPrefix) {
                    guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
                        let t = object["totals"] as? [String: Any]
                    else { throw ReportReadError(file: parts[best].folder, "state.jsonl: an unreadable totals line") }
                    totals = totals.map { add($0, t, key: "totals") as! [String: Any] } ?? t
                    continue
                }
                chunk.append(contentsOf: line)
                if line.last != UInt8(ascii: "\n") { chunk.append(UInt8(ascii: "\n")) }
                if chunk.count >= StreamedFile.chunkBytes { try out.write(&chunk) }
            }
            if let totals { chunk.append(contentsOf: totalsLine(totals)) }
            try out.write(&chunk)
            try out.commit()
        } catch {
            out.discard()
            throw error
        }
    }

    /// The totals line as `StateDump` writes it (its keys in its order, the counts of each kind in the order of
    /// their cases, the zero ones left out).
    static func totalsLine(_ t: [String: Any]) -> [UInt8] {
        func counts(_ key: String, _ names: [String]) -> String {
            let values = t[key] as? [String: Int] ?? [:]
            return names.compactMap { name in values[name].flatMap { $0 > 0 ? "\"\(name)\": \($0)" : nil } }
                .joined(separator: ", ")
        }
        func int(_ key: String) -> Int { t[key] as? Int ?? 0 }
        var line = "{\"totals\": {\"pushes\": \(int("pushes")), "
        line += "\"rejected\": {\(counts("rejected", RejectReason.allCases.map(\.name)))}, "
        line += "\"unroutable\": {\(counts("unroutable", UnroutableReason.allCases.map(\.name)))}, "
        line += "\"routed\": \(int("routed")), \"deliveries\": \(int("deliveries")), "
        line += "\"outcomes\": {\(counts("outcomes", Outcome.allCases.map(\.name)))}, "
        line += "\"requests\": \(int("requests")), \"limitExceeded\": \(int("limitExceeded"))}}\n"
        return Array(line.utf8)
    }
}
