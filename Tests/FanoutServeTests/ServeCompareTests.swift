import FanoutCore
import FanoutMetrics
@testable import FanoutReport
@testable import FanoutAPNs
@testable import FanoutServe
import Foundation
import Testing

/// `fanout compare` of two serve folders: summary.json as ServeReport writes it, read back by FanoutReport.
@Suite("fanout compare of serve runs")
struct ServeCompareTests {
    /// Writes a summary.json of the golden fixture, `scale` times slower, with one more 200 when `extra`.
    static func write(
        scale: UInt64 = 1, extra: Bool = false, events: ServeEventsReport? = nil, trigger: TriggerResults? = nil,
        registration: RegisterResults? = nil
    ) throws -> String {
        var (info, s, _, a, c) = ServeReportTests.fixture()
        if extra { s.answered(200, nil) }
        info.events = events
        info.trigger = trigger
        info.registration = registration
        var latency = LatencyRecorder.serve()
        for v: UInt64 in [3_000, 4_000, 5_000, 9_000, 120_000] {
            latency.record(metricIndex: ServeMetric.service.rawValue, nanos: v * scale)
        }
        for v: UInt64 in [20_000, 30_000, 40_000] {
            latency.record(metricIndex: ServeMetric.delivery.rawValue, nanos: v)
        }
        info.workers = 1
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-cmp-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let text = try ServeReport.summaryJSON(info, s, latency, a, c, (1, 2), 3)
        try text.write(to: directory.appendingPathComponent("summary.json"), atomically: true, encoding: .utf8)
        return directory.path
    }

    static func read(_ path: String) throws -> ServeSummaryFile {
        guard case .serve(let s) = try AnySummaryFile.read(path) else {
            throw ReportReadError(file: path, "not read as a serve summary")
        }
        return s
    }

    @Test("two identical serve runs: every count shown equal, every percentile unchanged")
    func identical() throws {
        let a = try Self.read(try Self.write())
        let b = try Self.read(try Self.write())
        #expect(a.latency["service"]?.count == 5 && a.latency["service"]?.max == 120_063)
        #expect(a.counts["requests.total"] == 5 && a.counts["requests.byStatus.200"] == 3)
        #expect(a.counts["accounting.outcomes.applied"] == 2 && a.counts["latency.delivery.count"] == 3)
        let c = Comparison(baseline: a, current: b, thresholds: Comparison.defaultThresholds)
        #expect(c.exitCode == 0 && !c.countsExact)
        #expect(c.counts.count == a.counts.count && c.counts.allSatisfy { $0.baseline == $0.current })
        #expect(c.rows.filter { $0.metricName == "service" }.count == Comparison.Percentile.allCases.count)
        #expect(c.rows.allSatisfy { $0.deltaPercent == 0 && $0.metric == nil })
        let text = c.text(markdown: false)
        #expect(text.contains("requests.total") && text.contains("latency.service.count"))
    }

    /// `fanout plan --trigger` judges its steps from these counts (BackendStep.judgeFolder): read by the same reader
    /// as `fanout compare`, shown by compare.
    @Test("trigger and registration counts are read back by name and shown by compare")
    func triggerCounts() throws {
        var t = TriggerResults()
        t.sent = 40
        t.byStatus = [200: 30, 503: 4]
        t.timeouts = 2
        t.errors = ["Connection refused": 3]
        t.cancelledAtShutdown = 1
        t.waitedForSlot = 7
        var g = RegisterResults()
        g.activities = 12
        g.registered = 11
        g.failed = 1
        g.byStatus = [201: 11, 500: 3]
        let a = try Self.read(try Self.write(trigger: t, registration: g))
        #expect(a.counts["trigger.sent"] == 40 && a.counts["trigger.successes"] == 30)
        #expect(a.counts["trigger.byStatus.503"] == 4 && a.counts["trigger.timeouts"] == 2)
        #expect(a.counts["trigger.errors.Connection refused"] == 3 && a.counts["trigger.cancelledAtShutdown"] == 1)
        #expect(a.counts["trigger.waitedForSlot"] == 7 && a.counts["trigger.unsentAtShutdown"] == 0)
        #expect(a.counts["registration.activities"] == 12 && a.counts["registration.registered"] == 11)
        #expect(a.counts["registration.byStatus.500"] == 3 && a.counts["registration.failed"] == 1)
        let plain = try Self.read(try Self.write())
        #expect(!plain.counts.keys.contains { $0.hasPrefix("trigger.") || $0.hasPrefix("registration.") })
        let c = Comparison(baseline: plain, current: a, thresholds: Comparison.defaultThresholds)
        let text = c.text(markdown: false)
        #expect(text.contains("trigger.sent") && text.contains("registration.registered"))
    }

    @Test("a slower serve run is a regression of its metric; a different count is shown with its difference")
    func slower() throws {
        let a = try Self.read(try Self.write())
        let b = try Self.read(try Self.write(scale: 2, extra: true))
        let c = Comparison(baseline: a, current: b, thresholds: Comparison.defaultThresholds)
        #expect(c.exitCode == 2)
        #expect(c.rows.contains { $0.metricName == "service" && $0.percentile == .p50 && $0.verdict == .regression })
        #expect(!c.rows.contains { $0.metricName == "delivery" && $0.verdict == .regression })
        let total = try #require(c.counts.first { $0.name == "requests.total" })
        #expect(total.baseline == 5 && total.current == 6 && total.verdict == .info)
        // A threshold may name a serve metric.
        let loose = Comparison.defaultThresholds + [try Comparison.Threshold(parsing: "service.p50=+150%")]
        let d = Comparison(baseline: a, current: b, thresholds: loose)
        #expect(d.rows.first { $0.metricName == "service" && $0.percentile == .p50 }?.verdict == .ok)
    }

    /// Events judged over one event with `followers` followers: `missing` of them missed it, the rest got it
    /// (`reordered` of them got it again after it).
    static func events(followers: Int, missing: Int, reordered: Int = 0, broken: Bool = false) -> ServeEventsReport {
        var r = ServeEventsReport()
        r.events = 1
        r.dueEvents = 1
        r.expected = followers
        r.delivered = followers - missing
        r.reordered = reordered
        r.correlated = r.delivered + reordered
        r.missing = missing
        r.staleAtEnd = missing
        r.perEvent.due = [true]
        r.perEvent.delivered = [Int32(r.delivered)]
        r.perEvent.missing = [Int32(missing)]
        r.perEvent.superseded = [0]
        r.perEvent.duplicate = [0]
        r.perEvent.reordered = [Int32(reordered)]
        r.perEvent.skipped = [0]
        r.perEvent.notApplied = [0]
        if missing > 0 { r.missingByReason = [ServeEventsReport.neverPushed: missing] }
        // Freshness: every expected pair once, the missing ones censored (the identity since 939e36c).
        r.freshness.record(1_000_000, count: UInt64(followers))
        r.freshnessCensored = missing
        if broken { r.expected += 1 }
        return r
    }

    @Test("events in both runs: one more missing delivery is a regression (exit 2), fewer is not; a broken identity is")
    func missingGate() throws {
        let base = try Self.read(try Self.write(events: Self.events(followers: 10, missing: 1)))
        #expect(base.counts["events.missing"] == 1 && base.eventsIdentitiesHold == true)
        let same = try Self.read(try Self.write(events: Self.events(followers: 10, missing: 1)))
        #expect(Comparison(baseline: base, current: same, thresholds: Comparison.defaultThresholds).exitCode == 0)
        let worse = try Self.read(try Self.write(events: Self.events(followers: 10, missing: 2)))
        let c = Comparison(baseline: base, current: worse, thresholds: Comparison.defaultThresholds)
        #expect(c.exitCode == 2, "latency unchanged, one more delivery missing")
        #expect(c.counts.first { $0.name == "events.missing" }?.verdict == .regression)
        #expect(c.counts.first { $0.name == "events.staleAtEnd" }?.verdict == .regression)
        #expect(c.counts.first { $0.name == "events.delivered" }?.verdict == .info)
        let better = Comparison(baseline: worse, current: base, thresholds: Comparison.defaultThresholds)
        #expect(better.exitCode == 0 && better.counts.first { $0.name == "events.missing" }?.verdict == .ok)
        let broken = try Self.read(try Self.write(events: Self.events(followers: 10, missing: 1, broken: true)))
        #expect(broken.eventsIdentitiesHold == false)
        let d = Comparison(baseline: base, current: broken, thresholds: Comparison.defaultThresholds)
        #expect(d.exitCode == 2 && d.counts.contains { $0.name == "events.identitiesHold" })
        // Without events on one side, nothing is judged: the counts are shown.
        let plain = try Self.read(try Self.write())
        let e = Comparison(baseline: plain, current: worse, thresholds: Comparison.defaultThresholds)
        #expect(e.exitCode == 0 && e.counts.first { $0.name == "events.missing" }?.verdict == .info)
    }

    @Test("events.reordered=off: more reordered deliveries shown, not judged; missing still judged")
    func ungatedCount() throws {
        let base = try Self.read(try Self.write(events: Self.events(followers: 10, missing: 0, reordered: 3)))
        let more = try Self.read(try Self.write(events: Self.events(followers: 10, missing: 0, reordered: 7)))
        #expect(base.counts["events.reordered"] == 3 && base.eventsIdentitiesHold == true)
        let judged = Comparison(baseline: base, current: more, thresholds: Comparison.defaultThresholds)
        #expect(judged.exitCode == 2 && judged.counts.first { $0.name == "events.reordered" }?.verdict == .regression)
        let off = try #require(try Comparison.ungatedCount(parsing: "events.reordered=off"))
        #expect(off == "events.reordered")
        let c = Comparison(baseline: base, current: more, thresholds: Comparison.defaultThresholds, ungated: [off])
        #expect(c.exitCode == 0 && c.counts.first { $0.name == "events.reordered" }?.verdict == .info)
        #expect(c.countsNote.contains("not judged, as asked: events.reordered"))
        let missing = try Self.read(try Self.write(events: Self.events(followers: 10, missing: 1, reordered: 7)))
        let d = Comparison(baseline: base, current: missing, thresholds: Comparison.defaultThresholds, ungated: [off])
        #expect(d.exitCode == 2 && d.counts.first { $0.name == "events.missing" }?.verdict == .regression)
        #expect(try Comparison.ungatedCount(parsing: "endToEnd.p99=+5%") == nil)
        #expect(throws: ComparisonError.self) { try Comparison.ungatedCount(parsing: "events.reordered=+10%") }
        #expect(throws: ComparisonError.self) { try Comparison.ungatedCount(parsing: "events.delivered=off") }
        #expect(throws: ComparisonError.self) { try Comparison.ungatedCount(parsing: "events.missing") }
    }

    @Test("SummaryFile refuses a serve summary with a message naming it")
    func runReaderRefusesServe() throws {
        let path = try Self.write()
        #expect(throws: ReportReadError.self) { try SummaryFile.read(path) }
    }
}
