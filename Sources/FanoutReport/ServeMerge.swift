import FanoutHistogramLog
import FanoutMetrics
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `fanout merge` of the folders of `fanout serve --shard K/N`: all N shards of one serve run (same scenario, seed,
/// configuration hash and N). summary.json's counts are added (requests by status and reason, the devices'
/// accounting, connections, findings, faults) and the identities checked again; the latency histograms are added
/// second by second from each shard's latency.hlog (checked against its summary's counts), never percentiles
/// averaged; state.jsonl is the shards' lines merged in the order serve writes them (activity lines, then device
/// lines, each sorted as text) with one totals line, their sum.
///
/// What a sum means here: a token push reached one shard, so its counts add up to an unsharded serve's; a broadcast
/// reached every shard (`fanout push` sends it to each), so `requests`, `acceptedBroadcasts` and the `service`,
/// `validate`, `route` and `fanout` samples count it once per shard, while the accounting counts its verdict once (one
/// shard counts it, `Shard.countsChannel`) and its deliveries on every shard (each its own subscribers).
public enum ServeMerge {
    /// One shard's folder read back.
    public struct Part {
        public var folder: String
        public var summary: [String: Any]
        public var shard: Shard
        /// Per tag, each interval (its second: the start rounded) with its histogram.
        var intervals: [String: [(second: Int, start: Double, length: Double, histogram: LatencyHistogram)]] = [:]
        var startTimeSeconds = 0.0
        public internal(set) var hasState = false
    }

    /// Whether `folder` holds the summary.json of `fanout serve`.
    public static func isServe(_ folder: String) -> Bool {
        (try? summary(folder))?["kind"] as? String == "serve"
    }

    static func summary(_ folder: String) throws(ReportReadError) -> [String: Any] {
        let file = (folder as NSString).appendingPathComponent("summary.json")
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ReportReadError(file: file, "cannot read the file (a serve folder holds summary.json)")
        }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw ReportReadError(file: file, "not a JSON object")
        }
        return root
    }

    public static func read(_ folder: String) throws(ReportReadError) -> Part {
        let file = (folder as NSString).appendingPathComponent("summary.json")
        let root = try summary(folder)
        guard root["kind"] as? String == "serve" else {
            throw ReportReadError(file: file, "not the summary of a fanout serve run (field kind)")
        }
        guard let text = root["shard"] as? String, let shard = try? Shard(parsing: text) else {
            throw ReportReadError(
                file: folder, "not a shard (run it with fanout serve --shard K/N)", refusal: .shardSet)
        }
        var part = Part(folder: folder, summary: root, shard: shard)
        let log = (folder as NSString).appendingPathComponent("latency.hlog")
        guard let logText = try? String(contentsOfFile: log, encoding: .utf8) else {
            throw ReportReadError(file: log, "cannot read the file (a serve folder holds latency.hlog)")
        }
        let intervals: [HistogramLogReader.Interval]
        do {
            intervals = try HistogramLogReader.read(logText)
        } catch {
            throw ReportReadError(file: log, "\(error)")
        }
        for line in logText.split(separator: "\n", maxSplits: 8) where line.hasPrefix("#[StartTime: ") {
            let value = line.dropFirst("#[StartTime: ".count).prefix { $0 != " " && $0 != "]" }
            part.startTimeSeconds = Double(value) ?? 0
        }
        var totals: [String: UInt64] = [:]
        for interval in intervals {
            let c = interval.counts
            guard let tag = interval.tag, c.lowestDiscernibleValue == HdrLayout.lowestDiscernibleValue,
                c.significantDigits == HdrLayout.significantDigits, c.first + c.counts.count <= HdrLayout.countsLength
            else {
                throw ReportReadError(
                    file: log, "an interval without a tag or of another histogram layout than fanout's")
            }
            let h = c.counts.withUnsafeBufferPointer { LatencyHistogram(first: c.first, counts: $0) }
            totals[tag, default: 0] += h.totalCount
            part.intervals[tag, default: []].append(
                (Int(interval.startSeconds.rounded()), interval.startSeconds, interval.lengthSeconds, h))
        }
        let latency = root["latency"] as? [String: Any] ?? [:]
        for (tag, object) in latency {
            let counted = (object as? [String: Any])?["count"] as? Int ?? -1
            guard counted == Int(totals[tag] ?? 0) else {
                throw ReportReadError(
                    file: log, "its \(tag) intervals hold \(totals[tag] ?? 0) samples, summary.json counts \(counted)")
            }
        }
        let state = (folder as NSString).appendingPathComponent("state.jsonl")
        part.hasState = FileManager.default.fileExists(atPath: state)
        return part
    }

    /// The whole run's files (summary.json, summary.md, latency.hlog, one .hgrm per metric), or the set refused:
    /// `.shardSet` (a shard missing or repeated, N differs), `.notOneRun` (scenario, seed or configuration differ).
    public static func merge(_ parts: [Part]) throws(ReportReadError) -> [String: String] {
        guard let first = parts.first else { throw ReportReadError(file: "merge", "no serve folders") }
        let n = first.shard.count
        var shards = ShardSet()
        for p in parts {
            for key in ["scenario", "seed", "configHash", "state"] {
                let a = "\(first.summary[key] ?? "(none)")"
                let b = "\(p.summary[key] ?? "(none)")"
                guard a == b else {
                    throw ReportReadError(
                        file: p.folder, "\(key) \(b) differs from \(first.folder)'s \(a): not shards of one serve run",
                        refusal: .notOneRun)
                }
            }
            try shards.add(p.shard, folder: p.folder)
        }
        try shards.checkWhole()
        if parts.contains(where: { $0.hasState }) && !parts.allSatisfy({ $0.hasState }) {
            let without = parts.first { !$0.hasState }!.folder
            throw ReportReadError(file: without, "no state.jsonl, and other shards have one")
        }
        let ordered = parts.sorted { $0.shard.index < $1.shard.index }

        // Histograms: second k of every shard added, per tag.
        var merged: [String: [Int: (start: Double, length: Double, histogram: LatencyHistogram)]] = [:]
        var totals: [String: LatencyHistogram] = [:]
        for p in ordered {
            for (tag, list) in p.intervals {
                for i in list {
                    totals[tag, default: LatencyHistogram()].add(i.histogram)
                    if var m = merged[tag]?[i.second] {
                        m.start = min(m.start, i.start)
                        m.length = max(m.length, i.length)
                        m.histogram.add(i.histogram)
                        merged[tag]![i.second] = m
                    } else {
                        merged[tag, default: [:]][i.second] = (i.start, i.length, i.histogram)
                    }
                }
            }
        }
        var writer = HistogramLogWriter(startTimeSeconds: ordered.map(\.startTimeSeconds).min() ?? 0)
        let seconds = Set(merged.values.flatMap(\.keys)).sorted()
        let tagOrder = ServeMetric.allCases.map(\.name)
        let tags = merged.keys.sorted {
            (tagOrder.firstIndex(of: $0) ?? 99, $0) < (tagOrder.firstIndex(of: $1) ?? 99, $1)
        }
        for second in seconds {
            for tag in tags {
                guard let m = merged[tag]?[second] else { continue }
                writer.append(
                    tag: tag, startSeconds: m.start, lengthSeconds: m.length,
                    compressed: m.histogram.encodedCompressed(), maxValue: m.histogram.max)
            }
        }

        var summary = try mergedSummary(ordered, n: n)
        var latency: [String: Any] = [:]
        var files: [String: String] = ["latency.hlog": writer.text]
        for tag in (first.summary["latency"] as? [String: Any] ?? [:]).keys {
            let h = totals[tag] ?? LatencyHistogram()
            latency[tag] = ServeReport.percentiles(h)
            let about = ServeMetric.allCases.first { $0.name == tag }?.about ?? tag
            files["\(tag).hgrm"] =
                "#[fanout serve \(tag), \(n) shards merged: \(about); values in microseconds (us), recorded in "
                + "nanoseconds]\n" + PercentileText.distribution(h, scale: 1000)
        }
        summary["latency"] = latency
        do {
            let data = try JSONSerialization.data(withJSONObject: summary, options: [.prettyPrinted, .sortedKeys])
            files["summary.json"] = String(decoding: data, as: UTF8.self) + "\n"
        } catch {
            throw ReportReadError(file: "merge", "summary.json could not be written: \(error)")
        }
        files["summary.md"] = markdown(summary, parts: ordered)
        return files
    }
}
