import FanoutMetrics
import FanoutReport
import FanoutSim
import Foundation

/// The files of a plan folder: plan.json, plan.md, plan.html.
public enum PlanReport {
    public static let lossDefinition =
        "Loss = (rejected pushes + unroutable pushes + expired deliveries) / "
        + "(rejected pushes + unroutable pushes + deliveries): of every attempt to reach a device (a delivery "
        + "to a routed recipient, or a push that was never routed), the share that did not reach it"

    public static func files(_ plan: CapacityPlan) -> [String: String] {
        ["plan.json": json(plan).text, "plan.md": markdown(plan), "plan.html": PlanHTML.text(plan)]
    }

    /// Writes the files into `folder` (created if needed): each to a temporary name, renamed into
    /// place; plan.json, which marks a complete folder, last.
    public static func write(folder: String, files: [String: String]) throws {
        try RunFiles.write(folder: folder, files: files, last: "plan.json")
    }

    /// The worker count whose knee carries the most deliveries/s.
    public static func bestKnee(_ plan: CapacityPlan) -> (workers: Int, step: Step)? {
        plan.searches.compactMap { s in s.knee.map { (s.workers, $0) } }
            .max { $0.1.deliveriesPerSecond < $1.1.deliveriesPerSecond }
    }

    /// Caveats that hold for the whole plan.
    public static func notes(_ plan: CapacityPlan) -> [String] {
        if plan.settings.backend != nil { return backendNotes(plan) }
        var notes: [String] = []
        let cores = plan.machine.cores
        notes.append(
            "Measured on \(cores) core\(cores == 1 ? "" : "s") (\(plan.machine.cpu)) shared with other "
                + "processes: every step is one real-time sample and the machine is noisy. A step failed by noise only "
                + "moves the knee down (the search is conservative); the knee is known to within the bracket shown.")
        if let fit = plan.fit, fit.underdetermined {
            notes.append(
                "Scaling was measured at \(fit.distinctWorkers) worker count"
                    + "\(fit.distinctWorkers == 1 ? "" : "s"): \(fit.note). The USL needs at least 3 worker counts "
                    + "(better 5 or more, on a machine with that many idle cores) to separate contention from "
                    + "coherency; here κ is an assumption, not a measurement.")
        }
        if plan.settings.workerCounts.contains(where: { $0 >= cores }) {
            notes.append(
                "At \(cores) workers every core runs a worker, so the coordinator thread, the OS and other "
                    + "processes take time from them: the top point understates what dedicated cores would do.")
        }
        for w in plan.searches where w.knee == nil {
            guard let lowest = w.steps.min(by: { $0.factor < $1.factor }) else { continue }
            let load = lowest.loadAverage.map { ", load average \(PlanText.fixed($0, 1)) on \(cores) cores" } ?? ""
            notes.append(
                "With \(w.workers) worker\(w.workers == 1 ? "" : "s") no rate passed: even at "
                    + "×\(PlanText.factor(lowest.factor)) (\(PlanText.rate(lowest.offeredEventsPerSecond)) events/s) "
                    + "scheduleLag.p99 was \(PlanText.duration(lowest.scheduleLag.p99)) and the harness could not keep "
                    + "its own schedule\(load). That is the machine's floor, not the system's capacity: plan on an idle "
                    + "machine, or with an SLO above that floor.")
        }
        notes.append(
            "Loss does not depend on load in this harness: verdicts and outcomes are decided on the "
                + "virtual clock of each event's intended time, so --max-loss checks the scenario's injected faults "
                + "(same at every rate), not capacity.")
        return notes
    }

    /// A backend plan's caveats.
    static func backendNotes(_ plan: CapacityPlan) -> [String] {
        let cores = plan.machine.cores
        var notes = [
            "Measured on \(cores) core\(cores == 1 ? "" : "s") (\(plan.machine.cpu)) shared by fanout serve, the "
                + "backend and anything else running: every step is one real-time sample of both. A step failed by "
                + "noise only moves the knee down (the search is conservative); the knee is known to within the "
                + "bracket shown. On one machine fanout's own work (the devices, the trigger) takes cores from the "
                + "backend: a backend on machines of its own holds more.",
            "endToEnd and the other latency objectives are read from each step's latency.hlog after the warm-up; "
                + "missing, stale and the trigger's counts cover the whole step (a delivery missing is missing "
                + "whenever its event was intended); fanoutCompletion objectives come from the whole step too.",
        ]
        if let search = plan.searches.first, search.knee == nil, let lowest = search.steps.min(by: {
            $0.factor < $1.factor
        }) {
            notes.append(
                "No rate passed, down to ×\(PlanText.factor(lowest.factor)) "
                    + "(\(PlanText.rate(lowest.offeredEventsPerSecond)) events/s): "
                    + lowest.failures.joined(separator: "; ") + ". Look at that step's run folder ("
                    + (lowest.backend?.folder ?? "steps/") + ") before planning again.")
        }
        return notes
    }

    // MARK: JSON

    public static func json(_ plan: CapacityPlan) -> JSONValue {
        let s = plan.settings
        let c = s.criteria
        var root: [(String, JSONValue)] = [("schema", .int(1))]
        root.append(
            (
                "plan",
                .object([
                    ("tool", .string("fanout")), ("version", .string(RunInfo.toolVersion)),
                    ("scenario", .string(s.scenario.name)), ("seed", .int(Int(s.scenario.seed))),
                    ("configHash", .string(s.scenario.configHash)),
                    ("steadyConfigHash", .string(plan.steadyScenario.configHash)),
                    ("startedAt", .string(iso(plan.startedAt))), ("wallSeconds", .number(round3(plan.wallSeconds))),
                    (
                        "machine",
                        .object([
                            ("cores", .int(plan.machine.cores)), ("cpu", .string(plan.machine.cpu)),
                            ("os", .string(plan.machine.os)),
                        ])
                    ),
                ])
            ))
        root.append(
            (
                "method",
                .object([
                    ("baseEventsPerSecond", .number(round3(plan.baseEventsPerSecond))),
                    ("steady", .string(steadyText(plan.steadyScenario.clock))),
                    ("stepSeconds", .number(s.stepSeconds)), ("warmupSeconds", .number(s.warmupSeconds)),
                    ("maxStepSeconds", .number(s.maxStepSeconds)), ("samplesNeeded", .int(c.samplesNeeded)),
                    ("stepRule", .string(stepRule(plan))),
                    ("workerCounts", .array(s.workerCounts.map { .int($0) })),
                    (
                        "search",
                        .object([
                            ("startFactor", .number(s.search.startFactor)), ("growth", .number(s.search.growth)),
                            ("minFactor", .number(s.search.minFactor)), ("maxFactor", .number(s.search.maxFactor)),
                            ("precision", .number(s.search.precision)), ("maxSteps", .int(s.search.maxSteps)),
                            ("confirmFailures", .bool(s.confirmFailures)),
                            ("timeBudgetSeconds", .number(s.timeBudgetSeconds)),
                        ])
                    ),
                ])
            ))
        root.append(
            (
                "criteria",
                .object([
                    (
                        "slos",
                        .array(
                            c.slos.map { slo in
                                .object([
                                    ("text", .string(slo.description)), ("metric", .string(slo.metric.name)),
                                    ("percentile", .string(slo.percentile.rawValue)),
                                    ("limitNanos", .int(Int(slo.limitNanos))),
                                ])
                            })
                    ),
                    ("maxLoss", .optional(c.maxLoss)), ("lossDefinition", .string(lossDefinition)),
                    ("counts", .array(c.counts.map { .string($0.description) })),
                    ("maxScheduleLagNanos", .int(Int(c.maxScheduleLagNanos))),
                    ("minAchievedRatio", .number(c.minAchievedRatio)),
                    ("target", .optional(s.target?.description)),
                ])
            ))
        if let b = s.backend {
            root.append(
                (
                    "backend",
                    .object([
                        ("trigger", .string(b.triggerURL)), ("register", .optional(b.registerURL)),
                        ("settleSeconds", .number(b.settleSeconds)), ("cooldownSeconds", .number(b.cooldownSeconds)),
                        ("quietSeconds", .number(b.quietSeconds)),
                        ("serveArguments", .array(b.serveArguments.map { .string($0) })),
                    ])
                ))
        }
        root.append(("searches", .array(plan.searches.map { search(json: $0, criteria: c) })))
        if let best = bestKnee(plan) {
            root.append(
                (
                    "knee",
                    .object([
                        ("workers", .int(best.workers)), ("factor", .number(round6(best.step.factor))),
                        ("eventsPerSecond", .number(round3(best.step.offeredEventsPerSecond))),
                        ("deliveriesPerSecond", .number(best.step.deliveriesPerSecond.rounded())),
                    ])
                ))
        } else {
            root.append(("knee", .null))
        }
        root.append(("fit", plan.fit.map(fit(json:)) ?? .null))
        root.append(("prediction", plan.prediction.map(prediction(json:)) ?? .null))
        root.append(("notes", .array(notes(plan).map { .string($0) })))
        return .object(root)
    }

    static func search(json w: WorkerSearch, criteria c: PlanCriteria) -> JSONValue {
        .object([
            ("workers", .int(w.workers)), ("conclusion", .string(w.outcome.conclusion)),
            ("kneeFactor", .optional(w.outcome.lastPass.map(round6))),
            ("firstFailFactor", .optional(w.outcome.firstFail.map(round6))),
            ("kneeEventsPerSecond", .optional(w.knee.map { round3($0.offeredEventsPerSecond) })),
            ("kneeDeliveriesPerSecond", .optional(w.knee.map { $0.deliveriesPerSecond.rounded() })),
            ("firstFailEventsPerSecond", .optional(w.firstFail.map { round3($0.offeredEventsPerSecond) })),
            ("harnessLimited", .optional(w.outcome.halted)),
            ("steps", .array(w.steps.map { step(json: $0, criteria: c) })),
        ])
    }

    static func step(json s: Step, criteria c: PlanCriteria) -> JSONValue {
        .object([
            ("factor", .number(round6(s.factor))), ("scheduledSeconds", .number(round3(s.scheduledSeconds))),
            ("warmupSeconds", .number(s.warmupSeconds)), ("wallSeconds", .number(round3(s.wallSeconds))),
            ("lastCompletionSeconds", .number(round6(s.lastCompletionSeconds))), ("events", .int(s.events)),
            ("measuredEvents", .int(s.measuredEvents)),
            ("offeredEventsPerSecond", .number(round3(s.offeredEventsPerSecond))),
            ("deliveries", .int(s.deliveries)), ("deliveriesPerSecond", .number(s.deliveriesPerSecond.rounded())),
            ("achievedRatio", .number(round6(s.achievedRatio))),
            (
                "slos",
                .array(
                    c.slos.enumerated().map { k, slo in
                        .object([
                            ("slo", .string(slo.description)), ("valueNanos", .int(Int(s.sloValues[k]))),
                            ("samples", .int(Int(s.sloSamples[k]))), ("met", .bool(slo.met(by: s.sloValues[k]))),
                        ])
                    })
            ),
            ("endToEnd", summary(json: s.endToEnd)), ("scheduleLag", summary(json: s.scheduleLag)),
            ("lossShare", .number(round6(s.lossShare))), ("identitiesHold", .bool(s.identitiesHold)),
            (
                "little",
                .object([
                    ("windowStartNanos", .int(Int(s.little.windowStartNanos))),
                    ("windowEndNanos", .int(Int(s.little.windowEndNanos))),
                    ("inFlight", .number(round6(s.little.inFlight))),
                    ("throughputPerSecond", .number(round3(s.little.throughputPerSecond))),
                    ("meanLatencySeconds", .number(s.little.meanLatencySeconds)),
                    ("predictedInFlight", .number(round6(s.little.predictedInFlight))),
                    ("relativeDifference", .number(round6(s.little.relativeDifference))),
                    ("holds", .bool(s.little.holds)),
                ])
            ),
            ("backend", s.backend.map(backend(json:)) ?? .null),
            ("loadAverage", .optional(s.loadAverage)), ("repeated", .bool(s.repeated)),
            ("harnessLimited", .optional(s.harnessLimited)),
            (
                "runs",
                .array(
                    s.runs.map { r in
                        .object([
                            ("folder", .optional(r.folder)), ("passed", .bool(r.passed)),
                            ("failures", .array(r.failures.map { .string($0) })),
                            ("sloValuesNanos", .array(r.sloValues.map { .int(Int($0)) })),
                            ("endToEndP99Nanos", .int(Int(r.endToEndP99))), ("harnessLimited", .optional(r.harnessLimited)),
                        ])
                    })
            ),
            ("passed", .bool(s.passed)), ("failures", .array(s.failures.map { .string($0) })),
            ("notes", .array(s.notes.map { .string($0) })),
        ])
    }

    static func backend(json b: BackendMeasures) -> JSONValue {
        .object([
            ("folder", .string(b.folder)), ("exitStatus", .int(Int(b.exitStatus))),
            ("serveError", .optional(b.serveError)),
            (
                "trigger",
                .object([
                    ("sent", .int(b.triggerSent)), ("succeeded", .int(b.triggerSucceeded)),
                    (
                        "refusedByStatus",
                        .object(b.triggerRefusedByStatus.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })
                    ),
                    ("timeouts", .int(b.triggerTimeouts)), ("errors", .int(b.triggerErrors)),
                    ("cancelledAtShutdown", .int(b.triggerCancelled)), ("unsentAtShutdown", .int(b.triggerUnsent)),
                    ("waitedForSlot", .int(b.waitedForSlot)),
                ])
            ),
            ("activities", .optional(b.activities)), ("registered", .optional(b.registered)),
            ("expected", .int(b.expected)), ("delivered", .int(b.delivered)), ("superseded", .int(b.superseded)),
            ("counts", .object(CountObjective.Name.allCases.map { ($0.rawValue, .int(b[$0])) })),
            ("eventsIdentitiesHold", .bool(b.eventsIdentitiesHold)), ("early", .int(b.early)),
            (
                "drain",
                .object([
                    ("requests", .int(b.drainedRequests)), ("seconds", .number(round3(b.drainSeconds))),
                    ("quiet", .bool(b.drainQuiet)),
                ])
            ),
        ])
    }

    static func summary(json l: LatencySummary) -> JSONValue {
        .object([
            ("count", .int(Int(l.count))), ("mean", .number(l.mean.rounded())), ("p50", .int(Int(l.p50))),
            ("p90", .int(Int(l.p90))), ("p99", .int(Int(l.p99))), ("p999", .int(Int(l.p999))),
            ("max", .int(Int(l.max))),
        ])
    }

    static func fit(json f: USLFit) -> JSONValue {
        .object([
            ("model", .string("X(N) = λN / (1 + σ(N−1) + κN(N−1)), X in deliveries/s at the knee")),
            ("lambda", .number(f.model.lambda.rounded())), ("sigma", .number(f.model.sigma)),
            ("kappa", .number(f.model.kappa)), ("rSquared", .optional(f.rSquared)),
            ("relativeRMS", .number(f.relativeRMS)), ("points", .int(f.points)),
            ("distinctWorkers", .int(f.distinctWorkers)), ("freeParameters", .int(f.freeParameters)),
            ("underdetermined", .bool(f.underdetermined)), ("note", .string(f.note)),
            ("peakWorkers", .optional(f.model.peakWorkers)),
            ("maxThroughput", .optional(f.model.maxThroughput.map { $0.rounded() })),
            ("limitedBy", .string(f.model.dominantTerm(at: Double(max(f.distinctWorkers, 2))))),
        ])
    }

    static func prediction(json p: Prediction) -> JSONValue {
        .object([
            ("target", .string(p.target.description)), ("requiredPerSecond", .number(p.requiredPerSecond.rounded())),
            ("coresPerMachine", .int(p.coresPerMachine)), ("workersNeeded", .optional(p.workersNeeded)),
            ("throughputAtNeeded", .optional(p.throughputAtNeeded.map { $0.rounded() })),
            ("margin", .optional(p.margin.map(round6))), ("machines", .optional(p.machines)),
            ("extrapolated", .bool(p.extrapolated)), ("beyondPeak", .bool(p.beyondPeak)),
            ("shardWorkersPerMachine", .optional(p.shardWorkersPerMachine)),
            ("shardThroughputPerMachine", .optional(p.shardThroughputPerMachine.map { $0.rounded() })),
            ("shardMachines", .optional(p.shardMachines)),
            ("notes", .array(p.notes.map { .string($0) })),
        ])
    }

    static func round3(_ v: Double) -> Double { (v * 1000).rounded() / 1000 }
    static func round6(_ v: Double) -> Double { (v * 1e6).rounded() / 1e6 }

    static func iso(_ d: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: d)
    }

    static func steadyText(_ clock: Scenario.Clock) -> String {
        "one constant-rate phase at the scenario's time-averaged rate × factor; no bursts, no source ends; "
            + (clock == .real ? "real time" : "virtual time (the scenario's cost model, not this machine)")
            + "; population, fan-outs and faults as in the scenario"
    }

    static func stepRule(_ plan: CapacityPlan) -> String {
        let s = plan.settings
        let warm =
            s.warmupSeconds > 0
            ? "the first \(PlanText.trimmed(s.warmupSeconds, digits: 0)) s is warm-up and discarded, "
            : "no warm-up is discarded (steps under 3 s), "
        return "a step lasts at least \(PlanText.trimmed(s.stepSeconds, digits: 2)) s: " + warm
            + "and it is lengthened until at least \(s.criteria.samplesNeeded) source events (10/(1−q) for the "
            + "highest percentile q among the SLOs) are due in the measured part, at most "
            + "\(PlanText.trimmed(s.maxStepSeconds, digits: 1)) s. Events, not deliveries, count as samples: "
            + "a broadcast's recipients share their event's lag and are not independent"
    }
}
