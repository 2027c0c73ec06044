import FanoutMetrics
import FanoutReport
import FanoutSim
import Foundation
import Testing

@testable import FanoutPlan

@Suite("Capacity plan on a scenario of known capacity", .serialized)
struct KneeTests {
    /// One broadcast source followed by all 50 devices, constant arrivals, 200 µs per delivery (far
    /// above what a delivery costs even in a debug build, so the cost alone sets the pace): one worker
    /// applies at most 1e9 / 200,000 = 5,000 deliveries/s, i.e. 100 events/s. Factor 1 is 60 events/s,
    /// so the capacity is at factor 1.667.
    static let scenario = """
        {
          "name": "known-capacity",
          "durationSeconds": 1,
          "population": {"devices": 50, "activitiesPerDevice": {"min": 1, "max": 1}},
          "apps": [{"bundle": "com.x", "schema": "S"}],
          "schemas": {"S": {"n": "int"}},
          "sources": {"count": 1, "broadcastShare": 1},
          "arrival": {"process": "constant", "ratePerSecond": 60},
          "costNanosPerDelivery": 200000
        }
        """

    static func settings(target: PlanTarget? = nil) throws -> PlanSettings {
        let s = try Scenario.parse(Array(scenario.utf8), file: "known-capacity.json")
        // A lenient latency objective: at this rate the knee is where the worker runs out of time
        // (the backlog grows, the run overruns its schedule), which the cost fixes at 1e9 / cost.
        var settings = PlanSettings(
            scenario: s, criteria: PlanCriteria(slos: [try SLO(parsing: "endToEnd.p99<=250ms")]),
            target: target, workerCounts: [1], coresPerMachine: 2)
        settings.stepSeconds = 1
        settings.maxStepSeconds = 1
        settings.criteria.maxScheduleLagNanos = 100_000_000
        settings.search.precision = 1.08
        // The steps run on the cost model (virtual time): the cost alone sets the capacity, on any machine
        // and under any load, so the search and its knee are the same on every run.
        settings.clock = .virtual
        return settings
    }

    @Test("saturation search on 1 worker finds the knee within 10% of 1e9 / cost deliveries/s")
    func knee() throws {
        let capacity = 1e9 / 200_000
        var lines: [String] = []
        let plan = try CapacityPlan.run(try Self.settings()) { lines.append($0) }
        let transcript = lines.joined(separator: "\n")
        #expect(plan.steadyScenario.clock == .virtual)
        let search = try #require(plan.searches.first)
        #expect(search.steps.count == lines.count - 1 && search.steps.count <= 12)
        // Every failure the search acted on was confirmed by a repeat (which, on the model, fails alike).
        for (k, step) in search.steps.enumerated() where !step.passed && !step.repeated {
            #expect(k + 1 < search.steps.count && search.steps[k + 1].repeated && !search.steps[k + 1].passed)
        }
        // Bracketed within the search's precision: a pass and a fail at most 1.08 apart, around the capacity.
        let knee = try #require(search.knee, "\(transcript)")
        let fail = try #require(search.firstFail, "\(transcript)")
        #expect(fail.factor / knee.factor <= 1.08 && fail.deliveriesPerSecond > capacity, "\(transcript)")
        #expect(
            abs(knee.deliveriesPerSecond - capacity) / capacity < 0.10,
            "knee \(knee.deliveriesPerSecond) deliveries/s\n\(transcript)")
        #expect(abs(knee.factor - 1.667) / 1.667 < 0.10)
        // The same search again: the same steps, verdict for verdict (nothing depends on the machine).
        let again = try CapacityPlan.run(try Self.settings()) { _ in }
        #expect(again.searches.first?.steps.map(\.factor) == search.steps.map(\.factor))
        #expect(again.searches.first?.knee?.deliveries == knee.deliveries)
        #expect(knee.identitiesHold && knee.deliveries == knee.events * 50)
        // One worker count: λ is the knee, σ and κ are fixed, and the report says so.
        let fit = try #require(plan.fit)
        #expect(fit.model.lambda == knee.deliveriesPerSecond && fit.underdetermined)
    }

    /// The real-time side of the same capacity, as a bound that holds on any machine: each delivery spins
    /// until it has paid its 200 µs, so a step offering twice the capacity cannot finish in its scheduled
    /// second and fails as behind schedule, however fast or loaded the machine. (A step below capacity
    /// passing is the part a stalled machine could break: the search above runs on the model instead.)
    @Test("real time: a step at twice the capacity takes at least its deliveries × cost and fails as behind schedule")
    func realTimeOverload() throws {
        var settings = try Self.settings()
        settings.clock = .real
        let (steady, base) = CapacityPlan.steady(settings.scenario, clock: .real)
        let step = try CapacityPlan.measure(settings, steady: steady, baseEventsPerSecond: base, workers: 1, factor: 2)
        #expect(step.identitiesHold && step.deliveries == step.events * 50 && step.events >= 100)
        #expect(step.lastCompletionSeconds >= Double(step.deliveries) * 200e-6)
        #expect(!step.passed && step.failures.contains { $0.hasPrefix("harness behind schedule") }, "\(step.failures)")
    }

    @Test("plan files: plan.json parses, plan.md and plan.html carry the knee, the fit and the prediction")
    func files() throws {
        // Reuse a synthetic set of searches (no real time): the report is about rendering.
        let settings = try Self.settings(target: try PlanTarget(parsing: "fanout=3000000 within=2s"))
        let plan = CapacityPlan.finish(
            settings, steady: settings.scenario, base: 60,
            searches: [Self.search(1, 100_000), Self.search(2, 180_000)],
            startedAt: Date(timeIntervalSince1970: 1_700_000_000), wallSeconds: 12.5)
        let files = PlanReport.files(plan)
        #expect(Set(files.keys) == ["plan.json", "plan.md", "plan.html"])
        let json = try JSONSerialization.jsonObject(with: Data(files["plan.json"]!.utf8)) as! [String: Any]
        let fit = json["fit"] as! [String: Any]
        #expect(abs((fit["sigma"] as! Double) - (2 * 100_000.0 / 180_000 - 1)) < 1e-9)
        #expect(fit["underdetermined"] as? Bool == true)
        let prediction = json["prediction"] as! [String: Any]
        #expect(prediction["requiredPerSecond"] as? Int == 1_500_000)
        #expect(prediction["extrapolated"] as? Bool == true || prediction["beyondPeak"] as? Bool == true)
        let md = files["plan.md"]!
        #expect(md.contains("# fanout plan: known-capacity") && md.contains("**Underdetermined:**"))
        #expect(md.contains("fanout=3000000 within=2s needs 1.5M deliveries/s"))
        let html = files["plan.html"]!
        #expect(html.contains("<svg") && html.contains("SLO endToEnd.p99&lt;=250ms") && !html.contains("<script"))
        #expect(html.contains("ceiling λ/σ = 900k/s (κ = 0)"))  // 2·100k/180k − 1 = σ = 1/9
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plan-\(UUID().uuidString)")
        try PlanReport.write(folder: dir.path, files: files)
        #expect(try String(contentsOf: dir.appendingPathComponent("plan.json"), encoding: .utf8) == files["plan.json"])
        try? FileManager.default.removeItem(at: dir)
    }

    /// A finished search at `workers` whose knee carries `deliveriesPerSecond`.
    static func search(_ workers: Int, _ deliveriesPerSecond: Double) -> WorkerSearch {
        func step(_ factor: Double, _ rate: Double, passed: Bool) -> Step {
            let little = LittleCheck.compute(
                intended: [1], completed: [2], recipients: [1], windowStartNanos: 0,
                windowEndNanos: 10)
            let summary = LatencySummary(
                count: 100, mean: 1e6, p50: 1_000_000, p90: 1_500_000, p99: 2_000_000,
                p999: 3_000_000, p9999: 3_000_000, max: 4_000_000)
            return Step(
                workers: workers, factor: factor, scheduledSeconds: 1, warmupSeconds: 0, wallSeconds: 1,
                lastCompletionSeconds: 1,
                events: Int(rate / 1000), measuredEvents: Int(rate / 1000), deliveries: Int(rate),
                sloValues: [passed ? 2_000_000 : 400_000_000], sloSamples: [100], endToEnd: summary,
                scheduleLag: summary, lossShare: 0, identitiesHold: true, little: little,
                failures: passed ? [] : ["endToEnd.p99 400 ms > 250 ms"], notes: [])
        }
        let outcome = SearchOutcome(lastPass: 2, firstFail: 2.1, steps: 2, conclusion: "knee between ×2 and ×2.1")
        return WorkerSearch(
            workers: workers,
            steps: [
                step(2, deliveriesPerSecond, passed: true),
                step(2.1, deliveriesPerSecond * 1.05, passed: false),
            ],
            outcome: outcome)
    }
}

@Suite("Prediction")
struct PredictionTests {
    @Test("inside the curve: the fewest workers reaching the requirement, the margin, machines, extrapolation")
    func scaleUp() throws {
        let fit = try #require(
            USLFit.fit(
                workers: [1, 2, 3, 4],
                throughput: [
                    USL(lambda: 500_000, sigma: 0.05, kappa: 0.001).throughput(1),
                    USL(lambda: 500_000, sigma: 0.05, kappa: 0.001).throughput(2),
                    USL(lambda: 500_000, sigma: 0.05, kappa: 0.001).throughput(3),
                    USL(lambda: 500_000, sigma: 0.05, kappa: 0.001).throughput(4),
                ]))
        let p = Prediction.make(
            fit: fit, target: try PlanTarget(parsing: "fanout=3000000 within=2s"),
            measuredWorkers: [1, 2, 3, 4], coresPerMachine: 2)
        // X(4) = 2M/1.162 = 1.72M ≥ 1.5M > X(3) = 1.5M/1.106 = 1.36M.
        #expect(p.workersNeeded == 4 && p.machines == 2 && !p.extrapolated && !p.beyondPeak)
        #expect(abs(p.margin! - (fit.model.throughput(4) / 1_500_000 - 1)) < 1e-12)
        let far = Prediction.make(
            fit: fit, target: try PlanTarget(parsing: "fanout=4000000 within=1s"),
            measuredWorkers: [1, 2, 3, 4], coresPerMachine: 2)
        #expect(far.extrapolated && far.workersNeeded! > 4 && far.notes.contains { $0.hasPrefix("extrapolated") })
    }

    @Test("beyond the USL peak: unreachable by scaling up, sharded across machines")
    func beyondPeak() throws {
        let model = USL(lambda: 500_000, sigma: 0.05, kappa: 0.02)  // N* = √(0.95/0.02) = 6.9
        let fit = try #require(
            USLFit.fit(
                workers: [1, 2, 3, 4, 6, 8],
                throughput: [1, 2, 3, 4, 6, 8].map {
                    model.throughput(Double($0))
                }))
        let p = Prediction.make(
            fit: fit, target: try PlanTarget(parsing: "fanout=10000000 within=1s"),
            measuredWorkers: [1, 2, 3, 4, 6, 8], coresPerMachine: 8)
        #expect(p.beyondPeak && p.workersNeeded == nil)
        #expect(p.shardWorkersPerMachine == 6)  // the best count up to ⌊N*⌋ and the 8 cores
        let perMachine = try #require(p.shardThroughputPerMachine)
        #expect(p.shardMachines == Int((10_000_000 / perMachine).rounded(.up)))
        #expect(p.notes.first!.contains("no number of workers in one pool reaches it"))
    }

    @Test("κ = 0 (two worker counts): the ceiling is λ/σ")
    func contentionCeiling() throws {
        let fit = try #require(USLFit.fit(workers: [1, 2], throughput: [600_000, 1_000_000]))  // σ = 0.2
        let reachable = Prediction.make(
            fit: fit, target: try PlanTarget(parsing: "fanout=2800000 within=2s"),
            measuredWorkers: [1, 2], coresPerMachine: 2)
        // 600k·N/(1 + 0.2(N−1)): X(3) = 1.29M < 1.4M ≤ X(4) = 1.5M.
        #expect(reachable.workersNeeded == 4 && reachable.machines == 2 && reachable.extrapolated)
        #expect(abs(reachable.margin! - (1.5 / 1.4 - 1)) < 1e-6)
        let ceiling = Prediction.make(
            fit: fit, target: try PlanTarget(parsing: "fanout=4000000 within=1s"),
            measuredWorkers: [1, 2], coresPerMachine: 2)
        #expect(ceiling.beyondPeak && ceiling.shardWorkersPerMachine == 2 && ceiling.shardMachines == 4)
    }
}
