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
    /// The flags that change what the run measures (nil: a folder written before fanout recorded them) and the
    /// run's own verdict status (`passed`, `failed`, `not judged`, `no objectives`; nil: written before verdicts).
    public var flags: [String: String]?
    public var verdictStatus: String?
    /// Why fanout's own trigger held the run up (empty: it did not): `verdict.harnessLimits`, or for a folder written
    /// before verdicts, its trigger's unsent events and waits for a slot.
    public var harnessLimits: [String] = []

    /// The `events` counts a backend's CI gates on: more of any in the current run than in the baseline is a
    /// regression (a lost, late, doubled or out-of-order delivery is a bug, not noise).
    public static let gatedEventCounts = [
        "missing", "staleAtEnd", "uncorrelated", "duplicate", "reordered", "skipped", "wrongContent", "wrongKind",
        "sentToUnregistered", "sentAfterAppEvent", "kickoffNotStarted", "kickoffNotRegistered",
    ]
    /// The backend counts gated the same way when both runs have the section: events the backend did not accept
    /// (`trigger.failures`: non-2xx, timed out, failed), activities it never registered.
    public static let gatedBackendCounts = [
        "trigger.failures", "registration.failed", "registration.unregisteredAtDeadline",
    ]
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
        // Several instances (`--trigger A,B`): each URL's requests, 2xx and failures, shown, never judged (the totals
        // are; instances are named by their URLs, which may differ between two runs). One URL: no rows.
        for section in ["trigger", "registration"] {
            let o = (root.value as? [String: Any])?[section] as? [String: Any]
            guard let rows = o?["byURL"] as? [[String: Any]], rows.count > 1 else { continue }
            for row in rows {
                guard let url = row["url"] as? String else { continue }
                for key in ["sent", "successes", "failures"] {
                    if let n = row[key] as? Int { s.counts["\(section).byURL.\(url).\(key)"] = n }
                }
            }
        }
        if let t = try root.optionalObject("trigger") {
            s.counts["trigger.failures"] =
                try t.int("sent") - (try t.int("successes")) - (try t.int("cancelledAtShutdown"))
        }
        if let f = try root.optionalObject("flags") {
            var flags: [String: String] = [:]
            for key in (f.value as? [String: Any] ?? [:]).keys { flags[key] = try f.string(key) }
            s.flags = flags
        }
        if let v = try root.optionalObject("verdict") {
            s.verdictStatus = try v.string("status")
            s.harnessLimits = (v.value as? [String: Any])?["harnessLimits"] as? [String] ?? []
        }
        s.trigger = try root.optionalObject("trigger").map(Self.trigger)
        if s.verdictStatus == nil, let t = s.trigger, t.unsentAtShutdown > 0 || t.waitedForSlot > 0 {
            s.harnessLimits.append(
                "its trigger left \(t.unsentAtShutdown) events unsent and \(t.waitedForSlot) waited for a free slot")
        }
        s.registration = try root.optionalObject("registration").map(Self.registration)
        if let o = try root.optionalObject("events") {
            let events = try Self.events(o)
            for key in gatedEventCounts + shownEventCounts { s.counts["events.\(key)"] = events[key] }
            // The backend's reordering, the scenario's own out-of-order events apart (folders written before the
            // split: all of it); skipped pairs (folders before: none counted).
            if let byBackend = try o.optionalInt("reorderedByBackend") { s.counts["events.reordered"] = byBackend }
            s.counts["events.skipped"] = try o.optionalInt("skipped") ?? 0
            if let f = try o.optionalObject("freshness") {
                let max = UInt64(try f.int("maxNanos"))
                s.latency["freshness"] = LatencySummary(
                    count: UInt64(try f.int("count")), mean: try f.double("meanNanos"),
                    p50: UInt64(try f.int("p50Nanos")), p90: UInt64(try f.int("p90Nanos")),
                    p99: UInt64(try f.int("p99Nanos")), p999: UInt64(try f.int("p999Nanos")),
                    p9999: UInt64(try f.int("p9999Nanos")), max: max)
            }
            s.eventsIdentitiesHold = events.identityHolds
            s.events = events
        }
        let latency = try root.object("latency")
        for name in metricNames {
            guard try latency.optionalObject(name) != nil else { continue }
            let summary = try latency.percentiles(name)
            s.latency[name] = summary
            s.counts["latency.\(name).count"] = Int(summary.count)
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
        let backend = ServeSummaryFile.gatedBackendCounts.contains { text.hasPrefix($0 + "=") }
        guard text.hasPrefix("events.") || backend, !text.contains("<=") else { return nil }
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        if backend {
            guard parts.count == 2 && parts[1] == "off" else {
                throw ComparisonError("threshold \"\(text)\": expected \(parts[0])=off or \(parts[0])<=N or N%")
            }
            return parts[0]
        }
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
        baseline: ServeSummaryFile, current: ServeSummaryFile, thresholds: [Threshold], ungated: Set<String> = [],
        bounds: [CountBound] = []
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
        rows = Comparison.rows(
            ServeSummaryFile.metricNames + ["freshness"], baseline.latency, current.latency, thresholds: thresholds)
        let ordered = Comparison.countNames(baseline.counts, current.counts, order: ServeSummaryFile.countOrder)
        let gatedEvents = Set(ServeSummaryFile.gatedEventCounts.map { "events.\($0)" }).subtracting(ungated)
        let gatedBackend = Set(ServeSummaryFile.gatedBackendCounts).subtracting(ungated)
        let bounded = Dictionary(bounds.map { ($0.name, $0) }, uniquingKeysWith: { $1 })
        for name in ordered {
            let (b, c) = (baseline.counts[name] ?? 0, current.counts[name] ?? 0)
            // Events judged in both runs: more missing, stale, uncorrelated, doubled, reordered (the backend's) or
            // skipped deliveries than the baseline's is a regression, whatever the latency thresholds say; so are
            // more events the backend refused and activities it never registered.
            let judged =
                (gatedEvents.contains(name) && baseline.eventsIdentitiesHold != nil
                    && current.eventsIdentitiesHold != nil)
                || (gatedBackend.contains(name) && baseline.counts[name] != nil && current.counts[name] != nil)
            var verdict: Verdict = judged ? (c > b ? .regression : .ok) : .info
            // An absolute bound (`events.missing<=0.1%`) judges the current run on its own as well.
            if let bound = bounded[name] {
                let whole = current.counts[bound.wholeName] ?? 0
                verdict = bound.holds(c, of: whole) ? (verdict == .regression ? .regression : .ok) : .regression
            }
            counts.append(CountRow(name: name, baseline: b, current: c, verdict: verdict))
        }
        // Fails closed: what the baseline judged and the current run did not measure (no --expect-events, no
        // --trigger or --register) is absent, not a pass.
        for (section, inBaseline, inCurrent) in [
            ("events (--expect-events)", baseline.events != nil, current.events != nil),
            ("trigger (--trigger)", baseline.trigger != nil, current.trigger != nil),
            ("registration (--register)", baseline.registration != nil, current.registration != nil),
        ] where inBaseline && !inCurrent {
            counts.append(CountRow(name: section, baseline: 1, current: 0, verdict: .absent))
        }
        for bound in bounds where current.counts[bound.name] == nil {
            counts.append(
                CountRow(
                    name: bound.name, baseline: baseline.counts[bound.name] ?? 0, current: 0, verdict: .absent))
        }
        if current.eventsIdentitiesHold == false {
            counts.append(
                CountRow(
                    name: "events.identitiesHold", baseline: baseline.eventsIdentitiesHold == false ? 0 : 1,
                    current: 0, verdict: .regression))
        }
        if baseline.eventsIdentitiesHold != nil && current.eventsIdentitiesHold != nil {
            countsNote += "; events judged in both: more missing, stale at the end, uncorrelated, duplicate, "
                + "reordered, skipped or wrong (kind, content) deliveries, or pushes sent to unregistered tokens or "
                + "after an app event, than the baseline is a regression"
            if !ungated.isEmpty { countsNote += " (not judged, as asked: \(ungated.sorted().joined(separator: ", ")))" }
        }
    }
}

extension Comparison {
    /// `events.missing<=0.1%`, `events.skipped<=20`, `trigger.failures<=0`: an absolute bound on a count of the
    /// current `fanout serve` run (a share of its whole: the expected pairs, the events sent, the activities).
    public struct CountBound: Sendable, Equatable {
        public var name: String
        public var count: Int?
        public var percent: Double?

        /// The count a share is of.
        var wholeName: String {
            name.hasPrefix("events.")
                ? "events.expected" : name.hasPrefix("trigger.") ? "trigger.sent" : "registration.activities"
        }

        func holds(_ value: Int, of whole: Int) -> Bool {
            if let count { return value <= count }
            return Double(value) <= Double(whole) * (percent ?? 0) / 100
        }

        /// nil when `text` is not `NAME<=LIMIT`.
        public init?(parsing text: String) throws(ComparisonError) {
            guard let range = text.range(of: "<=") else { return nil }
            name = String(text[..<range.lowerBound])
            let value = String(text[range.upperBound...])
            let known = ServeSummaryFile.gatedEventCounts.map { "events.\($0)" } + ServeSummaryFile.gatedBackendCounts
            guard known.contains(name) else {
                throw ComparisonError(
                    "threshold \"\(text)\": unknown count \"\(name)\" (bounds of fanout serve runs: "
                        + known.joined(separator: ", ") + ")")
            }
            guard let limit = PushThreshold.countLimit(value) else {
                throw ComparisonError("threshold \"\(text)\": a bound is N (0 or more) or N%")
            }
            (count, percent) = limit
        }
    }
}
