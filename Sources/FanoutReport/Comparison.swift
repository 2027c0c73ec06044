import FanoutCore
import FanoutMetrics
import Foundation

/// `fanout compare`: every metric and percentile of two runs side by side, judged against
/// thresholds; counts compared exactly when both runs are deterministic (virtual time, same seed,
/// same configuration, same shard).
public struct Comparison: Sendable {
    /// The percentiles compared, as named in thresholds (`endToEnd.p99.9`).
    public enum Percentile: String, CaseIterable, Sendable {
        case p50, p90, p99
        case p999 = "p99.9"
        case p9999 = "p99.99"
        case max

        public func value(_ l: LatencySummary) -> UInt64 {
            switch self {
            case .p50: l.p50
            case .p90: l.p90
            case .p99: l.p99
            case .p999: l.p999
            case .p9999: l.p9999
            case .max: l.max
            }
        }

        /// Also accepted: `p999`, `p9999` (the keys of summary.json).
        static func named(_ name: String) -> Percentile? {
            switch name {
            case "p999": .p999
            case "p9999": .p9999
            default: Percentile(rawValue: name)
            }
        }
    }

    public enum Verdict: String, Sendable {
        case ok, regression, improvement, info
        /// Judged in the baseline, not measured in the current run (fails closed: exit 5).
        case absent
    }

    /// A gated count or section of the baseline that the current run does not have.
    public static let absentExitCode: Int32 = 5

    /// A relative band: a rise above `percent` is a regression, a fall below −`percent` an improvement.
    public struct Threshold: Sendable, Equatable {
        /// The metric's name (`fanout run`'s `Metric.name` or one of `fanout serve`'s); nil: every metric.
        public var metricName: String?
        public var percentile: Percentile
        public var percent: Double

        public init(metric: Metric?, percentile: Percentile, percent: Double) {
            self.init(metricName: metric?.name, percentile: percentile, percent: percent)
        }

        public init(metricName: String?, percentile: Percentile, percent: Double) {
            self.metricName = metricName
            self.percentile = percentile
            self.percent = percent
        }

        /// The `fanout run` metric named (nil: every metric, or one of `fanout serve`'s).
        public var metric: Metric? { Metric.allCases.first { $0.name == metricName } }

        /// Parses `METRIC.PERCENTILE=+N%` (METRIC `*` for every metric; `+` optional), or
        /// `METRIC.PERCENTILE=off` (shown, not judged).
        public init(parsing text: String) throws(ComparisonError) {
            guard let eq = text.firstIndex(of: "=") else {
                throw ComparisonError("threshold \"\(text)\": expected METRIC.PERCENTILE=+N%")
            }
            let name = String(text[..<eq])
            var amount = String(text[text.index(after: eq)...])
            var percent = Double.infinity  // `off`: shown, never judged
            if amount != "off" {
                guard amount.hasSuffix("%") else {
                    throw ComparisonError("threshold \"\(text)\": the amount must be a percentage, like +10%, or off")
                }
                amount.removeLast()
                if amount.hasPrefix("+") { amount.removeFirst() }
                guard let value = Double(amount), value.isFinite, value >= 0 else {
                    throw ComparisonError("threshold \"\(text)\": expected a percentage ≥ 0, like +10%")
                }
                percent = value
            }
            let context = "threshold \"\(text)\""
            let (metricName, percentile) = try Comparison.splitPercentile(name, in: context)
            if metricName == "*" {
                self.init(metricName: nil, percentile: percentile, percent: percent)
            } else if let m = Metric.allCases.first(where: { $0.name == metricName || $0.fileName == metricName }) {
                self.init(metricName: m.name, percentile: percentile, percent: percent)
            } else if ServeSummaryFile.metricNames.contains(metricName)
                || PushSummaryFile.metricNames.contains(metricName)
            {
                self.init(metricName: metricName, percentile: percentile, percent: percent)
            } else {
                throw ComparisonError(
                    "\(context): unknown metric \"\(metricName)\" (known: *, "
                        + Metric.allCases.map(\.name).joined(separator: ", ") + "; fanout serve: "
                        + ServeSummaryFile.metricNames.joined(separator: ", ") + "; fanout push: "
                        + PushSummaryFile.metricNames.joined(separator: ", ") + ")")
            }
        }

        public var description: String {
            "\(metricName ?? "*").\(percentile.rawValue)="
                + (percent.isFinite ? "+\(Comparison.number(percent))%" : "off")
        }
    }

    /// Splits `METRIC.PERCENTILE` (METRIC `*`: nil, every metric). Metric names contain dots
    /// (fanoutCompletion.2-100); the percentile is what follows the last dot that starts a known
    /// percentile. Errors start with `context`.
    public static func metricAndPercentile(
        _ name: String, in context: String
    )
        throws(ComparisonError) -> (Metric?, Percentile)
    {
        let (metricName, percentile) = try splitPercentile(name, in: context)
        if metricName == "*" { return (nil, percentile) }
        guard let m = Metric.allCases.first(where: { $0.name == metricName || $0.fileName == metricName }) else {
            throw ComparisonError(
                "\(context): unknown metric \"\(metricName)\" (known: *, "
                    + Metric.allCases.map(\.name).joined(separator: ", ") + ")")
        }
        return (m, percentile)
    }

    /// `METRIC.PERCENTILE` split at the last dot that starts a known percentile.
    public static func splitPercentile(
        _ name: String, in context: String
    ) throws(ComparisonError) -> (String, Percentile) {
        let spellings: [(String, Percentile)] = [
            ("p50", .p50), ("p90", .p90), ("p99", .p99), ("p99.9", .p999), ("p999", .p999),
            ("p99.99", .p9999), ("p9999", .p9999), ("max", .max),
        ]
        let split = spellings.filter { name.hasSuffix("." + $0.0) }.max { $0.0.count < $1.0.count }
            .map { (String(name.dropLast($0.0.count + 1)), $0.1) }
        guard let (metricName, percentile) = split else {
            let last = name.split(separator: ".").last.map(String.init) ?? name
            throw ComparisonError(
                "\(context): unknown percentile \"\(last)\" (known: "
                    + Percentile.allCases.map(\.rawValue).joined(separator: ", ") + ")")
        }
        return (metricName, percentile)
    }

    /// Used for every metric unless a `--threshold` names it: the tail gets more room than the
    /// median because fewer samples decide it; p99.99 and max are shown but not judged.
    public static let defaultThresholds: [Threshold] = [
        Threshold(metric: nil, percentile: .p50, percent: 10),
        Threshold(metric: nil, percentile: .p90, percent: 15),
        Threshold(metric: nil, percentile: .p99, percent: 25),
        Threshold(metric: nil, percentile: .p999, percent: 50),
    ]

    public struct Row: Sendable {
        /// The metric's name; `metric` is `fanout run`'s metric of that name (nil for `fanout serve`'s).
        public var metricName: String
        public var metric: Metric? { Metric.allCases.first { $0.name == metricName } }
        public var percentile: Percentile
        public var baseline: UInt64
        public var current: UInt64
        /// Relative change in percent (nil when the baseline is 0).
        public var deltaPercent: Double?
        public var threshold: Double?
        public var verdict: Verdict
    }

    public struct CountRow: Sendable {
        public var name: String
        public var baseline: Int
        public var current: Int
        public var verdict: Verdict
    }

    public var baselinePath: String
    public var currentPath: String
    /// Both runs deterministic and alike: counts must match exactly.
    public var countsExact: Bool
    /// Why counts are not compared exactly (when they are not).
    public var countsNote: String
    public var rows: [Row] = []
    public var counts: [CountRow] = []

    public var regressions: Int {
        rows.filter { $0.verdict == .regression }.count + counts.filter { $0.verdict == .regression }.count
    }
    public var improvements: Int { rows.filter { $0.verdict == .improvement }.count }

    /// What the baseline judged and the current run did not measure.
    public var absent: Int { counts.filter { $0.verdict == .absent }.count }

    /// package-benchmark's convention: 0 within thresholds, 2 a regression, 4 only improvements; 5 (first) when the
    /// current run lacks what the baseline judged.
    public var exitCode: Int32 {
        absent > 0 ? Comparison.absentExitCode : regressions > 0 ? 2 : improvements > 0 ? 4 : 0
    }

    public var result: String {
        absent > 0
            ? "absent in the current run" : regressions > 0 ? "regression" : improvements > 0 ? "improvement" : "ok"
    }

    public init(baseline: SummaryFile, current: SummaryFile, thresholds: [Threshold]) {
        baselinePath = baseline.path
        currentPath = current.path
        let b = baseline.info
        let c = current.info
        var reasons: [String] = []
        if b.clock != "virtual" || c.clock != "virtual" { reasons.append("not both in virtual time") }
        if b.seed != c.seed { reasons.append("seeds differ (\(b.seed), \(c.seed))") }
        if b.configHash != c.configHash { reasons.append("configurations differ (\(b.configHash), \(c.configHash))") }
        if b.shard != c.shard || b.shards != c.shards { reasons.append("different shards") }
        countsExact = reasons.isEmpty
        countsNote =
            countsExact
            ? "virtual time, same seed and configuration: counts must match exactly"
            : "counts shown, not judged: " + reasons.joined(separator: "; ")
        for metric in Metric.allCases {
            rows += Comparison.rows(
                metric.name, baseline.latency[metric], current.latency[metric], thresholds: thresholds)
        }
        func count(_ name: String, _ bv: Int, _ cv: Int) {
            counts.append(
                CountRow(
                    name: name, baseline: bv, current: cv,
                    verdict: countsExact ? (bv == cv ? .ok : .regression) : .info))
        }
        let ba = baseline.accounting
        let ca = current.accounting
        count("pushes", ba.pushes, ca.pushes)
        for r in RejectReason.allCases { count("rejected.\(r.name)", ba[r], ca[r]) }
        for r in UnroutableReason.allCases { count("unroutable.\(r.name)", ba[r], ca[r]) }
        count("routed", ba.routed, ca.routed)
        count("deliveries", ba.deliveries, ca.deliveries)
        for o in Outcome.allCases { count("outcomes.\(o.name)", ba[o], ca[o]) }
        count("requests", ba.requests, ca.requests)
        count("requestsLimitExceeded", ba.requestsLimitExceeded, ca.requestsLimitExceeded)
        count("activities", baseline.activities, current.activities)
        count("events", baseline.events, current.events)
        for metric in Metric.allCases where metric != .scheduleLag {
            count(
                "\(metric.name).count", Int(baseline.latency[metric]?.count ?? 0),
                Int(current.latency[metric]?.count ?? 0))
        }
        if !ca.identitiesHold {
            counts.append(
                CountRow(
                    name: "identitiesHold", baseline: ba.identitiesHold ? 1 : 0, current: 0,
                    verdict: .regression))
        }
    }

    /// One metric's rows, every percentile judged against its threshold (none when neither run has a value).
    static func rows(
        _ name: String, _ bl: LatencySummary?, _ cl: LatencySummary?, thresholds: [Threshold]
    ) -> [Row] {
        guard (bl?.count ?? 0) > 0 || (cl?.count ?? 0) > 0 else { return [] }
        var rows: [Row] = []
        for p in Percentile.allCases {
            let bv = bl.map(p.value) ?? 0
            let cv = cl.map(p.value) ?? 0
            let delta: Double? = bv == 0 ? (cv == 0 ? 0 : nil) : (Double(cv) - Double(bv)) / Double(bv) * 100
            let found = Comparison.threshold(for: name, p, in: thresholds)
            let limit = found.flatMap { $0.isFinite ? $0 : nil }
            var verdict = Verdict.info
            if let limit {
                if (bl?.count ?? 0) == 0 || (cl?.count ?? 0) == 0 {
                    verdict = (bl?.count ?? 0) == 0 ? .info : .regression
                } else if let delta {
                    verdict = delta > limit ? .regression : delta < -limit ? .improvement : .ok
                } else {
                    verdict = .regression
                }
            }
            rows.append(
                Row(
                    metricName: name, percentile: p, baseline: bv, current: cv, deltaPercent: delta,
                    threshold: limit, verdict: verdict))
        }
        return rows
    }

    /// The rows of each metric of `names` (``rows(_:_:_:thresholds:)``), for summaries that name their metrics.
    static func rows(
        _ names: [String], _ bl: [String: LatencySummary], _ cl: [String: LatencySummary], thresholds: [Threshold]
    ) -> [Row] {
        names.flatMap { rows($0, bl[$0], cl[$0], thresholds: thresholds) }
    }

    /// The counts of either run, named by their path: ordered by the first prefix of `order` each starts with (the
    /// others last), then by name.
    static func countNames(_ baseline: [String: Int], _ current: [String: Int], order: [String]) -> [String] {
        Set(baseline.keys).union(current.keys).sorted { a, b in
            let ra = order.firstIndex { a.hasPrefix($0) } ?? Int.max
            let rb = order.firstIndex { b.hasPrefix($0) } ?? Int.max
            return (ra, a) < (rb, b)
        }
    }

    /// The most specific threshold: one naming the metric wins over `*`.
    static func threshold(for metricName: String, _ p: Percentile, in thresholds: [Threshold]) -> Double? {
        if let t = thresholds.last(where: { $0.metricName == metricName && $0.percentile == p }) { return t.percent }
        return thresholds.last(where: { $0.metricName == nil && $0.percentile == p })?.percent
    }

    static func number(_ v: Double) -> String {
        v == v.rounded() ? String(Int(v)) : String(format: "%.1f", v)
    }

    static func delta(_ d: Double?) -> String {
        guard let d else { return "new" }
        return String(format: "%+.1f%%", d)
    }

    // MARK: Output

    public func text(markdown: Bool) -> String {
        var out: [String] = []
        let header = ["metric", "percentile", "baseline", "current", "delta", "threshold", "verdict"]
        var table: [[String]] = []
        for r in rows {
            table.append([
                r.metricName, r.percentile.rawValue, Units.duration(r.baseline), Units.duration(r.current),
                Comparison.delta(r.deltaPercent), r.threshold.map { "±" + Comparison.number($0) + "%" } ?? "",
                label(r.verdict),
            ])
        }
        let countTable = counts.filter { $0.baseline != 0 || $0.current != 0 || $0.verdict == .regression }.map {
            [$0.name, "\($0.baseline)", "\($0.current)", "\($0.current - $0.baseline)", label($0.verdict)]
        }
        if markdown {
            out.append("# fanout compare")
            out.append("")
            out.append(
                "Baseline `\(baselinePath)`, current `\(currentPath)`: **\(result)** "
                    + "(\(regressions) regressions, \(improvements) improvements).")
            out.append("")
            out.append("## Latency")
            out.append("")
            out += SummaryMarkdown.table(header, table, align: "llrrrrl")
            out.append("")
            out.append("## Counts")
            out.append("")
            out.append(countsNote + ".")
            out.append("")
            out += SummaryMarkdown.table(
                ["count", "baseline", "current", "difference", "verdict"], countTable,
                align: "lrrrl")
        } else {
            out.append("baseline  \(baselinePath)")
            out.append("current   \(currentPath)")
            out.append("")
            out += aligned([header] + table, right: [2, 3, 4, 5])
            out.append("")
            out.append("counts: " + countsNote)
            out += aligned([["count", "baseline", "current", "difference", "verdict"]] + countTable, right: [1, 2, 3])
            out.append("")
            out.append("result: \(result) (\(regressions) regressions, \(improvements) improvements)")
        }
        return out.joined(separator: "\n") + "\n"
    }

    private func label(_ v: Verdict) -> String {
        switch v {
        case .ok: "ok"
        case .regression: "REGRESSION"
        case .improvement: "improved"
        case .info: ""
        case .absent: "ABSENT"
        }
    }

    private func aligned(_ rows: [[String]], right: Set<Int>) -> [String] {
        guard let columns = rows.first?.count else { return [] }
        var widths = [Int](repeating: 0, count: columns)
        for r in rows { for (i, cell) in r.enumerated() { widths[i] = max(widths[i], cell.count) } }
        return rows.map { r in
            r.enumerated().map { i, cell in
                let pad = String(repeating: " ", count: widths[i] - cell.count)
                return right.contains(i) ? pad + cell : cell + pad
            }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
    }

    public func json() -> String {
        var o = JSONTextWriter()
        o.open()
        o.field("baseline", string: baselinePath)
        o.field("current", string: currentPath)
        o.field("result", string: result)
        o.field("exitCode", int: Int(exitCode))
        o.field("regressions", int: regressions)
        o.field("improvements", int: improvements)
        o.field("countsExact", bool: countsExact)
        o.field("countsNote", string: countsNote)
        o.key("latency")
        let latencyItems = rows.map { r -> String in
            let metric = JSONTextWriter.quote(r.metricName)
            let percentile = JSONTextWriter.quote(r.percentile.rawValue)
            let delta = JSONTextWriter.number(r.deltaPercent.map { ($0 * 100).rounded() / 100 })
            let threshold = JSONTextWriter.number(r.threshold)
            return "\n    {\"metric\": \(metric), \"percentile\": \(percentile), \"baselineNanos\": \(r.baseline), "
                + "\"currentNanos\": \(r.current), \"deltaPercent\": \(delta), \"thresholdPercent\": \(threshold), "
                + "\"verdict\": \"\(r.verdict.rawValue)\"}"
        }
        o.inline("[" + latencyItems.joined(separator: ",") + "\n  ]")
        o.key("counts")
        let countItems = counts.map { c -> String in
            let name = JSONTextWriter.quote(c.name)
            return "\n    {\"name\": \(name), \"baseline\": \(c.baseline), \"current\": \(c.current), "
                + "\"verdict\": \"\(c.verdict.rawValue)\"}"
        }
        o.inline("[" + countItems.joined(separator: ",") + "\n  ]")
        o.close()
        return o.text + "\n"
    }
}

public struct ComparisonError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
