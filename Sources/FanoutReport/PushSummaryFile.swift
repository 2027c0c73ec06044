import FanoutMetrics
import Foundation

/// `summary.json` of `fanout push` (`"tool": "fanout push"`) read back for `fanout compare`: the run's description,
/// its counts, its `latency` and `scheduleLag` percentiles, and whether its generator was saturated.
public struct PushSummaryFile: Sendable {
    /// `fanout push`'s latency metrics, as thresholds name them.
    public static let metricNames = ["latency", "scheduleLag"]

    public var path: String
    public var scenario: String
    public var seed: UInt64
    public var configHash: String
    public var target: String
    public var latency: [String: LatencySummary] = [:]
    /// Every count of the file, named by its path (`requests.sent`, `requests.byReason.BadDeviceToken`).
    public var counts: [String: Int] = [:]
    public var identityHolds: Bool
    /// Why the generator was saturated (nil: it was not): its numbers judge nothing.
    public var saturation: String?
    public var interrupted: Bool

    /// The order counts are shown in.
    static let countOrder = [
        "requests.sent", "requests.answered", "requests.byStatus.", "requests.byReason.", "requests.failed",
        "requests.failures.", "requests.unansweredAtEnd", "requests.retries", "events", "latency.", "scheduleLag.",
    ]

    static func parse(_ root: Fields, file: String) throws(ReportReadError) -> PushSummaryFile {
        let object = root.value as? [String: Any] ?? [:]
        let identity = (object["identity"] as? [String: Any])?["holds"] as? Bool
        guard let identity else { throw ReportReadError(file: file, "field identity.holds: expected true or false") }
        var s = PushSummaryFile(
            path: file, scenario: try root.string("scenario"), seed: UInt64(try root.int("seed")),
            configHash: try root.optionalString("configHash") ?? "", target: try root.string("target"),
            identityHolds: identity, saturation: nil, interrupted: object["interrupted"] as? Bool ?? false)
        let requests = try root.object("requests")
        for key in ["sent", "answered", "failed", "unansweredAtEnd"] {
            s.counts["requests.\(key)"] = try requests.int(key)
        }
        s.counts["requests.retries"] = try root.optionalInt("retries") ?? 0
        s.counts["events"] = try root.int("events")
        for key in ["byStatus", "byReason", "failures"] {
            let o = try requests.object(key)
            for k in (o.value as? [String: Any] ?? [:]).keys { s.counts["requests.\(key).\(k)"] = try o.int(k) }
        }
        for name in metricNames {
            let summary = try root.percentiles(name)
            s.latency[name] = summary
            s.counts["\(name).count"] = Int(summary.count)
        }
        let saturation = try root.object("saturation")
        if (saturation.value as? [String: Any])?["saturated"] as? Bool == true {
            var why: [String] = []
            // Judged on dispatchLag (the generator's own lateness) since it was recorded; before, on scheduleLag and
            // requests queued at the end.
            let dispatch = try saturation.optionalInt("dispatchLagP99Nanos")
            let metric = dispatch == nil ? "scheduleLag" : "dispatchLag"
            var p99 = dispatch ?? 0
            if dispatch == nil { p99 = try saturation.int("scheduleLagP99Nanos") }
            let bound = try saturation.int("maxScheduleLagNanos")
            if p99 > bound {
                why.append(
                    "\(metric) p99 \(Units.duration(UInt64(p99))) above the bound \(Units.duration(UInt64(bound)))")
            }
            if let shards = (saturation.value as? [String: Any])?["saturatedShards"] as? [String], !shards.isEmpty {
                why.append("shard" + (shards.count == 1 ? " " : "s ") + shards.joined(separator: ", ") + " saturated")
            }
            let queued = try saturation.int("queuedAtEnd")
            if queued > 0 && dispatch == nil { why.append("\(queued) requests still queued at the end") }
            s.saturation = why.isEmpty ? "saturated" : why.joined(separator: "; ")
        }
        // A run that refused to start (`--max-start-skew`) sent nothing: its numbers judge nothing either.
        if let refused = ((object["startAt"] as? [String: Any])?["refused"]) as? String {
            s.saturation = "it refused to start: " + refused
        }
        return s
    }
}

extension Comparison {
    /// Two `fanout push` runs: `latency` and `scheduleLag` judged against the thresholds as a run's metrics are;
    /// counts shown with their difference, and failures judged: more requests failed (reset, GOAWAY, connection
    /// ended) or unanswered at the end than the baseline, any failure kind or answer reason the baseline did not
    /// have, or a broken identity, is a regression. When both sent the same schedule (same seed and configuration,
    /// the same number of requests), more answers of any reason than the baseline's is one too. A saturated run is
    /// not compared at all (`fanout compare` refuses it before this).
    public init(baseline: PushSummaryFile, current: PushSummaryFile, thresholds: [Threshold]) {
        baselinePath = baseline.path
        currentPath = current.path
        countsExact = false
        let sameSchedule =
            baseline.seed == current.seed && baseline.configHash == current.configHash
            && baseline.counts["requests.sent"] == current.counts["requests.sent"]
        var notes = ["fanout push runs: more failures or unanswered requests, a new failure kind or answer reason is a "
            + "regression"]
        if sameSchedule {
            notes.append("the same schedule (seed, configuration, requests sent): more answers of any reason too")
        } else {
            notes.append(
                "schedules differ (\(baseline.scenario) seed \(baseline.seed), \(current.scenario) seed "
                    + "\(current.seed), \(baseline.counts["requests.sent"] ?? 0) and "
                    + "\(current.counts["requests.sent"] ?? 0) sent): other counts shown, not judged")
        }
        if baseline.interrupted || current.interrupted {
            notes.append("an interrupted run (SIGINT or SIGTERM) is in it")
        }
        countsNote = notes.joined(separator: "; ")
        rows = Comparison.rows(PushSummaryFile.metricNames, baseline.latency, current.latency, thresholds: thresholds)
        for name in Comparison.countNames(baseline.counts, current.counts, order: PushSummaryFile.countOrder) {
            let (b, c) = (baseline.counts[name] ?? 0, current.counts[name] ?? 0)
            let verdict: Verdict
            if name == "requests.failed" || name == "requests.unansweredAtEnd" || name.hasPrefix("requests.failures.") {
                verdict = c > b ? .regression : .ok
            } else if name.hasPrefix("requests.byReason.") {
                verdict = (b == 0 && c > 0) || (sameSchedule && c > b) ? .regression : sameSchedule ? .ok : .info
            } else {
                verdict = .info
            }
            counts.append(CountRow(name: name, baseline: b, current: c, verdict: verdict))
        }
        if !current.identityHolds {
            counts.append(
                CountRow(
                    name: "identityHolds", baseline: baseline.identityHolds ? 1 : 0, current: 0, verdict: .regression))
        }
    }
}
