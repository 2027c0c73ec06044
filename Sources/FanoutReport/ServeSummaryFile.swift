import FanoutMetrics
import Foundation

/// `summary.json` of `fanout serve` (`"kind": "serve"`) read back: the run's description, its counts and its
/// latency percentiles, what `fanout compare` needs.
public struct ServeSummaryFile: Sendable {
    /// `fanout serve`'s latency metrics, in report order (`ServeMetric`'s names; a test keeps them equal).
    public static let metricNames = ["service", "delivery", "fanout", "validate", "route", "endToEnd"]

    public var path: String
    public var scenario: String
    public var seed: UInt64
    public var workers: Int
    public var transport: String
    public var auth: String
    public var latency: [String: LatencySummary] = [:]
    /// Every count of the file, named by its path (`requests.byStatus.200`, `accounting.outcomes.applied`).
    public var counts: [String: Int] = [:]

    /// The order counts are shown in: requests, accounting, connections, then each metric's count.
    static let countOrder = [
        "requests.total", "requests.byStatus.", "requests.byReason.", "requests.acceptedPushes",
        "requests.acceptedBroadcasts", "requests.acceptedOtherPushTypes", "requests.channelRequests",
        "accounting.pushes", "accounting.rejected.", "accounting.unroutable.", "accounting.routed",
        "accounting.deliveries", "accounting.outcomes.", "connections.accepted", "latency.",
    ]

    static func parse(_ root: Fields, file: String) throws(ReportReadError) -> ServeSummaryFile {
        var s = ServeSummaryFile(
            path: file, scenario: try root.string("scenario"), seed: UInt64(try root.int("seed")),
            workers: try root.int("workers"), transport: try root.string("transport"), auth: try root.string("auth"))
        let requests = try root.object("requests")
        for key in ["total", "acceptedPushes", "acceptedBroadcasts", "acceptedOtherPushTypes", "channelRequests"] {
            s.counts["requests.\(key)"] = try requests.int(key)
        }
        for key in ["byStatus", "byReason"] {
            let o = try requests.object(key)
            for k in (o.value as? [String: Any] ?? [:]).keys { s.counts["requests.\(key).\(k)"] = try o.int(k) }
        }
        let accounting = try root.object("accounting")
        for key in ["pushes", "routed", "deliveries"] { s.counts["accounting.\(key)"] = try accounting.int(key) }
        for key in ["rejected", "unroutable", "outcomes"] {
            let o = try accounting.object(key)
            for k in (o.value as? [String: Any] ?? [:]).keys { s.counts["accounting.\(key).\(k)"] = try o.int(k) }
        }
        s.counts["connections.accepted"] = try root.object("connections").int("accepted")
        let latency = try root.object("latency")
        for name in metricNames {
            guard let m = try latency.optionalObject(name) else { continue }
            let max = UInt64(try m.int("maxNanos"))
            s.latency[name] = LatencySummary(
                count: UInt64(try m.int("count")), mean: try m.double("meanNanos"), p50: UInt64(try m.int("p50Nanos")),
                p90: UInt64(try m.int("p90Nanos")), p99: UInt64(try m.int("p99Nanos")),
                p999: UInt64(try m.int("p999Nanos")),
                // Folders written before p99.99 was: the maximum bounds it.
                p9999: UInt64(try m.optionalInt("p9999Nanos") ?? Int(max)), max: max)
            s.counts["latency.\(name).count"] = try m.int("count")
        }
        return s
    }
}

/// A run folder's `summary.json` read back: `fanout run`'s (schema 1) or `fanout serve`'s (kind serve).
public enum AnySummaryFile: Sendable {
    case run(SummaryFile)
    case serve(ServeSummaryFile)

    /// Reads `path`: a `summary.json` or a run folder holding one.
    public static func read(_ path: String) throws(ReportReadError) -> AnySummaryFile {
        let (file, object) = try SummaryFile.load(path)
        let root = Fields(file: file, path: "", value: object)
        if (object as? [String: Any])?["kind"] as? String == "serve" {
            return .serve(try ServeSummaryFile.parse(root, file: file))
        }
        return .run(try SummaryFile.parse(root, file: file))
    }
}

extension Comparison {
    /// Two `fanout serve` runs: every metric's percentiles judged against the thresholds; counts shown with
    /// their difference, not judged (they are the client's: equal when the same requests were sent).
    public init(baseline: ServeSummaryFile, current: ServeSummaryFile, thresholds: [Threshold]) {
        baselinePath = baseline.path
        currentPath = current.path
        countsExact = false
        var notes = ["fanout serve runs: counts depend on the requests the client sent; shown, not judged"]
        if baseline.scenario != current.scenario || baseline.seed != current.seed {
            notes.append(
                "populations differ (\(baseline.scenario) seed \(baseline.seed), "
                    + "\(current.scenario) seed \(current.seed))")
        }
        if baseline.workers != current.workers {
            notes.append("event loops differ (\(baseline.workers), \(current.workers))")
        }
        countsNote = notes.joined(separator: "; ")
        for name in ServeSummaryFile.metricNames {
            rows += Comparison.rows(name, baseline.latency[name], current.latency[name], thresholds: thresholds)
        }
        let names = Set(baseline.counts.keys).union(current.counts.keys)
        let ordered = names.sorted { a, b in
            let ra = ServeSummaryFile.countOrder.firstIndex { a.hasPrefix($0) } ?? Int.max
            let rb = ServeSummaryFile.countOrder.firstIndex { b.hasPrefix($0) } ?? Int.max
            return (ra, a) < (rb, b)
        }
        for name in ordered {
            counts.append(
                CountRow(
                    name: name, baseline: baseline.counts[name] ?? 0, current: current.counts[name] ?? 0,
                    verdict: .info))
        }
    }
}
