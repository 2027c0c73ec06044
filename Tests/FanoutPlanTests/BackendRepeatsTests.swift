import FanoutMetrics
import FanoutReport
import Testing

@testable import FanoutPlan

/// A backend plan judges each rate on the median of its runs, names fanout's own trigger as the limit when it is,
/// and reports the knee as an interval.
@Suite("Backend plan: repeats, the median, harness-limited steps, the knee's interval")
struct BackendRepeatsTests {
    typealias B = BackendPlanTests

    static func run(endToEndP99 ms: UInt64, missing: Int = 0, lagP99 lag: UInt64 = 1_000_000) throws -> Step {
        var m = B.measures()
        m.counts[.missing] = missing
        var s = B.step(m, lagP99: lag, endToEndP99: ms * 1_000_000)
        s.judge(try B.criteria())
        return s
    }

    @Test("judged on the median: one lucky run does not pass a step, one unlucky run does not fail it")
    func median() throws {
        let c = try B.criteria()  // endToEnd.p99<=100ms, missing==0, staleAtEnd<=5
        let lucky = Step.median(of: [try Self.run(endToEndP99: 150), try Self.run(endToEndP99: 90),
                                     try Self.run(endToEndP99: 160)], criteria: c)
        #expect(!lucky.passed && lucky.sloValues == [150_000_000], "\(lucky.failures)")
        #expect(lucky.runs.map(\.passed) == [false, true, false] && lucky.runs.count == 3)
        let unlucky = Step.median(of: [try Self.run(endToEndP99: 80), try Self.run(endToEndP99: 400),
                                       try Self.run(endToEndP99: 95)], criteria: c)
        #expect(unlucky.passed && unlucky.sloValues == [95_000_000], "\(unlucky.failures)")
        // Counts too: a backend that loses pushes in most runs fails; one stray loss does not decide.
        let losing = Step.median(
            of: [try Self.run(endToEndP99: 50, missing: 3), try Self.run(endToEndP99: 50, missing: 5),
                 try Self.run(endToEndP99: 50)], criteria: c)
        #expect(!losing.passed && losing.backend?[.missing] == 3 && losing.failures.contains("missing 3 > 0"))
        let stray = Step.median(
            of: [try Self.run(endToEndP99: 50), try Self.run(endToEndP99: 50, missing: 1),
                 try Self.run(endToEndP99: 50)], criteria: c)
        #expect(stray.passed && stray.backend?[.missing] == 0)
    }

    @Test("fanout's own trigger behind, no event waiting for the backend: harness-limited; waiting: the backend's")
    func harnessLimited() throws {
        let c = try B.criteria()
        var m = B.measures()
        var s = B.step(m, lagP99: 200_000_000)
        s.judge(c)
        #expect(s.harnessLimited?.contains("fanout's trigger fell behind its schedule") == true)
        m.waitedForSlot = 12
        s = B.step(m, lagP99: 200_000_000)
        s.judge(c)
        #expect(s.harnessLimited == nil && !s.passed, "the backend answered too slowly: a failure, not a limit")
        m.waitedForSlot = 0
        m.triggerUnsent = 4
        s = B.step(m)
        s.judge(c)
        #expect(s.harnessLimited?.contains("left 4 events unsent") == true)
        // One limited run limits the step.
        let runs = [try Self.run(endToEndP99: 50), try Self.run(endToEndP99: 50, lagP99: 300_000_000),
                    try Self.run(endToEndP99: 50)]
        #expect(Step.median(of: runs, criteria: c).harnessLimited != nil)
    }

    @Test("the headline gives the knee as the interval to the first failing rate, with the spread of its runs")
    func headline() throws {
        let c = try B.criteria()
        var pass = Step.median(
            of: [try Self.run(endToEndP99: 60), try Self.run(endToEndP99: 80), try Self.run(endToEndP99: 70)],
            criteria: c)
        pass.factor = 2
        var fail = Step.median(
            of: [try Self.run(endToEndP99: 160), try Self.run(endToEndP99: 180), try Self.run(endToEndP99: 170)],
            criteria: c)
        fail.factor = 2.1
        let search = WorkerSearch(
            workers: 2, steps: [pass, fail],
            outcome: SearchOutcome(lastPass: 2, firstFail: 2.1, steps: 2, conclusion: "knee between ×2 and ×2.1"))
        var settings = try KneeTests.settings()
        settings.criteria = c
        settings.workerCounts = [2]
        settings.repeats = 3
        settings.backend = BackendSettings(
            executable: "fanout", triggerURL: "http://127.0.0.1:9/", registerURL: nil, serveArguments: [],
            folder: "/tmp/p")
        let plan = CapacityPlan(
            settings: settings, steadyScenario: settings.scenario, baseEventsPerSecond: 1, searches: [search],
            fit: nil, prediction: nil, startedAt: .init(), wallSeconds: 1, machine: MachineInfo.current)
        let line = PlanReport.backendHeadline(plan)
        #expect(line.contains("**Knee of the backend: between"), "\(line)")
        #expect(line.contains("(its 3 runs: 60 ms to 80 ms)") && line.contains("by the median of 3 runs"), "\(line)")
        let rows = PlanReport.stepRows(search)
        #expect(rows[0].last?.contains("median of 3 runs: pass, pass, pass") == true, "\(rows[0])")
    }
}
