import FanoutSim
import Testing

@testable import FanoutPlan

@Suite("Saturation search")
struct SearchTests {
    @Test(
        "a step function of the factor: the knee is bracketed within the precision", arguments: [0.3, 1.0, 3.3, 77.0])
    func bracket(knee: Double) {
        var tried: [Double] = []
        var s = SearchSettings()
        s.precision = 1.05
        let outcome = SaturationSearch.run(s) { f in
            tried.append(f)
            return f <= knee
        }
        let pass = outcome.lastPass!
        let fail = outcome.firstFail!
        #expect(pass <= knee && fail > knee && fail / pass <= 1.05)
        #expect(outcome.steps == tried.count && tried.first == 1)
        #expect(outcome.conclusion.hasPrefix("knee between"))
    }

    @Test("every step passes: the knee is a lower bound at maxFactor; none passes: no knee")
    func edges() {
        var s = SearchSettings()
        s.maxFactor = 16
        let all = SaturationSearch.run(s) { _ in true }
        #expect(all.lastPass == 16 && all.firstFail == nil && all.steps == 5)  // 1, 2, 4, 8, 16
        #expect(all.conclusion.contains("lower bound"))
        let none = SaturationSearch.run(s) { _ in false }
        #expect(none.lastPass == nil && none.firstFail == s.minFactor && none.steps == 5)  // 1 ... 1/16
    }

    @Test("the step budget bounds the search")
    func budget() {
        var s = SearchSettings()
        s.maxSteps = 4
        s.precision = 1.0001
        let outcome = SaturationSearch.run(s) { $0 <= 5 }
        #expect(outcome.steps == 4 && outcome.lastPass == 4 && outcome.firstFail == 8)
        #expect(outcome.conclusion.hasPrefix("stopped after 4 steps"))
    }

    @Test("out of time: the search stops before a step that would not fit, and says so")
    func outOfTime() {
        var budget = 3
        let outcome = SaturationSearch.run(
            SearchSettings(),
            proceed: {
                budget -= 1
                return budget >= 0
            }
        ) { $0 <= 5 }
        #expect(outcome.steps == 3 && outcome.lastPass == 4 && outcome.firstFail == nil)
        #expect(outcome.conclusion.hasSuffix("(stopped: out of time)"))
    }

    @Test("a scenario's mean rate integrates phases and ramps; steady keeps it, drops bursts and ends")
    func steady() throws {
        let d = try #require(BuiltinScenarios.named("default"))
        // 200/s for 20 s, then 200 → 400 over 10 s: (4000 + 3000) / 30.
        #expect(abs(CapacityPlan.meanRate(d) - 7000.0 / 30) < 1e-9)
        let (s, rate) = CapacityPlan.steady(d)
        #expect(rate == CapacityPlan.meanRate(d))
        #expect(s.arrival.phases.count == 1 && s.arrival.phases[0].ratePerSecond == rate)
        #expect(s.arrival.bursts.isEmpty && s.lifecycle.endFractionMin == nil && s.clock == .real)
        #expect(s.population == d.population && s.faults == d.faults)
    }

    @Test("step length: at least --step-seconds, longer for enough events, at most the cap")
    func stepLength() throws {
        var settings = PlanSettings(
            scenario: try #require(BuiltinScenarios.named("default")),
            criteria: PlanCriteria(slos: [try SLO(parsing: "endToEnd.p99<=5ms")]), target: nil, workerCounts: [1],
            coresPerMachine: 2)
        #expect(settings.warmupSeconds == 1)
        #expect(settings.stepDuration(eventsPerSecond: 10_000) == 6)  // 1,100 events take 0.11 s
        #expect(abs(settings.stepDuration(eventsPerSecond: 100) - 12) < 1e-9)  // 1 + 1.1 × 1,000 / 100
        #expect(settings.stepDuration(eventsPerSecond: 10) == 20)  // capped
        settings.stepSeconds = 1
        settings.maxStepSeconds = 1
        #expect(settings.warmupSeconds == 0 && settings.stepDuration(eventsPerSecond: 10) == 1)
    }
}

@Suite("Saturation search: harness-limited")
struct SearchHaltTests {
    @Test("a step the harness could not run ends the search: neither pass nor fail, the bracket before it kept")
    func halted() {
        var s = SearchSettings()
        s.maxFactor = 64
        var last = 0.0
        let outcome = SaturationSearch.run(s, halt: { last >= 8 ? "trigger behind" : nil }) { f in
            last = f
            return true
        }
        #expect(outcome.lastPass == 4 && outcome.firstFail == nil && outcome.steps == 4)  // 1, 2, 4, 8 (halted)
        #expect(outcome.halted == "trigger behind")
        #expect(outcome.conclusion.contains("harness-limited at ×8: trigger behind"), "\(outcome.conclusion)")
        let first = SaturationSearch.run(s, halt: { "trigger behind" }) { _ in false }
        #expect(first.lastPass == nil && first.firstFail == nil && first.steps == 1)
        #expect(first.conclusion.hasPrefix("no step judged"))
    }
}
