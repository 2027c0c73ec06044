import FanoutMetrics
import Foundation
import Testing

@testable import FanoutPlan

@Suite("A plan of the user's backend: count objectives and how a step is judged")
struct BackendPlanTests {
    @Test(
        "count objectives: ==0, <=N, <=P% of the expected deliveries; anything else refused with what is expected",
        arguments: [
            ("missing==0", CountObjective(name: .missing, limit: 0)),
            ("staleAtEnd <= 10", CountObjective(name: .staleAtEnd, limit: 10)),
            ("missing<=0.1%", CountObjective(name: .missing, limit: 0.001, share: true)),
            ("duplicate≤2", CountObjective(name: .duplicate, limit: 2)),
        ])
    func parse(text: String, expected: CountObjective) throws {
        let o = try CountObjective(parsing: text)
        #expect(o == expected)
        #expect(CountObjective.names(text))
        #expect(try CountObjective(parsing: o.description) == o)
    }

    @Test(
        "bad count objectives",
        arguments: [
            ("missing<0", "expected COUNT==N"), ("lost==0", "expected COUNT==N"), ("missing==1", "== takes 0 only"),
            ("missing<=1.5", "a whole count"), ("missing<=101%", "a percentage from 0% to 100%"),
            ("missing<=-1", "a whole count"),
        ])
    func bad(text: String, message: String) {
        #expect(throws: PlanInputError.self) { try CountObjective(parsing: text) }
        do {
            _ = try CountObjective(parsing: text)
        } catch {
            #expect(error.description.contains(message), "\(error)")
        }
    }

    @Test("latency objectives are not count objectives")
    func names() {
        #expect(!CountObjective.names("endToEnd.p99<=2s"))
        #expect(!CountObjective.names("fanoutCompletion.p99<=2s"))
    }

    @Test("a share is of the expected deliveries: 1 of 1,000 meets 0.1%, 2 do not")
    func share() {
        let o = CountObjective(name: .missing, limit: 0.001, share: true)
        #expect(o.met(count: 1, expected: 1000))
        #expect(!o.met(count: 2, expected: 1000))
        #expect(CountObjective(name: .missing, limit: 0).met(count: 0, expected: 0))
    }

    static func step(_ m: BackendMeasures, lagP99: UInt64 = 1_000_000, endToEndP99: UInt64 = 50_000_000) -> Step {
        let lag = LatencySummary(
            count: 10, mean: 1, p50: 1, p90: 1, p99: lagP99, p999: lagP99, p9999: lagP99, max: lagP99)
        let e2e = LatencySummary(
            count: 10, mean: 1, p50: 1, p90: 1, p99: endToEndP99, p999: endToEndP99, p9999: endToEndP99,
            max: endToEndP99)
        var s = Step(
            workers: 2, factor: 1, scheduledSeconds: 6, warmupSeconds: 1, wallSeconds: 9,
            // Finished long after the schedule (a backend's latency): not a failure of a backend step.
            lastCompletionSeconds: 60, events: 100, measuredEvents: 80, deliveries: 1000,
            sloValues: [endToEndP99], sloSamples: [10], endToEnd: e2e, scheduleLag: lag, lossShare: 0,
            identitiesHold: true,
            little: LittleCheck.compute(
                intended: [1], completed: [2], recipients: [1], windowStartNanos: 0, windowEndNanos: 10),
            failures: [], notes: [])
        s.backend = m
        return s
    }

    static func criteria() throws -> PlanCriteria {
        var c = PlanCriteria(slos: [try SLO(parsing: "endToEnd.p99<=100ms")], maxScheduleLagNanos: 100_000_000)
        c.counts = [try CountObjective(parsing: "missing==0"), try CountObjective(parsing: "staleAtEnd<=5")]
        return c
    }

    static func measures() -> BackendMeasures {
        var m = BackendMeasures(folder: "steps/01-x1/run", exitStatus: 0)
        m.triggerSent = 100
        m.triggerSucceeded = 100
        m.expected = 1000
        m.delivered = 1000
        m.activities = 50
        m.registered = 50
        return m
    }

    @Test("a healthy step passes, however late its last delivery (the run engine's achieved-rate rule is not applied)")
    func healthy() throws {
        var s = Self.step(Self.measures())
        s.judge(try Self.criteria())
        #expect(s.passed, "\(s.failures)")
    }

    @Test("each way a backend breaks is named: missing, stale, refused triggers, registration, serve's exit")
    func failures() throws {
        let c = try Self.criteria()
        var m = Self.measures()
        m.counts[.missing] = 3
        m.counts[.staleAtEnd] = 6
        m.triggerSucceeded = 90
        m.triggerRefusedByStatus = ["503": 7]
        m.triggerTimeouts = 2
        m.triggerErrors = 1
        m.triggerUnsent = 4
        m.registered = 48
        var s = Self.step(m, endToEndP99: 150_000_000)
        s.judge(c)
        #expect(
            s.failures == [
                "endToEnd.p99 150 ms > 100 ms", "missing 3 > 0", "staleAtEnd 6 > 5",
                "backend refused events: 10 of 100 triggers not accepted (7 answered 503, 2 timed out, 1 failed)",
                "trigger behind at shutdown: 4 events unsent, 0 requests cancelled",
                "registration: 2 of 50 activities not registered",
            ], "\(s.failures)")
    }

    @Test("trigger lag above the bound: the backend's slowness when events waited for a slot, else fanout's own")
    func lag() throws {
        let c = try Self.criteria()
        var m = Self.measures()
        var s = Self.step(m, lagP99: 200_000_000)
        s.judge(c)
        #expect(s.failures == ["trigger behind schedule: scheduleLag.p99 200 ms > 100 ms (fanout's own trigger loop)"])
        m.waitedForSlot = 12
        s = Self.step(m, lagP99: 200_000_000)
        s.judge(c)
        #expect(s.failures.count == 1 && s.failures[0].contains("12 events waited for a free --trigger-concurrency"))
    }

    @Test("a serve that exited non-zero or broke an identity fails the step with its message")
    func serveFailed() throws {
        var m = Self.measures()
        m.exitStatus = 1
        m.serveError = "Error: accounting identities are broken"
        m.eventsIdentitiesHold = false
        var s = Self.step(m)
        s.judge(try Self.criteria())
        #expect(
            s.failures == [
                "fanout serve exited 1: Error: accounting identities are broken", "the events' identities are broken",
            ])
    }

    @Test("the drain after a step has no trigger: its flags (--trigger-spread, --trigger-max-lag) are left out")
    func drainArguments() {
        let step = [
            "--workers", "2", "--trigger-spread", "round-robin", "--trigger-max-lag=500", "--trigger-concurrency", "8",
            "--h2c",
        ]
        #expect(Step.drainArguments(step) == ["--workers", "2", "--h2c"])
    }
}
