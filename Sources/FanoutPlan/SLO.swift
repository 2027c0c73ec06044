import FanoutMetrics
import FanoutReport

/// Text given to `fanout plan` that cannot be used: what was given, what was expected.
public struct PlanInputError: Error, CustomStringConvertible, Equatable, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A latency objective: `METRIC.PERCENTILE<=DURATION`, e.g. `endToEnd.p99<=5ms`. Metrics and
/// percentiles are those of `fanout compare` (`Comparison.metricAndPercentile`).
public struct SLO: Sendable, Equatable, CustomStringConvertible {
    public var metric: Metric
    public var percentile: Comparison.Percentile
    public var limitNanos: UInt64

    public init(metric: Metric, percentile: Comparison.Percentile, limitNanos: UInt64) {
        self.metric = metric
        self.percentile = percentile
        self.limitNanos = limitNanos
    }

    /// Parses `METRIC.PERCENTILE<=DURATION` (`≤` also accepted; units ns, us, µs, ms, s).
    public init(parsing text: String) throws(PlanInputError) {
        let trimmed = text.trimmingSpaces
        let parts: [Substring]
        if trimmed.contains("<=") {
            parts = trimmed.split(separator: "<=", omittingEmptySubsequences: false)
        } else {
            parts = trimmed.split(separator: "≤", omittingEmptySubsequences: false)
        }
        let expected = "expected METRIC.PERCENTILE<=DURATION, like endToEnd.p99<=5ms"
        guard parts.count == 2 else { throw PlanInputError("SLO \"\(text)\": \(expected)") }
        let name = String(parts[0]).trimmingSpaces
        let context = "SLO \"\(text)\""
        let split: (Metric?, Comparison.Percentile)
        do {
            split = try Comparison.metricAndPercentile(name, in: context)
        } catch {
            throw PlanInputError(error.description)
        }
        guard let metric = split.0 else {
            throw PlanInputError("\(context): an SLO names one metric (\"*\" is for thresholds of fanout compare)")
        }
        guard metric != .scheduleLag else {
            throw PlanInputError(
                "\(context): scheduleLag is the harness's own lag, not a service level "
                    + "(use --max-schedule-lag)")
        }
        let limit = try Self.duration(String(parts[1]).trimmingSpaces, in: context)
        self.init(metric: metric, percentile: split.1, limitNanos: limit)
    }

    /// `5ms`, `250 us`, `1.5s` → nanoseconds (more than 0).
    public static func duration(_ text: String, in context: String) throws(PlanInputError) -> UInt64 {
        let units: [(String, Double)] = [("ns", 1), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)]
        guard let (unit, scale) = units.first(where: { text.hasSuffix($0.0) }) else {
            throw PlanInputError("\(context): duration \"\(text)\" needs a unit (ns, us, µs, ms or s), like 5ms")
        }
        let number = String(text.dropLast(unit.count)).trimmingSpaces
        guard let value = Double(number), value.isFinite, value > 0 else {
            throw PlanInputError("\(context): expected a positive number before \"\(unit)\", got \"\(number)\"")
        }
        let nanos = (value * scale).rounded()
        guard nanos >= 1, nanos <= 3.6e12 else {
            throw PlanInputError("\(context): \(text) is out of range (1 ns to 1 hour)")
        }
        return UInt64(nanos)
    }

    /// The value this objective reads from a histogram summary.
    public func value(_ summary: LatencySummary) -> UInt64 { percentile.value(summary) }

    public func met(by value: UInt64) -> Bool { value <= limitNanos }

    /// How many independent samples make the percentile a stable estimate: about ten beyond it,
    /// 10 / (1 − q) (p99: 1,000; p99.9: 10,000). nil for max (one sample decides it).
    public var samplesNeeded: Int? {
        switch percentile {
        case .p50: 20
        case .p90: 100
        case .p99: 1_000
        case .p999: 10_000
        case .p9999: 100_000
        case .max: nil
        }
    }

    public var name: String { "\(metric.name).\(percentile.rawValue)" }

    public var description: String {
        "\(name)<=\(PlanText.duration(limitNanos).replacingOccurrences(of: " ", with: ""))"
    }
}

/// A fan-out that must complete in time: `fanout=3000000 within=2s` needs fanout / within
/// deliveries per second while the SLOs hold.
public struct PlanTarget: Sendable, Equatable, CustomStringConvertible {
    public var fanout: Int
    public var withinNanos: UInt64

    public init(fanout: Int, withinNanos: UInt64) {
        self.fanout = fanout
        self.withinNanos = withinNanos
    }

    /// Parses `fanout=N within=DURATION` (in any order, separated by spaces or commas).
    public init(parsing text: String) throws(PlanInputError) {
        let context = "target \"\(text)\""
        let expected = "expected fanout=N within=DURATION, like \"fanout=3000000 within=2s\""
        var fanout: Int?
        var within: UInt64?
        let words = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\t" })
        guard !words.isEmpty else { throw PlanInputError("\(context): \(expected)") }
        for word in words {
            let pair = word.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2 else { throw PlanInputError("\(context): \"\(word)\": \(expected)") }
            let value = String(pair[1])
            switch pair[0] {
            case "fanout":
                guard let v = Double(value.replacingOccurrences(of: "_", with: "")), v.isFinite, v >= 1,
                    v <= 1e12, v == v.rounded()
                else {
                    throw PlanInputError(
                        "\(context): fanout: expected a whole number of recipients ≥ 1, got \"\(value)\"")
                }
                fanout = Int(v)
            case "within":
                within = try SLO.duration(value, in: "\(context): within")
            default:
                throw PlanInputError("\(context): unknown key \"\(pair[0])\" (\(expected))")
            }
        }
        guard let fanout, let within else { throw PlanInputError("\(context): \(expected)") }
        self.init(fanout: fanout, withinNanos: within)
    }

    /// Deliveries per second the target needs.
    public var requiredPerSecond: Double { Double(fanout) / (Double(withinNanos) / 1e9) }

    public var description: String {
        "fanout=\(fanout) within=\(PlanText.duration(withinNanos).replacingOccurrences(of: " ", with: ""))"
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" { s.removeLast() }
        return String(s)
    }
}
