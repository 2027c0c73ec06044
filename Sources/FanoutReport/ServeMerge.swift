import FanoutCore
import FanoutMetrics
import Foundation

/// `fanout merge` of the folders of `fanout serve --shard K/N`: all N shards of one serve run (same scenario, seed,
/// configuration hash, --state and N), each read by `ServeFolder`. Their typed values are added (requests by status
/// and reason, the devices' accounting, connections, findings with their examples, faults) and the identities
/// checked again; the latency histograms are added exactly (the whole run's, and second k of every shard's from its
/// latency.hlog), never percentiles averaged; so are the faults' held-for and retry-delay histograms (summary.json
/// holds them). The merged folder is rendered by `ServeReport`, as one serve's is, plus the shard lines. state.jsonl
/// is the shards' lines merged in the order serve writes them (`writeState`).
///
/// What a sum means here: a token push reached one shard, so its counts add up to an unsharded serve's; a broadcast
/// reached every shard (`fanout push` sends it to each), so `requests`, `acceptedBroadcasts` and the `service`,
/// `validate`, `route` and `fanout` samples count it once per shard, while the accounting counts its verdict once (one
/// shard counts it, `Shard.countsChannel`) and its deliveries on every shard (each its own subscribers). Peaks
/// (`connections.peakOpen`, `faults.heldPeak`) are the shards' added: an upper bound, as across one serve's loops;
/// `elapsedSeconds` is the longest shard's, `startedAt` the earliest, `workers` the event loops of all shards.
public enum ServeMerge {
    /// The whole run's values, or the set refused: `.shardSet` (a shard missing or repeated, N differs, a folder
    /// not a shard), `.notOneRun` (scenario, seed, configuration or --state differ).
    /// A shard's measured flags but its slice and its event loops (shards of one run differ in those only).
    static func flagsText(_ flags: [String: String]) -> String {
        flags.filter { $0.key != "shard" && $0.key != "workers" }.sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }

    public static func merge(_ parts: [ServeFolder]) throws(ReportReadError) -> ServeResults {
        guard let first = parts.first else { throw ReportReadError(file: "merge", "no serve folders") }
        var shards = ShardSet()
        for p in parts {
            let (a, b) = (first.results.info, p.results.info)
            for (key, x, y) in [
                ("scenario", a.scenario, b.scenario), ("seed", "\(a.seed)", "\(b.seed)"),
                ("configHash", a.configHash ?? "(none)", b.configHash ?? "(none)"),
                ("state", a.state.rawValue, b.state.rawValue),
                ("--threshold", a.thresholds.joined(separator: " "), b.thresholds.joined(separator: " ")),
                ("flags", Self.flagsText(a.flags), Self.flagsText(b.flags)),
            ] where x != y {
                throw ReportReadError.notOneRun(p.folder, key, y, first: first.folder, x, run: "serve run")
            }
            guard let shard = b.shard else {
                throw ReportReadError(
                    file: p.folder, "not a shard (run it with fanout serve --shard K/N)", refusal: .shardSet)
            }
            try shards.add(shard, folder: p.folder)
        }
        try shards.checkWhole()
        if let without = parts.first(where: { !$0.hasState }), parts.contains(where: \.hasState) {
            throw ReportReadError(file: without.folder, "no state.jsonl, and other shards have one")
        }
        // fanout serve --shard refuses --trigger, --register and --expect-events: a folder with them is not a shard's.
        for p in parts {
            let sections = [
                ("trigger", p.summary.trigger != nil), ("registration", p.summary.registration != nil),
                ("events", p.summary.events != nil),
            ].filter(\.1).map(\.0)
            guard sections.isEmpty else {
                throw ReportReadError(
                    file: (p.folder as NSString).appendingPathComponent("summary.json"),
                    "has \(sections.joined(separator: ", ")): not a shard's folder (fanout serve --shard has none)",
                    refusal: .shardSet)
            }
        }
        for p in parts where !p.withoutHistogram.isEmpty {
            throw ReportReadError(
                file: (p.folder as NSString).appendingPathComponent("summary.json"),
                "field \(p.withoutHistogram[0]).histogram: missing (a folder written before summary.json held it); "
                    + "its percentiles alone cannot be added exactly")
        }
        let ordered = parts.sorted { ($0.results.info.shard?.index ?? 0) < ($1.results.info.shard?.index ?? 0) }

        var info = first.results.info
        info.shard = nil
        if !info.flags.isEmpty { info.flags["shard"] = "merged \(parts.count)" }
        var listens: [String] = []
        for p in ordered where !listens.contains(p.results.info.listen) { listens.append(p.results.info.listen) }
        info.listen = listens.joined(separator: " ")
        info.workers = ordered.map(\.results.info.workers).reduce(0, +)
        info.startedAt = ordered.map(\.results.info.startedAt).min() ?? info.startedAt
        info.startedAtSeconds = ordered.map(\.results.info.startedAtSeconds).min() ?? 0
        var stats = ServeStats()
        var accounting = Accounting()
        var connections = ConnectionStats()
        var latency = LatencyRecorder.serve()
        var bytes = (read: 0, written: 0)
        var elapsed = 0.0
        // Second k of every shard added, per metric.
        var seconds: [Int: [ServeMetric: (start: Double, length: Double, histogram: LatencyHistogram)]] = [:]
        for p in ordered {
            let r = p.results
            stats += r.stats
            accounting += r.accounting
            connections += r.connections
            latency.add(r.latency)
            bytes.read += r.bytes.read
            bytes.written += r.bytes.written
            elapsed = max(elapsed, r.elapsedSeconds)
            for i in p.intervals {
                let k = Int(i.startSeconds.rounded())
                if var m = seconds[k]?[i.metric] {
                    m.start = min(m.start, i.startSeconds)
                    m.length = max(m.length, i.lengthSeconds)
                    m.histogram.add(i.histogram)
                    seconds[k]![i.metric] = m
                } else {
                    seconds[k, default: [:]][i.metric] = (i.startSeconds, i.lengthSeconds, i.histogram)
                }
            }
        }
        var intervals: [LoggedInterval] = []
        for k in seconds.keys.sorted() {
            for metric in ServeMetric.allCases {
                guard let m = seconds[k]?[metric] else { continue }
                intervals.append(
                    LoggedInterval(
                        index: k, metricIndex: metric.rawValue, startNanos: UInt64((m.start * 1e9).rounded()),
                        lengthNanos: UInt64((m.length * 1e9).rounded()), histogram: m.histogram))
            }
        }
        let requestsHold = stats.identitiesHold
        let wireHolds = connections.answersAccountedFor(requests: stats.requests)
        guard requestsHold, wireHolds, accounting.identitiesHold else {
            throw ReportReadError(
                file: "merge",
                "the added counts break an identity (requests \(requestsHold), wire \(wireHolds), accounting "
                    + "\(accounting.identitiesHold))")
        }
        return ServeResults(
            info: info, stats: stats, accounting: accounting, latency: latency, intervals: intervals,
            connections: connections, bytes: bytes, elapsedSeconds: elapsed)
    }

    /// The merged folder's files (summary.json, summary.md, report.html, latency.hlog, one .hgrm per metric), as
    /// `ServeReport` writes one serve's, with the shards named: summary.json's `shards`, `configHash`,
    /// `mergedShards` and `requests.notThisShard`, summary.md's shard line.
    public static func files(_ parts: [ServeFolder]) throws(ReportReadError) -> [String: String] {
        let merged = try merge(parts)
        let shards = parts.compactMap { p in p.results.info.shard.map { (shard: $0, folder: p.folder) } }
            .sorted { $0.shard.index < $1.shard.index }
        do {
            return try ServeReport.files(merged, mergedShards: shards)
        } catch {
            throw ReportReadError(file: "merge", "\(error)")
        }
    }
}
