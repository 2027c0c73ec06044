import FanoutMetrics
import Foundation

/// `fanout push --threshold`: an absolute objective the run itself is judged by (an SLO gate, where `fanout compare`
/// judges one run against another). `latency.p99=50ms`, `dispatchLag.p99.9=10ms` (a percentile at most that long:
/// p50, p90, p99, p99.9, p99.99 or max; units ns, us, µs, ms, s); `failures=0`, `unanswered=0`, `non200=1%` (a count
/// at most N, or at most N% of the requests sent): `failures` (reset, GOAWAY, connection ended: every kind),
/// `failures.KIND`, `unanswered` (at the end), `non200` (answers of another status than 200), `status.CODE`,
/// `reason.NAME` (answers with that reason).
public struct PushThreshold: Sendable, Equatable, CustomStringConvertible {
    public enum Limit: Sendable, Equatable {
        case duration(metric: String, percentile: Comparison.Percentile, nanos: UInt64)
        /// At most `count`, or at most `percentOfSent` % of the requests sent.
        case count(name: String, count: Int?, percentOfSent: Double?)
    }

    public var text: String
    public var limit: Limit

    public var description: String { text }

    /// The histograms a threshold may name. `latency` is every request's, failed and unanswered ones at their end
    /// (fail closed); `answeredLatency` the answered ones' alone.
    public static let metricNames = ["latency", "answeredLatency", "scheduleLag", "dispatchLag", "streamWait"]

    /// `r`'s histogram of that name (``metricNames``).
    static func histogram(_ metric: String, _ r: PushResults) -> LatencyHistogram {
        switch metric {
        case "answeredLatency": r.answeredLatency
        case "scheduleLag": r.scheduleLag
        case "dispatchLag": r.dispatchLag
        case "streamWait": r.streamWait
        default: r.latency
        }
    }

    /// The counts a threshold may name: exactly, or as a prefix followed by its key.
    static let countNames = ["failures", "unanswered", "non200"]
    static let countPrefixes = ["failures.", "status.", "reason."]

    public init(parsing text: String) throws(ComparisonError) {
        self.text = text
        let (name, value) = try Self.split(
            text, expected: "METRIC.PERCENTILE=DURATION (latency.p99=50ms) or COUNT=N (failures=0)")
        if Self.countNames.contains(name) || Self.countPrefixes.contains(where: { name.hasPrefix($0) && name != $0 }) {
            if name.hasPrefix("status."), Int(name.dropFirst(7)) == nil {
                throw ComparisonError("threshold \"\(text)\": status.CODE needs a status code, like status.500")
            }
            guard let (count, percent) = Self.countLimit(value) else {
                throw ComparisonError(
                    "threshold \"\(text)\": a count's limit is N (0 or more) or N% of the requests sent")
            }
            limit = .count(name: name, count: count, percentOfSent: percent)
            return
        }
        let (metric, percentile) = try Self.metric(
            name, in: text, tool: "fanout push", metrics: Self.metricNames,
            counts: Self.countNames + Self.countPrefixes.map { $0 + "…" })
        limit = .duration(metric: metric, percentile: percentile, nanos: try Self.duration(value, in: text))
    }

    /// A threshold's `NAME=VALUE` (push's and serve's), or the error naming the forms it takes (`expected`).
    static func split(_ text: String, expected: String) throws(ComparisonError) -> (name: String, value: String) {
        guard let eq = text.firstIndex(of: "="), eq != text.startIndex else {
            throw ComparisonError("threshold \"\(text)\": expected \(expected)")
        }
        return (String(text[..<eq]), String(text[text.index(after: eq)...]))
    }

    /// A duration threshold's `METRIC.PERCENTILE` (push's and serve's), or the error naming the `tool`'s metrics
    /// and counts when the metric is none of them.
    static func metric(
        _ name: String, in text: String, tool: String, metrics: [String], counts: [String]
    ) throws(ComparisonError) -> (String, Comparison.Percentile) {
        let (metric, percentile) = try Comparison.splitPercentile(name, in: "threshold \"\(text)\"")
        guard metrics.contains(metric) else {
            throw ComparisonError(
                "threshold \"\(text)\": unknown metric \"\(metric)\" (\(tool): " + metrics.joined(separator: ", ")
                    + "; counts: " + counts.joined(separator: ", ") + ")")
        }
        return (metric, percentile)
    }

    /// A duration threshold's limit (`nanos`), or the error of threshold `text` that gave `value`.
    static func duration(_ value: String, in text: String) throws(ComparisonError) -> UInt64 {
        guard let nanos = Self.nanos(value) else {
            throw ComparisonError("threshold \"\(text)\": expected a duration like 50ms, 250us or 1.5s, got \(value)")
        }
        return nanos
    }

    /// A count's limit: `N` (a whole number, 0 or more) or `N%` (0 to 100); nil when it is neither. Every gate that
    /// bounds a count reads its limit here (push's and serve's thresholds, compare's bounds).
    static func countLimit(_ value: String) -> (count: Int?, percent: Double?)? {
        if value.hasSuffix("%"), let p = Double(value.dropLast()), p.isFinite, p >= 0, p <= 100 { return (nil, p) }
        if let n = Int(value), n >= 0 { return (n, nil) }
        return nil
    }

    /// `50ms`, `250us`, `250µs`, `1.5s`, `800ns` in nanoseconds (a unit is required).
    static func nanos(_ text: String) -> UInt64? {
        let units: [(String, Double)] = [("ns", 1), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)]
        for (unit, scale) in units where text.hasSuffix(unit) {
            guard let v = Double(text.dropLast(unit.count)), v.isFinite, v >= 0, v * scale < 1e18 else { return nil }
            return UInt64((v * scale).rounded())
        }
        return nil
    }

    /// The threshold judged on `r`: what was measured, and whether it is within the limit.
    public func judge(_ r: PushResults) -> PushThresholdResult {
        switch limit {
        case .duration(let metric, let percentile, let nanos):
            let h = Self.histogram(metric, r)
            let measured = percentile.value(LatencySummary(h))
            return PushThresholdResult(
                threshold: text, measured: h.isEmpty ? "no values" : Units.duration(measured),
                limit: "≤ " + Units.duration(nanos), met: !h.isEmpty && measured <= nanos,
                measuredValue: Int(measured))
        case .count(let name, let count, let percent):
            let n = Self.count(name, r)
            let bound = count ?? Int((Double(r.sent) * (percent ?? 0) / 100).rounded(.down))
            let share = String(format: "%g", percent ?? 0)
            let limitText =
                count.map { "≤ \(Units.grouped($0))" }
                ?? "≤ \(share)% of \(Units.grouped(r.sent)) sent (\(Units.grouped(bound)))"
            return PushThresholdResult(
                threshold: text, measured: Units.grouped(n), limit: limitText, met: n <= bound, measuredValue: n)
        }
    }

    static func count(_ name: String, _ r: PushResults) -> Int {
        switch name {
        case "failures": return r.failed
        case "unanswered": return r.unansweredAtEnd
        case "non200": return r.byStatus.filter { $0.key != 200 }.values.reduce(0, +)
        default:
            if name.hasPrefix("failures.") { return r.failures[String(name.dropFirst(9))] ?? 0 }
            if name.hasPrefix("status."), let code = Int(name.dropFirst(7)) { return r.byStatus[code] ?? 0 }
            return r.byReason[String(name.dropFirst(7))] ?? 0
        }
    }
}

/// One `--threshold` judged: the run's value and the limit, as text for the summary and the page.
public struct PushThresholdResult: Sendable, Equatable {
    public var threshold: String
    public var measured: String
    public var limit: String
    public var met: Bool
    /// Nanoseconds or a count.
    public var measuredValue: Int
}

/// The thresholds of a run judged, and the run's exit status with them.
public struct PushGate: Sendable {
    public var results: [PushThresholdResult]
    /// nil: judged; else why not (a saturated generator or an interrupted run: its numbers pass or fail nothing).
    /// A server-limited run is judged: its latency counts from the intended time, the server's waits included.
    public var notJudged: String?

    public init(_ thresholds: [PushThreshold], _ r: PushResults) {
        results = thresholds.map { $0.judge(r) }
        if r.interrupted {
            notJudged = "the run was interrupted (SIGINT or SIGTERM)"
        } else if r.saturated {
            notJudged = "the generator was saturated: numbers from an overloaded client pass or fail no gate"
        }
    }

    public var broken: [PushThresholdResult] { notJudged == nil ? results.filter { !$0.met } : [] }

    /// The exit status of a threshold broken (as `fanout compare`'s for a regression).
    public static let brokenExitCode: Int32 = 2

    /// The run's exit status, in this order: 1 a broken identity or every connection lost, 130 interrupted,
    /// 8 a barrier not met, 7 refused to start, 3 saturated, 2 a threshold broken, 0.
    public func exitCode(_ r: PushResults) -> Int32 {
        if !r.identityHolds || r.connectionsLost { return 1 }
        if r.interrupted { return PushReport.interruptedExitCode }
        if r.barrier?.timedOut != nil { return PushReport.barrierTimedOutExitCode }
        if r.startRefused != nil { return PushReport.startRefusedExitCode }
        if r.saturated { return PushReport.saturatedExitCode }
        return broken.isEmpty ? 0 : Self.brokenExitCode
    }
}
