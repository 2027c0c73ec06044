import FanoutMetrics
import FanoutReport
import Testing

@testable import FanoutPlan

@Suite("SLO and target text")
struct PlanInputTests {
    @Test(
        "SLOs parse: metric, percentile (both spellings), duration in every unit",
        arguments: [
            ("endToEnd.p99<=5ms", Metric.endToEnd, Comparison.Percentile.p99, UInt64(5_000_000)),
            (" fanoutCompletion.2-100.p99.9 <= 250us ", .fanoutCompletion2to100, .p999, 250_000),
            ("apply.max≤1.5µs", .apply, .max, 1500),
            ("fanoutCompletion.>10k.p999<=2s", .fanoutCompletionOver10k, .p999, 2_000_000_000),
            ("encode.p50<=800ns", .encode, .p50, 800),
            ("fanoutCompletion.over10k.p9999<=1.25s", .fanoutCompletionOver10k, .p9999, 1_250_000_000),
        ])
    func slos(text: String, metric: Metric, percentile: Comparison.Percentile, nanos: UInt64) throws {
        let slo = try SLO(parsing: text)
        #expect(slo == SLO(metric: metric, percentile: percentile, limitNanos: nanos))
        #expect(try SLO(parsing: slo.description) == slo)  // its description parses back
    }

    @Test(
        "bad SLOs say what is wrong",
        arguments: [
            ("endToEnd.p99<5ms", "expected METRIC.PERCENTILE<=DURATION"),
            ("endToEnd.p99<=5ms<=6ms", "expected METRIC.PERCENTILE<=DURATION"),
            ("endToEnd.p95<=5ms", "unknown percentile \"p95\""),
            ("endToEnd2.p99<=5ms", "unknown metric \"endToEnd2\""),
            ("endToEnd.p99<=5", "needs a unit"),
            ("endToEnd.p99<=5 min", "needs a unit"),
            ("endToEnd.p99<=-5ms", "expected a positive number before \"ms\""),
            ("endToEnd.p99<=0ms", "expected a positive number"),
            ("endToEnd.p99<=2h", "needs a unit"),
            ("endToEnd.p99<=5000s", "out of range"),
            ("*.p99<=5ms", "an SLO names one metric"),
            ("scheduleLag.p99<=1ms", "scheduleLag is the harness's own lag"),
            ("", "expected METRIC.PERCENTILE<=DURATION"),
        ])
    func badSLOs(text: String, message: String) {
        #expect {
            _ = try SLO(parsing: text)
        } throws: { error in
            "\(error)".contains(message) && "\(error)".hasPrefix("SLO \"\(text)\"")
        }
    }

    @Test("samples needed grow with the percentile: 10 / (1 − q)")
    func samples() throws {
        #expect(try SLO(parsing: "endToEnd.p99<=5ms").samplesNeeded == 1000)
        #expect(try SLO(parsing: "endToEnd.p99.9<=5ms").samplesNeeded == 10_000)
        #expect(try SLO(parsing: "endToEnd.max<=5ms").samplesNeeded == nil)
        let criteria = PlanCriteria(slos: [
            try SLO(parsing: "endToEnd.p99<=5ms"),
            try SLO(parsing: "fanoutCompletion.p99.9<=50ms"),
        ])
        #expect(criteria.samplesNeeded == 10_000)
    }

    @Test("targets parse; the required rate is fanout ÷ within")
    func targets() throws {
        let t = try PlanTarget(parsing: "fanout=3000000 within=2s")
        #expect(t == PlanTarget(fanout: 3_000_000, withinNanos: 2_000_000_000))
        #expect(t.requiredPerSecond == 1_500_000)
        #expect(try PlanTarget(parsing: "within=500ms, fanout=1e6").requiredPerSecond == 2_000_000)
        #expect(try PlanTarget(parsing: "fanout=3_000_000 within=2s").fanout == 3_000_000)
        #expect(try PlanTarget(parsing: t.description) == t)
    }

    @Test(
        "bad targets say what is wrong",
        arguments: [
            ("fanout=3000000", "expected fanout=N within=DURATION"),
            ("within=2s", "expected fanout=N within=DURATION"),
            ("fanout=abc within=2s", "fanout: expected a whole number of recipients"),
            ("fanout=2.5 within=2s", "fanout: expected a whole number of recipients"),
            ("fanout=0 within=2s", "fanout: expected a whole number of recipients"),
            ("fanout=100 within=2", "needs a unit"),
            ("fanout=100 within=2s speed=3", "unknown key \"speed\""),
            ("fanout 100", "expected fanout=N within=DURATION"),
            ("", "expected fanout=N within=DURATION"),
        ])
    func badTargets(text: String, message: String) {
        #expect {
            _ = try PlanTarget(parsing: text)
        } throws: { error in
            "\(error)".contains(message)
        }
    }

    @Test("compare's threshold parsing is unchanged by the shared metric/percentile split")
    func thresholds() throws {
        let t = try Comparison.Threshold(parsing: "fanoutCompletion.2-100.p99.9=+20%")
        #expect(t == Comparison.Threshold(metric: .fanoutCompletion2to100, percentile: .p999, percent: 20))
        #expect(try Comparison.Threshold(parsing: "*.p50=+5%").metric == nil)
    }
}
