import FanoutCore
import FanoutMetrics
@testable import FanoutReport
@testable import FanoutServe
import Foundation
import Testing

/// `fanout compare` of serve folders fails closed: what the baseline judged and the current run lacks is a failure
/// of its own (exit 5), an absolute bound judges the current run alone, the backend's refusals are gated, and a run
/// fanout's own trigger held up carries its limits for the command to refuse.
@Suite("fanout compare of serve runs fails closed")
struct ServeCompareFailClosedTests {
    typealias S = ServeCompareTests

    @Test("a baseline with --expect-events against a current run without: absent, exit 5, not a pass")
    func eventsAbsent() throws {
        let base = try S.read(try S.write(events: S.events(followers: 10, missing: 0)))
        let plain = try S.read(try S.write())
        let c = Comparison(baseline: base, current: plain, thresholds: Comparison.defaultThresholds)
        #expect(c.exitCode == Comparison.absentExitCode && c.absent == 1)
        #expect(c.counts.contains { $0.name == "events (--expect-events)" && $0.verdict == .absent })
        #expect(c.text(markdown: false).contains("ABSENT") && c.result.hasPrefix("absent"))
        // The other way round (the current run judged more than the baseline) is not absent.
        #expect(Comparison(baseline: plain, current: base, thresholds: Comparison.defaultThresholds).exitCode == 0)
    }

    @Test("an absolute bound: events.missing<=0.1% of the expected pairs breaks on the current run alone")
    func bound() throws {
        let base = try S.read(try S.write(events: S.events(followers: 1000, missing: 5)))
        let same = try S.read(try S.write(events: S.events(followers: 1000, missing: 5)))
        let relative = Comparison(baseline: base, current: same, thresholds: Comparison.defaultThresholds)
        #expect(relative.exitCode == 0, "no more missing than the baseline")
        let tight = try #require(try Comparison.CountBound(parsing: "events.missing<=0.1%"))
        let c = Comparison(baseline: base, current: same, thresholds: Comparison.defaultThresholds, bounds: [tight])
        #expect(c.exitCode == 2 && c.counts.first { $0.name == "events.missing" }?.verdict == .regression)
        let loose = try #require(try Comparison.CountBound(parsing: "events.missing<=1%"))
        #expect(
            Comparison(baseline: base, current: same, thresholds: Comparison.defaultThresholds, bounds: [loose])
                .exitCode == 0)
        #expect(try Comparison.CountBound(parsing: "events.missing=off") == nil)
        #expect(throws: ComparisonError.self) { try Comparison.CountBound(parsing: "events.delivered<=1") }
        #expect(throws: ComparisonError.self) { try Comparison.CountBound(parsing: "events.missing<=lots") }
    }

    @Test("more events the backend refused than the baseline: trigger.failures is gated")
    func triggerFailuresGated() throws {
        func trigger(_ failed: Int) -> TriggerResults {
            var t = TriggerResults()
            t.url = "http://127.0.0.1:1/t"
            t.sent = 100
            t.byStatus = [202: 100 - failed, 503: failed].filter { $0.value > 0 }
            return t
        }
        let base = try S.read(try S.write(trigger: trigger(0)))
        let worse = try S.read(try S.write(trigger: trigger(3)))
        #expect(worse.counts["trigger.failures"] == 3)
        let c = Comparison(baseline: base, current: worse, thresholds: Comparison.defaultThresholds)
        #expect(c.exitCode == 2 && c.counts.first { $0.name == "trigger.failures" }?.verdict == .regression)
        let off = try #require(try Comparison.ungatedCount(parsing: "trigger.failures=off"))
        #expect(
            Comparison(baseline: base, current: worse, thresholds: Comparison.defaultThresholds, ungated: [off])
                .exitCode == 0)
    }

    @Test("summary.json carries the run's flags and verdict; a run its trigger held up names the limit")
    func flagsAndHarness() throws {
        var (info, s, latency, a, c) = ServeReportTests.fixture()
        info.flags = ["settle": "2.0", "faults": "503=5%"]
        var t = TriggerResults()
        t.url = "http://127.0.0.1:1/t"
        t.sent = 10
        t.byStatus = [202: 10]
        t.unsentAtShutdown = 4
        info.trigger = t
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-cmp-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let text = try ServeReport.summaryJSON(info, s, latency, a, c, (1, 2), 3)
        try text.write(to: directory.appendingPathComponent("summary.json"), atomically: true, encoding: .utf8)
        let read = try S.read(directory.path)
        #expect(read.flags == ["settle": "2.0", "faults": "503=5%"])
        #expect(read.verdictStatus == "not judged")
        #expect(read.harnessLimits.first?.contains("left 4 due events unsent") == true)
        #expect(info.flagsHash.count == 16)
    }
}
