import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import Foundation

/// `fanout merge`: the shards of one run (same scenario, seed and configuration; disjoint device
/// slices K/N) added into the whole run's report. Counts are summed and the identities checked
/// again; histograms are added, interval by interval (never percentiles averaged); fan-out
/// completion is rebuilt per event from the shards' `completion.tsv` (the last recipient on any
/// shard), since a sum of per-shard completions would count each event once per shard.
public enum RunMerge {
    public static func merge(_ parts: [(folder: String, report: RunReport)]) throws(ReportReadError) -> RunReport {
        guard let (firstFolder, first) = parts.first else { throw ReportReadError(file: "merge", "no run folders") }
        let i0 = first.info
        var shards = ShardSet()
        for (folder, r) in parts {
            let i = r.info
            func differs(_ what: String, _ a: String, _ b: String) -> ReportReadError {
                .notOneRun(folder, what, b, first: firstFolder, a, run: "run")
            }
            if i.scenario != i0.scenario { throw differs("scenario", i0.scenario, i.scenario) }
            if i.seed != i0.seed { throw differs("seed", "\(i0.seed)", "\(i.seed)") }
            if i.configHash != i0.configHash { throw differs("configuration", i0.configHash, i.configHash) }
            if i.clock != i0.clock { throw differs("clock", i0.clock, i.clock) }
            guard let text = i.shard, let shard = try? Shard(parsing: text) else {
                throw ReportReadError(file: folder, "not a shard (run it with --shard K/N)", refusal: .shardSet)
            }
            try shards.add(shard, folder: folder)
            guard r.completion != nil else {
                throw ReportReadError(
                    file: (folder as NSString).appendingPathComponent(CompletionFile.name),
                    "missing: a shard's folder holds its per-event completion")
            }
            guard r.accounting.identitiesHold else {
                throw ReportReadError(file: folder, "the shard's own accounting identities are broken")
            }
            guard r.events == first.events else {
                throw ReportReadError(
                    file: folder, "\(r.events) events, \(firstFolder) has \(first.events)", refusal: .notOneRun)
            }
        }
        try shards.checkWhole()
        let n = shards.count

        var accounting = Accounting()
        var recorder = LatencyRecorder()
        var completion = EventCompletions()
        var activities = 0
        var workers = 0
        var peak = 0
        var baseline = 0
        var wall = 0.0
        var overhead = 0.0
        var start = Double.infinity
        var keyed: [Int: (Int, Metric, LatencyHistogram)] = [:]
        let completionMetrics = Set(Metric.completionMetrics)
        for (_, r) in parts {
            accounting += r.accounting
            activities += r.activities
            workers += r.info.workers
            peak += r.peakResidentBytes
            baseline += r.baselineResidentBytes
            wall = max(wall, r.info.wallSeconds)
            overhead += r.info.timerOverheadNanos / Double(parts.count)
            start = min(start, r.info.startedAtSeconds)
            for metric in Metric.allCases where !completionMetrics.contains(metric) {
                recorder.add(metric, r[metric])
            }
            for interval in r.intervals where !completionMetrics.contains(interval.metric) {
                let h: LatencyHistogram
                do {
                    h = try interval.histogram()
                } catch {
                    throw ReportReadError(
                        file: "merge", "interval \(interval.index) of \(interval.metric.name): \(error)")
                }
                let key = interval.index * Metric.allCases.count + interval.metric.rawValue
                if keyed[key] == nil { keyed[key] = (interval.index, interval.metric, LatencyRecorder.makeHistogram()) }
                keyed[key]!.2.add(h)
            }
            completion.combine(r.completion!)
        }
        guard accounting.identitiesHold else {
            throw ReportReadError(file: "merge", "the summed counts break the accounting identities")
        }
        completion.record(into: &recorder)
        var intervals = keyed.keys.sorted().map { key -> MergedInterval in
            let (index, metric, h) = keyed[key]!
            return MergedInterval(index: index, metric: metric, histogram: h)
        }
        intervals.append(contentsOf: completion.intervals(intervalNanos: first.intervalNanos))
        intervals.sort { ($0.index, $0.metric.rawValue) < ($1.index, $1.metric.rawValue) }
        var info = i0
        info.workers = workers
        info.wallSeconds = wall
        info.startedAtSeconds = start
        info.timerOverheadNanos = (overhead * 10).rounded() / 10
        info.shard = nil
        info.shards = n
        return RunReport(
            info: info, accounting: accounting, activities: activities, events: first.events, recorder: recorder,
            intervals: intervals, intervalNanos: first.intervalNanos, peakResidentBytes: peak,
            baselineResidentBytes: baseline, completion: nil)
    }
}
