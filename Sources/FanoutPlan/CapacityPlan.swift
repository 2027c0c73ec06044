import FanoutReport
import FanoutSim
import Foundation

/// Everything `fanout plan` needs to know.
public struct PlanSettings: Sendable {
    public var scenario: Scenario
    public var criteria: PlanCriteria
    public var target: PlanTarget?
    /// Shortest step, warm-up included (real time).
    public var stepSeconds: Double = 6
    /// Longest step: a step is lengthened to collect `criteria.samplesNeeded` events, up to this.
    public var maxStepSeconds: Double = 20
    /// A failing step is run again and fails only if the repeat fails too (with `repeats` 1).
    public var confirmFailures = true
    /// Runs of every step, judged on their median (`Step.median`): 3 for a backend plan by default, where healthy
    /// runs of one backend differ by 2× in endToEnd p99 and one lucky pass must not make the knee.
    public var repeats = 1
    /// The plan stops starting steps after this long (each worker count gets an equal share of what
    /// is left), so a noisy machine cannot make it run for ever.
    public var timeBudgetSeconds: Double = 480
    /// Worker counts to measure the knee at (1...cores by default).
    public var workerCounts: [Int]
    public var search = SearchSettings()
    /// Cores of the machine the plan runs on: "machines of this size".
    public var coresPerMachine: Int
    /// Real time (the default) measures this machine. Virtual time runs the steps on the scenario's cost
    /// model: a deterministic plan of the model (the same knee on any machine, as fast as the CPU allows).
    public var clock: Scenario.Clock = .real
    /// A plan of the user's backend (`--trigger`): each step a `fanout serve` run; one search (`workerCounts` holds
    /// the serve's event loops), no scaling fit.
    public var backend: BackendSettings?

    public init(
        scenario: Scenario, criteria: PlanCriteria, target: PlanTarget?, workerCounts: [Int],
        coresPerMachine: Int
    ) {
        self.scenario = scenario
        self.criteria = criteria
        self.target = target
        self.workerCounts = workerCounts
        self.coresPerMachine = coresPerMachine
    }

    /// Steps of 3 s or more discard their first second (one histogram-log interval) as warm-up.
    public var warmupSeconds: Double { stepSeconds >= 3 ? 1 : 0 }

    /// The length of a step at `eventsPerSecond`: at least `stepSeconds`, and long enough for
    /// `criteria.samplesNeeded` events after the warm-up, at most `maxStepSeconds`.
    public func stepDuration(eventsPerSecond: Double) -> Double {
        // 10% over the count: arrivals are random and the estimate of the rate is the offered one.
        let needed = Double(criteria.samplesNeeded) * 1.1
        let measured = max(stepSeconds - warmupSeconds, eventsPerSecond > 0 ? needed / eventsPerSecond : 0)
        return min(warmupSeconds + measured, max(maxStepSeconds, stepSeconds))
    }
}

/// The knee search at one worker count.
public struct WorkerSearch: Sendable {
    public var workers: Int
    public var steps: [Step]
    public var outcome: SearchOutcome

    /// The passing step at the highest factor.
    public var knee: Step? {
        guard let f = outcome.lastPass else { return nil }
        return steps.last { $0.factor == f && $0.passed }
    }

    public var firstFail: Step? {
        guard let f = outcome.firstFail else { return nil }
        return steps.last { $0.factor == f && !$0.passed }
    }
}

/// A capacity plan: the knee at each worker count, the USL through them, and what a target needs.
public struct CapacityPlan: Sendable {
    public var settings: PlanSettings
    /// The stationary scenario the steps run (see `steady`), at factor 1.
    public var steadyScenario: Scenario
    /// Source events per second at factor 1.
    public var baseEventsPerSecond: Double
    public var searches: [WorkerSearch]
    public var fit: USLFit?
    public var prediction: Prediction?
    public var startedAt: Date
    public var wallSeconds: Double
    public var machine: MachineInfo

    /// The measured (workers, knee deliveries/s) points the fit uses.
    public var points: [(workers: Int, deliveriesPerSecond: Double)] {
        searches.compactMap { s in s.knee.map { (s.workers, $0.deliveriesPerSecond) } }
    }

    /// The scenario made stationary for steps: one constant-rate phase at its time-averaged rate
    /// (so factor 1 offers the scenario's mean load), no bursts (transients, not a sustained rate),
    /// no source ends (they would thin the load during a step), on `clock` (real time unless the plan says
    /// otherwise). Everything else (population, fan-outs, faults, offline windows) is kept.
    public static func steady(
        _ scenario: Scenario, clock: Scenario.Clock = .real
    ) -> (scenario: Scenario, eventsPerSecond: Double) {
        var s = scenario
        let rate = meanRate(scenario)
        if var phase = s.arrival.phases.first {
            phase.atSeconds = 0
            phase.ratePerSecond = rate
            phase.rampToPerSecond = nil
            s.arrival.phases = [phase]
        }
        s.arrival.bursts = []
        s.lifecycle.endFractionMin = nil
        s.lifecycle.endFractionMax = nil
        s.clock = clock
        return (s, rate)
    }

    /// The time average of the arrival rate over the scenario's duration (phases and linear ramps).
    public static func meanRate(_ s: Scenario) -> Double {
        let phases = s.arrival.phases
        var area = 0.0
        for (k, phase) in phases.enumerated() where phase.atSeconds < s.durationSeconds {
            let end = min(k + 1 < phases.count ? phases[k + 1].atSeconds : s.durationSeconds, s.durationSeconds)
            let length = max(end - phase.atSeconds, 0)
            let to = phase.rampToPerSecond ?? phase.ratePerSecond
            area += (phase.ratePerSecond + to) / 2 * length
        }
        return s.durationSeconds > 0 ? area / s.durationSeconds : 0
    }

    /// Runs one step: the steady scenario × `factor` on `workers` workers (on the steady scenario's clock).
    public static func measure(
        _ settings: PlanSettings, steady: Scenario, baseEventsPerSecond: Double,
        workers: Int, factor: Double
    ) throws -> Step {
        var s = steady
        s.scaleRates(by: factor)
        s.durationSeconds = settings.stepDuration(eventsPerSecond: baseEventsPerSecond * factor)
        s.workers = workers
        let load = loadAverage()
        let result = try Simulation.run(s, workers: workers) { _ in }
        var step = try Step.evaluate(
            result, factor: factor, warmupSeconds: settings.warmupSeconds,
            criteria: settings.criteria)
        step.loadAverage = load
        return step
    }

    /// The 1-minute load average (Linux: /proc/loadavg).
    public static func loadAverage() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return nil }
        return text.split(separator: " ").first.flatMap { Double($0) }
    }

    /// The whole plan: a search per worker count (each starting at the previous knee), the fit, the
    /// prediction. `progress` gets a line per step.
    public static func run(_ settings: PlanSettings, progress: (String) -> Void) throws -> CapacityPlan {
        let startedAt = Date()
        let clock = ContinuousClock.now
        let (steady, base) = steady(settings.scenario, clock: settings.clock)
        guard base > 0 else { throw PlanInputError("scenario \(settings.scenario.name) has no arrival rate to scale") }
        var searches: [WorkerSearch] = []
        var search = settings.search
        var stepNumber = 0
        for (k, workers) in settings.workerCounts.enumerated() {
            var steps: [Step] = []
            // This worker count's share of the time left; a step is started only if it fits.
            let left = settings.timeBudgetSeconds - (ContinuousClock.now - clock).seconds
            let deadline = ContinuousClock.now + .seconds(max(left, 0) / Double(settings.workerCounts.count - k))
            let outcome = try SaturationSearch.run(
                search,
                proceed: {
                    let next = settings.stepDuration(eventsPerSecond: base * (steps.last?.factor ?? search.startFactor))
                    let settle = settings.backend?.settleSeconds ?? 0
                    return ContinuousClock.now + .seconds((next + settle + 1) * Double(max(settings.repeats, 1)))
                        <= deadline
                },
                halt: { steps.last?.harnessLimited }
            ) { factor in
                func measureStep() throws -> Step {
                    stepNumber += 1
                    if let backend = settings.backend {
                        return try Step.measureBackend(
                            settings, backend: backend, steady: steady, baseEventsPerSecond: base, factor: factor,
                            index: stepNumber)
                    }
                    return try measure(
                        settings, steady: steady, baseEventsPerSecond: base, workers: workers, factor: factor)
                }
                if settings.repeats > 1 {
                    var runs: [Step] = []
                    for k in 1...settings.repeats {
                        let run = try measureStep()
                        runs.append(run)
                        progress(
                            PlanText.progress(run, index: steps.count + 1, criteria: settings.criteria)
                                + " [run \(k) of \(settings.repeats)]")
                        if run.harnessLimited != nil { break }
                    }
                    let step = Step.median(of: runs, criteria: settings.criteria)
                    steps.append(step)
                    progress(
                        "  step \(steps.count) ×\(PlanText.factor(factor)), the median of \(runs.count) runs: "
                            + (step.harnessLimited.map { "harness-limited: \($0)" }
                                ?? (step.passed ? "pass" : "FAIL: " + step.failures.joined(separator: "; "))))
                    return step.passed
                }
                var step = try measureStep()
                steps.append(step)
                progress(PlanText.progress(step, index: steps.count, criteria: settings.criteria))
                if !step.passed && settings.confirmFailures && step.harnessLimited == nil {
                    // A failure counts only if a repeat fails too: one stall of a shared machine can
                    // fail a step, a rate above capacity fails every time.
                    step = try measureStep()
                    step.repeated = true
                    steps.append(step)
                    progress(PlanText.progress(step, index: steps.count, criteria: settings.criteria))
                }
                return step.passed
            }
            searches.append(WorkerSearch(workers: workers, steps: steps, outcome: outcome))
            progress(
                (settings.backend == nil ? "plan \(workers) worker\(workers == 1 ? "" : "s")" : "plan backend")
                    + ": \(outcome.conclusion)")
            if let knee = outcome.lastPass { search.startFactor = knee }
        }
        return finish(
            settings, steady: steady, base: base, searches: searches, startedAt: startedAt,
            wallSeconds: (ContinuousClock.now - clock).seconds)
    }

    /// The fit and the prediction from finished searches.
    public static func finish(
        _ settings: PlanSettings, steady: Scenario, base: Double, searches: [WorkerSearch],
        startedAt: Date, wallSeconds: Double
    ) -> CapacityPlan {
        var plan = CapacityPlan(
            settings: settings, steadyScenario: steady, baseEventsPerSecond: base, searches: searches, fit: nil,
            prediction: nil, startedAt: startedAt, wallSeconds: wallSeconds, machine: MachineInfo.current)
        // A backend's scaling is not fanout's to vary: no fit, no prediction.
        guard settings.backend == nil else { return plan }
        let points = plan.points
        plan.fit = USLFit.fit(
            workers: points.map { Double($0.workers) },
            throughput: points.map(\.deliveriesPerSecond))
        if let target = settings.target, let fit = plan.fit {
            plan.prediction = Prediction.make(
                fit: fit, target: target, measuredWorkers: points.map(\.workers),
                coresPerMachine: settings.coresPerMachine)
        }
        return plan
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) * 1e-18 }
}
