import FanoutCore
import FanoutMetrics
import Foundation
import Testing

@testable import FanoutReport

@Suite("fanout compare")
struct CompareTests {
    func summary(_ report: RunReport) throws -> SummaryFile {
        let dir = try Fixture.temporaryDirectory()
        let path = dir.appendingPathComponent("summary.json").path
        try SummaryJSON.text(report).write(toFile: path, atomically: true, encoding: .utf8)
        return try SummaryFile.read(path)
    }

    @Test("equal runs: every row ok, exit 0")
    func equal() throws {
        let c = Comparison(
            baseline: try summary(Fixture.report()), current: try summary(Fixture.report()),
            thresholds: Comparison.defaultThresholds)
        #expect(c.exitCode == 0 && c.result == "ok")
        #expect(c.countsExact)
        #expect(c.rows.allSatisfy { $0.verdict == .ok || $0.verdict == .info })
        #expect(c.rows.contains { $0.metric == .endToEnd && $0.percentile == .p999 && $0.verdict == .ok })
    }

    @Test("slower by 30%: a regression, exit 2; faster by 30%: only improvements, exit 4")
    func worseAndBetter() throws {
        let base = try summary(Fixture.report())
        let worse = Comparison(
            baseline: base, current: try summary(Fixture.report(scale: 1.3)),
            thresholds: Comparison.defaultThresholds)
        #expect(worse.exitCode == 2 && worse.result == "regression")
        let p50 = try #require(worse.rows.first { $0.metric == .apply && $0.percentile == .p50 })
        #expect(p50.verdict == .regression)
        #expect(abs((p50.deltaPercent ?? 0) - 30) < 1)
        let better = Comparison(
            baseline: base, current: try summary(Fixture.report(scale: 0.7)),
            thresholds: Comparison.defaultThresholds)
        #expect(better.exitCode == 4 && better.result == "improvement")
        #expect(better.regressions == 0 && better.improvements > 0)
    }

    @Test("a threshold for one metric replaces the default for it")
    func specificThreshold() throws {
        let base = try summary(Fixture.report())
        let worse = try summary(Fixture.report(scale: 1.3))
        let loose = try ["*.p50=+40%", "*.p90=+40%", "*.p99=+40%", "*.p99.9=+40%"].map(
            Comparison.Threshold.init(parsing:))
        #expect(Comparison(baseline: base, current: worse, thresholds: loose).exitCode == 0)
        // `off` silences one percentile of one metric.
        let silenced =
            loose + [try Comparison.Threshold(parsing: "apply.p50=+5%"), try .init(parsing: "apply.p50=off")]
        #expect(Comparison(baseline: base, current: worse, thresholds: silenced).exitCode == 0)
        let tight = loose + [try Comparison.Threshold(parsing: "endToEnd.p99=+5%")]
        let c = Comparison(baseline: base, current: worse, thresholds: tight)
        #expect(c.exitCode == 2)
        #expect(
            c.rows.filter { $0.verdict == .regression }.map { "\($0.metricName).\($0.percentile.rawValue)" }
                == ["endToEnd.p99"])
    }

    @Test("deterministic runs (virtual, same seed and config): a changed count is a regression")
    func countsExact() throws {
        var changed = Fixture.report()
        changed.accounting.outcomes[Outcome.applied.rawValue] -= 1
        changed.accounting.outcomes[Outcome.throttled.rawValue] += 1
        let c = Comparison(
            baseline: try summary(Fixture.report()), current: try summary(changed),
            thresholds: Comparison.defaultThresholds)
        #expect(c.countsExact && c.exitCode == 2)
        #expect(
            c.counts.filter { $0.verdict == .regression }.map(\.name) == ["outcomes.applied", "outcomes.throttled"])
        // Another seed: counts are shown, not judged.
        let other = Comparison(
            baseline: try summary(Fixture.report()), current: try summary(Fixture.report(seed: 9)),
            thresholds: Comparison.defaultThresholds)
        #expect(!other.countsExact && other.exitCode == 0 && other.countsNote.contains("seeds differ"))
        // Real time: never exact.
        let real = Comparison(
            baseline: try summary(Fixture.report(clock: "real")),
            current: try summary(Fixture.report(clock: "real")), thresholds: [])
        #expect(!real.countsExact)
    }

    @Test("thresholds: unknown metric or percentile is an error, spellings parse")
    func thresholdParsing() throws {
        #expect(throws: ComparisonError.self) { try Comparison.Threshold(parsing: "endToEnd.p42=+5%") }
        #expect(throws: ComparisonError.self) { try Comparison.Threshold(parsing: "latencies.p99=+5%") }
        // fanout push's metrics (push folders): latency and scheduleLag.
        #expect(try Comparison.Threshold(parsing: "latency.p99=+5%").metricName == "latency")
        #expect(throws: ComparisonError.self) { try Comparison.Threshold(parsing: "endToEnd.p99=5") }
        #expect(throws: ComparisonError.self) { try Comparison.Threshold(parsing: "endToEnd.p99") }
        #expect(throws: ComparisonError.self) { try Comparison.Threshold(parsing: "endToEnd.p99=-5%") }
        let t = try Comparison.Threshold(parsing: "fanoutCompletion.2-100.p99.9=+12.5%")
        #expect(t == Comparison.Threshold(metric: .fanoutCompletion2to100, percentile: .p999, percent: 12.5))
        #expect(try Comparison.Threshold(parsing: "endToEnd.p999=7%").percentile == .p999)
        #expect(try Comparison.Threshold(parsing: "*.max=+100%").metric == nil)
        #expect(try Comparison.Threshold(parsing: "endToEnd.p99=off").percent == .infinity)
        #expect(
            try Comparison.Threshold(parsing: "fanoutCompletion.over10k.p50=+1%").metric == .fanoutCompletionOver10k)
    }

    @Test("json and markdown output carry the verdicts")
    func formats() throws {
        let c = Comparison(
            baseline: try summary(Fixture.report()), current: try summary(Fixture.report(scale: 1.3)),
            thresholds: Comparison.defaultThresholds)
        let json = try JSONSerialization.jsonObject(with: Data(c.json().utf8)) as! [String: Any]
        #expect(json["result"] as? String == "regression")
        #expect(json["exitCode"] as? Int == 2)
        #expect((json["latency"] as? [[String: Any]])?.count == c.rows.count)
        let md = c.text(markdown: true)
        #expect(md.contains("| metric | percentile | baseline | current | delta | threshold | verdict |"))
        #expect(md.contains("REGRESSION"))
    }
}
