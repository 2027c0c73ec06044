import FanoutMetrics
import Foundation

/// An objective `fanout serve` judges its own run by (`--threshold`, and the defaults of `--expect-events`,
/// `--register` and `--trigger`): a count at most N or N% (`missing=0`, `skipped=1%`), a percentile at most a
/// duration (`freshness.p99=2s`, `endToEnd.p99=250ms`), or `NAME=off` to drop a default.
public struct ServeObjective: Sendable, Equatable, CustomStringConvertible {
    public enum Limit: Sendable, Equatable {
        /// At most `count`, or at most `percent` % of the count's whole (expected pairs, activities, events sent).
        case count(name: String, count: Int?, percent: Double?)
        case duration(metric: String, percentile: Comparison.Percentile, nanos: UInt64)
        case off(name: String)
    }

    public var text: String
    public var limit: Limit
    public var description: String { text }

    /// The counts an objective may name, with what their percentage is of (`reordered`: the backend's, the
    /// scenario's own out-of-order events apart).
    public static let counts: [(name: String, of: String)] = [
        ("missing", "expected pairs"), ("skipped", "expected pairs"), ("superseded", "expected pairs"),
        ("staleAtEnd", "expected pairs"), ("reordered", "expected pairs"), ("duplicate", "expected pairs"),
        ("notApplied", "expected pairs"), ("uncorrelated", "expected pairs"), ("wrongContent", "expected pairs"),
        ("wrongKind", "expected pairs"), ("sentToUnregistered", "expected pairs"),
        ("sentAfterAppEvent", "expected pairs"),
        ("unregistered", "activities"), ("trigger.failures", "events sent"), ("trigger.unsent", "events sent"),
        ("appEvents.failed", "app events"), ("kickoff.notStarted", "activities due to start"),
        ("kickoff.notRegistered", "activities started"),
    ]
    /// The latency metrics an objective may name: serve's, and the judge's (`--expect-events`).
    public static let metrics = ServeMetric.allCases.map(\.name) + ["freshness", "fanoutCompletion"]

    /// The name it judges (a count's or `METRIC.PERCENTILE`): a user's objective replaces a default of that name.
    public var name: String {
        switch limit {
        case .count(let n, _, _), .off(let n): n
        case .duration(let m, let p, _): "\(m).\(p.rawValue)"
        }
    }

    init(text: String, limit: Limit) {
        self.text = text
        self.limit = limit
    }

    public init(parsing text: String) throws(ComparisonError) {
        self.text = text
        let (name, value) = try PushThreshold.split(
            text, expected: "COUNT=N, COUNT=N% (missing=0), METRIC.PERCENTILE=DURATION (freshness.p99=2s) or NAME=off")
        if Self.counts.contains(where: { $0.name == name }) {
            if value == "off" {
                limit = .off(name: name)
            } else if let (count, percent) = PushThreshold.countLimit(value) {
                limit = .count(name: name, count: count, percent: percent)
            } else {
                throw ComparisonError("threshold \"\(text)\": a count's limit is N (0 or more), N% or off")
            }
            return
        }
        let (metric, percentile) = try PushThreshold.metric(
            name, in: text, tool: "fanout serve", metrics: Self.metrics, counts: Self.counts.map(\.name))
        if value == "off" {
            limit = .off(name: "\(metric).\(percentile.rawValue)")
            return
        }
        limit = .duration(metric: metric, percentile: percentile, nanos: try PushThreshold.duration(value, in: text))
    }

    /// What the run must have measured for this objective to be judged (a flag to name in the refusal), nil when
    /// it can always be judged.
    public var needs: String? {
        switch limit {
        case .off: return nil
        case .count(let n, _, _):
            if n == "unregistered" { return "--register" }
            if n.hasPrefix("trigger.") { return "--trigger" }
            if n.hasPrefix("appEvents.") { return "--app-events" }
            if n.hasPrefix("kickoff.") { return "a scenario with faults.kickoff" }
            return "--expect-events"
        case .duration(let m, _, _):
            return ["endToEnd", "freshness", "fanoutCompletion"].contains(m) ? "--expect-events" : nil
        }
    }

    /// The defaults of a run: no missing pair and none delivered wrong (`--expect-events`), every activity registered
    /// (`--register`), every event the trigger sent answered 2xx (`--trigger`).
    public static func defaults(_ info: ServeResults.Info) -> [ServeObjective] {
        var names: [String] = []
        if info.events != nil { names += ["missing", "wrongContent", "wrongKind"] }
        // Tokens rotating while serving: a backend that keeps pushing to a token APNs answered 410 fails.
        if info.events?.rotations != nil { names.append("sentToUnregistered") }
        // App events: a backend that keeps pushing to an activity the app told it was dismissed, turned off or
        // uninstalled fails.
        // ... and one that refuses the app's requests telling it (every attempt failed) fails too, named apart: the
        // pushes it then sends after the app event are its side's as well.
        if info.events?.appEvents != nil { names += ["sentAfterAppEvent", "appEvents.failed"] }
        // Kickoff: every activity due to start started, and the backend took each one's registration.
        if info.events?.kickoff != nil { names += ["kickoff.notStarted", "kickoff.notRegistered"] }
        if info.registration != nil { names.append("unregistered") }
        if info.trigger != nil { names.append("trigger.failures") }
        return names.map { ServeObjective(text: "\($0)=0", limit: .count(name: $0, count: 0, percent: nil)) }
    }
}

/// One objective judged: what was measured against what limit.
public struct ServeObjectiveResult: Sendable, Equatable {
    public var objective: String
    public var measured: String
    public var limit: String
    public var met: Bool
}

/// `fanout serve`'s verdict on its own run: the objectives judged (the defaults, minus those turned off, replaced
/// or joined by `--threshold`), and whether fanout itself held the run up (its trigger fell behind: then nothing is
/// judged, as `fanout push` does when saturated). Exit status: 3 not judged, 2 an objective broken, else 0.
public struct ServeVerdict: Sendable, Equatable {
    public enum Status: String, Sendable {
        case passed, failed
        case notJudged = "not judged"
        /// No objective applies (no `--expect-events`, `--register`, `--trigger` or `--threshold`).
        case none = "no objectives"
    }

    public var status: Status
    public var results: [ServeObjectiveResult]
    /// Why fanout's side held the run up (empty: it did not).
    public var harnessLimits: [String]

    /// The trigger's schedule lag (its p99) above which fanout, not the backend, held the events up, unless
    /// `--trigger-max-lag` says otherwise (``TriggerResults/maxScheduleLagNanos``).
    public static let triggerLagBoundNanos = TriggerResults.defaultMaxScheduleLagNanos

    public var exitStatus: Int32 {
        switch status {
        case .notJudged: 3
        case .failed: 2
        case .passed, .none: 0
        }
    }

    /// The objectives of a run with `thresholds` (`--threshold` as given, parsed before the run).
    public static func objectives(_ info: ServeResults.Info, thresholds: [ServeObjective]) -> [ServeObjective] {
        let named = Set(thresholds.map(\.name))
        return ServeObjective.defaults(info).filter { !named.contains($0.name) }
            + thresholds.filter { if case .off = $0.limit { false } else { true } }
    }

    public static func judge(
        _ info: ServeResults.Info, latency: LatencyRecorder, thresholds: [ServeObjective]
    ) -> ServeVerdict {
        let objectives = objectives(info, thresholds: thresholds)
        let results = objectives.map { judge($0, info, latency) }
        var limits: [String] = []
        if let t = info.trigger {
            if t.unsentAtShutdown > 0 {
                limits.append("the trigger left \(t.unsentAtShutdown) due events unsent (waiting for a free slot)")
            }
            if t.waitedForSlot > 0 {
                // Several instances: the bound is per URL; which URLs' events waited.
                let waited = t.byURL.count > 1
                    ? " per URL; " + t.byURL.filter { $0.waitedForSlot > 0 }.map { "\($0.url): \($0.waitedForSlot)" }
                        .joined(separator: ", ")
                    : ""
                limits.append(
                    "\(t.waitedForSlot) events waited for a free trigger slot (--trigger-concurrency \(t.concurrency)"
                        + waited + ")")
            }
            let lag = t.scheduleLagNanos.valueAtPercentile(99)
            if lag > t.maxScheduleLagNanos {
                limits.append(
                    "the trigger's schedule lag p99 \(Units.duration(lag)) is above "
                        + "\(Units.duration(t.maxScheduleLagNanos)): fanout sent the events late")
            }
        }
        // --settle reaching back to (or before) the events' t0: no event was due by time, so nothing could be
        // missing, and a backend that sent nothing would pass. Not judged, never passed.
        if let events = info.events, events.events > 0, events.horizonNanos == 0 {
            limits.append(
                "no event was due by time: --settle (\(Units.duration(events.settleNanos))) reached back to when the "
                    + "events started (serve longer than --settle, or a shorter --settle)")
        }
        let status: Status =
            results.isEmpty ? .none : !limits.isEmpty ? .notJudged : results.allSatisfy(\.met) ? .passed : .failed
        return ServeVerdict(status: status, results: results, harnessLimits: limits)
    }

    static func judge(
        _ o: ServeObjective, _ info: ServeResults.Info, _ latency: LatencyRecorder
    ) -> ServeObjectiveResult {
        switch o.limit {
        case .off:
            return ServeObjectiveResult(objective: o.text, measured: "off", limit: "off", met: true)
        case .count(let name, let count, let percent):
            guard let (n, whole) = measured(name, info) else {
                return ServeObjectiveResult(
                    objective: o.text, measured: "not measured (needs \(o.needs ?? "?"))", limit: "", met: false)
            }
            if let count {
                return ServeObjectiveResult(
                    objective: o.text, measured: "\(n) of \(whole)", limit: "≤ \(count)", met: n <= count)
            }
            let share = whole > 0 ? 100 * Double(n) / Double(whole) : 0
            let p = percent ?? 0
            return ServeObjectiveResult(
                objective: o.text, measured: "\(n) of \(whole) (" + String(format: "%.3g%%", share) + ")",
                limit: "≤ " + String(format: "%g%%", p), met: share <= p)
        case .duration(let metric, let percentile, let nanos):
            guard let h = histogram(metric, info, latency), !h.isEmpty else {
                return ServeObjectiveResult(
                    objective: o.text, measured: "no values", limit: "≤ " + Units.duration(nanos), met: false)
            }
            let v = percentile.value(LatencySummary(h))
            return ServeObjectiveResult(
                objective: o.text, measured: Units.duration(v), limit: "≤ " + Units.duration(nanos), met: v <= nanos)
        }
    }

    /// A count and its whole (nil: the run did not measure it).
    static func measured(_ name: String, _ info: ServeResults.Info) -> (Int, Int)? {
        switch name {
        case "unregistered":
            return info.registration.map { ($0.failed + $0.unregisteredAtDeadline, $0.activities) }
        case "trigger.failures":
            return info.trigger.map { ($0.failures, $0.sent) }
        case "trigger.unsent":
            return info.trigger.map { ($0.unsentAtShutdown, $0.sent + $0.unsentAtShutdown) }
        case "appEvents.failed":
            return info.events?.appEvents.map { ($0.failed, $0.scheduled) }
        case "kickoff.notStarted":
            return info.events?.kickoff.map { ($0.notStarted, $0.due) }
        case "kickoff.notRegistered":
            return info.events?.kickoff.map { ($0.registration.failed + $0.registration.pendingAtShutdown, $0.started) }
        default:
            guard let e = info.events else { return nil }
            let n: Int? =
                switch name {
                case "missing": e.missing
                case "skipped": e.skipped
                case "superseded": e.superseded
                case "staleAtEnd": e.staleAtEnd
                case "reordered": e.reorderedByBackend
                case "duplicate": e.duplicate
                case "notApplied": e.notApplied
                case "uncorrelated": e.uncorrelated
                case "wrongContent": e.wrongContent
                case "wrongKind": e.wrongKind
                case "sentToUnregistered": e.sentToUnregistered
                case "sentAfterAppEvent": e.sentAfterAppEvent
                default: nil
                }
            return n.map { ($0, e.expected) }
        }
    }

    static func histogram(
        _ metric: String, _ info: ServeResults.Info, _ latency: LatencyRecorder
    ) -> LatencyHistogram? {
        switch metric {
        case "freshness": return info.events?.freshness
        case "fanoutCompletion": return info.events?.completion[.fanoutCompletion]
        case "endToEnd": return info.events == nil ? nil : latency[serve: .endToEnd]
        default: return ServeMetric.allCases.first { $0.name == metric }.map { latency[serve: $0] }
        }
    }

    /// The verdict in one line: summary.md's first words after the title, and the last line on stderr.
    public var line: String {
        let broken = results.filter { !$0.met }
        switch status {
        case .none:
            return "no objectives (give --expect-events, --register, --trigger or --threshold to judge the run)"
        case .notJudged:
            return "NOT JUDGED: fanout held the run up or could not judge it — " + harnessLimits.joined(separator: "; ")
        case .failed:
            return "FAILED: " + broken.map { "\($0.objective) broken (measured \($0.measured), limit \($0.limit))" }
                .joined(separator: "; ")
        case .passed:
            return "passed: " + results.map { "\($0.objective) (\($0.measured))" }.joined(separator: ", ")
        }
    }

    /// summary.md's verdict: the line, then the objectives as a table.
    public var markdown: String {
        var md = "**Verdict: \(line)**\n\n"
        guard !results.isEmpty else { return md }
        md += "| objective | measured | limit | met |\n|---|---:|---:|---|\n"
        for r in results { md += "| \(r.objective) | \(r.measured) | \(r.limit) | \(r.met ? "yes" : "**no**") |\n" }
        return md + "\n"
    }

    /// summary.json's `verdict`.
    public var json: [String: Any] {
        [
            "status": status.rawValue, "exitStatus": Int(exitStatus), "line": line, "harnessLimits": harnessLimits,
            "objectives": results.map {
                ["objective": $0.objective, "measured": $0.measured, "limit": $0.limit, "met": $0.met] as [String: Any]
            },
        ]
    }
}
