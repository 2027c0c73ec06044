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
    /// With `--expect-events`: whether the events' identities held (nil: no `events` section).
    public var eventsIdentitiesHold: Bool?
    /// `trigger` (`--trigger`), `registration` (`--register`) and `events` (`--expect-events`) as typed values (nil:
    /// the section is not in the file).
    public var trigger: ServeTriggerSummary?
    public var registration: ServeRegistrationSummary?
    public var events: ServeEventsSummary?

    /// The `events` counts a backend's CI gates on: more of any in the current run than in the baseline is a
    /// regression (a lost, late, doubled or out-of-order delivery is a bug, not noise).
    public static let gatedEventCounts = ["missing", "staleAtEnd", "uncorrelated", "duplicate", "reordered"]
    /// The other `events` counts, shown.
    static let shownEventCounts = [
        "events", "dueEvents", "expected", "delivered", "superseded", "correlated", "early",
    ]

    /// The order counts are shown in: requests, accounting, connections, then each metric's count.
    static let countOrder = [
        "requests.total", "requests.byStatus.", "requests.byReason.", "requests.acceptedPushes",
        "requests.acceptedBroadcasts", "requests.acceptedOtherPushTypes", "requests.channelRequests",
        "accounting.pushes", "accounting.rejected.", "accounting.unroutable.", "accounting.routed",
        "accounting.deliveries", "accounting.outcomes.", "connections.accepted", "trigger.", "registration.",
        "events.", "latency.",
    ]

    /// `trigger` (with `--trigger`) and `registration` (with `--register`): their counts, named
    /// `trigger.sent`, `trigger.byStatus.503`, `registration.registered`, ….
    static let triggerCounts = [
        "sent", "successes", "timeouts", "cancelledAtShutdown", "unsentAtShutdown", "waitedForSlot",
    ]
    static let registrationCounts = [
        "activities", "registered", "failed", "unregisteredAtDeadline", "requests", "retries", "timeouts",
    ]

    /// Reads `path`: a `fanout serve` folder or its `summary.json` (anything else is an error).
    public static func read(_ path: String) throws(ReportReadError) -> ServeSummaryFile {
        let (file, object) = try SummaryFile.load(path)
        guard (object as? [String: Any])?["kind"] as? String == "serve" else {
            throw ReportReadError(file: file, "not the summary of a fanout serve run (no \"kind\": \"serve\")")
        }
        return try parse(Fields(file: file, path: "", value: object), file: file)
    }

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
        for (section, keys) in [("trigger", triggerCounts), ("registration", registrationCounts)] {
            guard let o = try root.optionalObject(section) else { continue }
            for key in keys { s.counts["\(section).\(key)"] = try o.int(key) }
            for key in ["byStatus", "errors"] {
                for (k, n) in try o.counts(key) { s.counts["\(section).\(key).\(k)"] = n }
            }
        }
        s.trigger = try root.optionalObject("trigger").map(Self.trigger)
        s.registration = try root.optionalObject("registration").map(Self.registration)
        if let o = try root.optionalObject("events") {
            let events = try Self.events(o)
            for key in gatedEventCounts + shownEventCounts { s.counts["events.\(key)"] = events[key] }
            s.eventsIdentitiesHold = events.identityHolds
            s.events = events
        }
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

/// A run folder's `summary.json` read back: `fanout run`'s (schema 1), `fanout serve`'s (kind serve) or
/// `fanout push`'s (tool fanout push).
public enum AnySummaryFile: Sendable {
    case run(SummaryFile)
    case serve(ServeSummaryFile)
    case push(PushSummaryFile)

    /// What wrote it, as a person names it.
    public var tool: String {
        switch self {
        case .run: "fanout run"
        case .serve: "fanout serve"
        case .push: "fanout push"
        }
    }

    /// Reads `path`: a `summary.json` or a run folder holding one.
    public static func read(_ path: String) throws(ReportReadError) -> AnySummaryFile {
        let (file, object) = try SummaryFile.load(path)
        let root = Fields(file: file, path: "", value: object)
        if (object as? [String: Any])?["kind"] as? String == "serve" {
            return .serve(try ServeSummaryFile.parse(root, file: file))
        }
        if (object as? [String: Any])?["tool"] as? String == "fanout push" {
            return .push(try PushSummaryFile.parse(root, file: file))
        }
        return .run(try SummaryFile.parse(root, file: file))
    }
}

extension Comparison {
    /// `events.COUNT=off` (COUNT one of `ServeSummaryFile.gatedEventCounts`): that count of two `fanout serve` runs
    /// shown, not judged; returns `events.COUNT`. nil when `text` does not start with `events.` (a latency
    /// threshold, then). A gated count takes no percentage: more than the baseline is a regression, or it is off.
    public static func ungatedCount(parsing text: String) throws(ComparisonError) -> String? {
        guard text.hasPrefix("events.") else { return nil }
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        let count = String(parts[0].dropFirst("events.".count))
        guard ServeSummaryFile.gatedEventCounts.contains(count) else {
            throw ComparisonError(
                "threshold \"\(text)\": unknown count \"\(parts[0])\" (judged counts of fanout serve runs: "
                    + ServeSummaryFile.gatedEventCounts.map { "events.\($0)" }.joined(separator: ", ") + ")")
        }
        guard parts.count == 2 && parts[1] == "off" else {
            throw ComparisonError(
                "threshold \"\(text)\": a count is judged (more than the baseline is a regression) or not: "
                    + "expected \(parts[0])=off")
        }
        return parts[0]
    }

    /// Two `fanout serve` runs: every metric's percentiles judged against the thresholds; counts shown with
    /// their difference, not judged (they are the client's: equal when the same requests were sent), except the
    /// events' gated counts when both runs judged events, each unless `ungated` names it (`events.reordered`).
    public init(
        baseline: ServeSummaryFile, current: ServeSummaryFile, thresholds: [Threshold], ungated: Set<String> = []
    ) {
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
        let gated = Set(ServeSummaryFile.gatedEventCounts.map { "events.\($0)" }).subtracting(ungated)
        for name in ordered {
            let (b, c) = (baseline.counts[name] ?? 0, current.counts[name] ?? 0)
            // Events judged in both runs: more missing, stale, uncorrelated, doubled or reordered deliveries than
            // the baseline's is a regression, whatever the latency thresholds say.
            let judged = gated.contains(name) && baseline.eventsIdentitiesHold != nil
                && current.eventsIdentitiesHold != nil
            counts.append(
                CountRow(name: name, baseline: b, current: c, verdict: judged ? (c > b ? .regression : .ok) : .info))
        }
        if current.eventsIdentitiesHold == false {
            counts.append(
                CountRow(
                    name: "events.identitiesHold", baseline: baseline.eventsIdentitiesHold == false ? 0 : 1,
                    current: 0, verdict: .regression))
        }
        if baseline.eventsIdentitiesHold != nil && current.eventsIdentitiesHold != nil {
            countsNote += "; events judged in both: more missing, stale at the end, uncorrelated, duplicate or "
                + "reordered deliveries than the baseline is a regression"
            if !ungated.isEmpty { countsNote += " (not judged, as asked: \(ungated.sorted().joined(separator: ", ")))" }
        }
    }
}
