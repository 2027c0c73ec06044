import ArgumentParser
import FanoutMetrics
import FanoutPlan
import FanoutSim
import Foundation

struct Plan: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Capacity plan: the highest rate that meets the SLOs, at 1...N workers, the USL fit, a prediction.",
        discussion: """
            In real time (--clock virtual: on the scenario's cost model instead of this machine, a \
            deterministic plan of the model), steps the scenario's offered rate (its time-averaged arrival \
            rate × a factor; bursts and source ends left out so every step is stationary): ×2 from \
            --start-factor while \
            steps pass, then bisection between the last pass and the first fail. A step fails when an SLO \
            breaks, the loss share exceeds --max-loss, or the harness saturates (scheduleLag.p99 above \
            --max-schedule-lag, or under 95% of the offered rate achieved). The knee is measured at 1, 2, \
            ... --max-workers workers; the Universal Scalability Law is fitted to the knees, and --target \
            is read off the curve. Writes plan.json, plan.md and plan.html; one progress line per step on \
            stderr.

            SLO: METRIC.PERCENTILE<=DURATION, e.g. endToEnd.p99<=5ms or fanoutCompletion.p99.9<=50ms \
            (metrics and percentiles as in fanout compare; units ns, us, µs, ms, s). Loss: (rejected + \
            unroutable pushes + expired deliveries) / (rejected + unroutable pushes + deliveries), as a \
            fraction or a percentage (0.5%). Target: "fanout=N within=DURATION" needs N/DURATION \
            deliveries per second.

            Your backend (--trigger URL): each step is one `fanout serve` run on the step's scenario (written \
            to the plan's steps/ folder with the serve's run folder), sending the events to URL at their \
            intended times, registering the devices first with --register URL, judging every push the backend \
            makes (--expect-events). Flags after -- go to every serve as they are (--listen, TLS, --auth, \
            --latency, --faults, --workers). Objectives: latency of endToEnd (event's intended time → applied \
            on the device) and counts of the judge: missing==0, staleAtEnd<=10, missing<=0.1%, \
            wrongContent==0; missing==0, wrongContent==0 and wrongKind==0 are judged unless another bound on \
            that count or COUNT=off is given. A step also \
            fails when the backend does not accept every trigger, registration leaves activities \
            unregistered, or the trigger falls behind. The knee is the highest event rate that passes; the \
            plan names what broke first above it.

            Exit status: 0 a knee was found, 2 no rate met every criterion (the plan is still written), \
            1 a failure, 64 bad options.
            """
    )

    @Argument(help: "A built-in scenario name or a scenario file.")
    var scenario: String = "default"

    @Option(
        name: .customLong("slo"),
        help: ArgumentHelp(
            "A latency objective, e.g. endToEnd.p99<=5ms; with --trigger also a count, e.g. missing==0. "
                + "Repeatable; at least one.",
            valueName: "METRIC.PERCENTILE<=DURATION"))
    var slos: [String] = []

    @Option(name: .customLong("max-loss"), help: "Highest loss share allowed (0, 0.001, 0.5%); not judged if omitted.")
    var maxLoss: String?

    @Option(help: ArgumentHelp("A fan-out to plan for, e.g. \"fanout=3000000 within=2s\".", valueName: "SPEC"))
    var target: String?

    @Option(help: "Plan folder (default reports/plans/<UTC time>-<scenario>/).")
    var out: String?

    @Option(
        name: .customLong("step-seconds"),
        help: "Shortest step, warm-up included (steps of 3 s or more drop their first second).")
    var stepSeconds: Double = 6

    @Option(
        name: .customLong("max-step-seconds"),
        help: "Longest step (steps grow to collect enough samples for the SLO percentile).")
    var maxStepSeconds: Double = 20

    @Option(name: .customLong("max-workers"), help: "Measure the knee at 1...N workers (default: one per core).")
    var maxWorkers: Int?

    @Option(help: "real (measures this machine) or virtual (steps on the scenario's cost model: deterministic).")
    var clock = "real"

    @Option(
        name: .customLong("max-schedule-lag"),
        help: "The harness is saturated above this scheduleLag.p99 (default: the largest SLO limit, ≥ 10ms).")
    var maxScheduleLag: String?

    @Option(name: .customLong("start-factor"), help: "The first rate factor tried.")
    var startFactor: Double = 1

    @Option(help: "Bisection stops when first fail ÷ last pass is at most this.")
    var precision: Double = 1.05

    @Option(help: "Override the seed.")
    var seed: UInt64?

    @Flag(inversion: .prefixedNo, help: "Repeat a failing step; it fails only if the repeat fails too (--repeats 1).")
    var confirmFailures = true

    @Option(
        help: ArgumentHelp(
            "Run every step N times and judge it on the median of its runs (default 3 with --trigger, 1 otherwise; "
                + "1 to 20).", valueName: "N"))
    var repeats: Int?

    @Option(name: .customLong("max-factor"), help: "The highest rate factor tried (default 1000).")
    var maxFactor: Double?

    @Option(
        help: ArgumentHelp(
            "Plan your backend: each step a fanout serve run POSTing the scenario's events to URL "
                + "(docs/INGEST.md §5).", valueName: "URL"))
    var trigger: String?

    @Option(help: ArgumentHelp("With --trigger: register every activity with URL before each step's events.", valueName: "URL"))
    var register: String?

    @Option(help: "With --trigger: seconds each serve runs past its events; events in them are not judged.")
    var settle: Double = 2

    @Option(
        help: ArgumentHelp(
            "With --trigger: after each step, serve on until the backend has sent nothing for 2 s, at most this "
                + "many seconds (0: no drain)."))
    var cooldown: Double = 60

    @Argument(
        parsing: .postTerminator,
        help: ArgumentHelp("With --trigger, after --: flags for every fanout serve step (--listen, --tls-cert, …).",
            valueName: "serve flags"))
    var serveArguments: [String] = []

    func run() throws {
        var s = try ScenarioSource.load(scenario)
        if let seed { s.seed = seed }
        guard !slos.isEmpty else { throw ValidationError("--slo: give at least one, e.g. --slo \"endToEnd.p99<=5ms\"") }
        let (parsed, counts) = try objectives()
        let backend = try backendSettings(scenario: s)
        let search = try searchFlags(parsed)
        var criteria = PlanCriteria(slos: parsed, maxLoss: search.loss, maxScheduleLagNanos: search.lag)
        criteria.counts = counts
        var settings = PlanSettings(
            scenario: s, criteria: criteria, target: search.target,
            workerCounts: backend.map { [$0.loops] } ?? Array(1...search.workers), coresPerMachine: search.cores)
        settings.backend = backend?.settings
        if let maxFactor { settings.search.maxFactor = maxFactor }
        settings.stepSeconds = stepSeconds
        settings.maxStepSeconds = maxStepSeconds
        settings.search.startFactor = startFactor
        settings.search.precision = precision
        settings.confirmFailures = confirmFailures
        settings.repeats = repeats ?? (trigger != nil ? 3 : 1)
        settings.clock = search.clock
        let folder = backend?.settings.folder ?? out ?? "reports/plans/\(Run.timestamp())-\(s.name)"
        let objectives = (parsed.map(\.description) + counts.map(\.description)).joined(separator: ", ")
        FileHandle.standardError.write(
            Data(
                ("fanout plan \(s.name): \(objectives), "
                    + (backend.map { "your backend at \($0.settings.triggerURL) (steps: \(folder)/steps/)" }
                        ?? "workers 1...\(search.workers)")
                    + ", steps ≥ \(stepSeconds) s, \(search.clock.rawValue) time, config \(s.configHash)\n").utf8))
        let plan: CapacityPlan
        do {
            plan = try CapacityPlan.run(settings) { line in
                FileHandle.standardError.write(Data((line + "\n").utf8))
            }
        } catch let e as BackendStepError {
            throw CommandFailure("fanout plan: \(e)")
        }
        try printed(plan, folder: folder)
    }

    /// `--slo`s: latency objectives and, with `--trigger`, counts of the end-to-end judge.
    /// With `--trigger`, `missing==0`, `wrongContent==0` and `wrongKind==0` are judged unless `--slo NAME=off` (or
    /// another bound on that count) is given: a backend that loses pushes or garbles them never passes a step by
    /// default.
    func objectives() throws -> ([SLO], [CountObjective]) {
        var parsed: [SLO] = []
        var counts: [CountObjective] = []
        var off: Set<String> = []
        do {
            for text in slos {
                if CountObjective.names(text), text.hasSuffix("=off"), !text.contains("<"), !text.contains("==") {
                    guard trigger != nil else {
                        throw PlanInputError(
                            "\(text): counts of the end-to-end judge need --trigger (a plan of your backend)")
                    }
                    let name = String(text.dropLast("=off".count)).trimmingCharacters(in: .whitespaces)
                    guard CountObjective.Name(rawValue: name) != nil else {
                        throw PlanInputError("\(text): expected COUNT=off with COUNT a count of the judge")
                    }
                    off.insert(name)
                    continue
                }
                if CountObjective.names(text) {
                    guard trigger != nil else {
                        throw PlanInputError("\(text): counts of the end-to-end judge need --trigger (a plan of your backend)")
                    }
                    counts.append(try CountObjective(parsing: text))
                    continue
                }
                let slo = try SLO(parsing: text)
                if trigger != nil && !Self.backendMetrics.contains(slo.metric) {
                    throw PlanInputError(
                        "\(text): a plan of your backend measures "
                            + Self.backendMetrics.map(\.name).joined(separator: ", ") + " (\(slo.metric.name) is fanout run's)")
                }
                parsed.append(slo)
            }
        } catch {
            throw ValidationError("--slo: \(error)")
        }
        for (k, name) in [CountObjective.Name.missing, .wrongContent, .wrongKind].enumerated()
        where trigger != nil && !off.contains(name.rawValue) && !counts.contains(where: { $0.name == name }) {
            counts.insert(CountObjective(name: name, limit: 0), at: min(k, counts.count))
        }
        counts.removeAll { off.contains($0.name.rawValue) }
        return (parsed, counts)
    }

    /// The search's flags, checked: `--max-loss`, `--target`, `--max-schedule-lag`, step lengths, factors, clock
    /// and workers.
    func searchFlags(_ parsed: [SLO]) throws -> (
        loss: Double?, target: PlanTarget?, lag: UInt64, clock: Scenario.Clock, cores: Int, workers: Int
    ) {
        var loss: Double?
        if let maxLoss {
            var text = maxLoss.trimmingCharacters(in: .whitespaces)
            let percent = text.hasSuffix("%")
            if percent { text.removeLast() }
            guard let v = Double(text), v.isFinite, v >= 0, v <= (percent ? 100 : 1) else {
                throw ValidationError("--max-loss: expected a share from 0 to 1 or a percentage, got \"\(maxLoss)\"")
            }
            loss = percent ? v / 100 : v
        }
        if let repeats, !(1...20).contains(repeats) {
            throw ValidationError("--repeats: expected 1 to 20 runs of each step, got \(repeats)")
        }
        var planTarget: PlanTarget?
        if let target {
            do {
                planTarget = try PlanTarget(parsing: target)
            } catch {
                throw ValidationError("--target: \(error)")
            }
        }
        // By default the harness's own lag counts as saturation only where it alone would break an SLO
        // (it is inside the measured latency anyway): a shared machine's scheduling noise is not a backlog.
        var lag = max(10_000_000, parsed.map(\.limitNanos).max() ?? 0)
        if let maxScheduleLag {
            do {
                lag = try SLO.duration(maxScheduleLag, in: "--max-schedule-lag")
            } catch {
                throw ValidationError("\(error)")
            }
        }
        guard stepSeconds >= 0.5 && stepSeconds <= 600 else {
            throw ValidationError("--step-seconds: expected 0.5 to 600, got \(stepSeconds)")
        }
        guard maxStepSeconds >= stepSeconds && maxStepSeconds <= 3600 else {
            throw ValidationError("--max-step-seconds: expected --step-seconds to 3600, got \(maxStepSeconds)")
        }
        guard startFactor > 0 && startFactor <= 1000 else {
            throw ValidationError("--start-factor: expected above 0 and at most 1000, got \(startFactor)")
        }
        guard precision > 1 && precision <= 2 else {
            throw ValidationError("--precision: expected above 1 and at most 2, got \(precision)")
        }
        guard let stepClock = Scenario.Clock(rawValue: clock) else {
            throw ValidationError("--clock: expected virtual or real, got \(clock)")
        }
        let cores = max(ProcessInfo.processInfo.activeProcessorCount, 1)
        let workers = maxWorkers ?? cores
        guard (1...256).contains(workers) else {
            throw ValidationError("--max-workers: expected 1 to 256, got \(workers)")
        }
        if let maxFactor {
            guard maxFactor >= startFactor && maxFactor <= 1000 else {
                throw ValidationError("--max-factor: expected --start-factor to 1000, got \(maxFactor)")
            }
        }

        return (loss, planTarget, lag, stepClock, cores, workers)
    }

    /// The plan's files written, its headline and fit printed; exit 2 when no worker count met the objectives.
    func printed(_ plan: CapacityPlan, folder: String) throws {
        try PlanReport.write(folder: folder, files: PlanReport.files(plan))
        print(PlanReport.headline(plan).replacingOccurrences(of: "**", with: ""))
        if let fit = plan.fit {
            let m = fit.model
            let r2 = fit.rSquared.map { String(format: "%.4f", $0) } ?? "n/a"
            print(
                String(
                    format: "USL         λ = %.0f deliveries/s, σ = %.4g, κ = %.4g, R² = ", m.lambda, m.sigma,
                    m.kappa) + r2 + (fit.underdetermined ? " (underdetermined: \(fit.note))" : ""))
        }
        print(String(format: "wall time   %.1f s", plan.wallSeconds))
        print("report      \(folder)/plan.md (plan.json, plan.html)")
        if PlanReport.bestKnee(plan) == nil { throw ExitCode(2) }
    }

    /// The serve metrics a backend plan's latency objectives may name.
    static let backendMetrics: [Metric] = [
        .endToEnd, .validate, .route, .fanoutCompletion, .fanoutCompletion1, .fanoutCompletion2to100,
        .fanoutCompletion101to10k, .fanoutCompletionOver10k,
    ]

    /// `--trigger`'s settings, checked; nil without `--trigger`.
    func backendSettings(scenario s: Scenario) throws -> (settings: BackendSettings, loops: Int)? {
        guard let trigger else {
            if register != nil { throw ValidationError("--register: only with --trigger (a plan of your backend)") }
            if !serveArguments.isEmpty {
                throw ValidationError("flags after --: only with --trigger (they go to each fanout serve step)")
            }
            return nil
        }
        if target != nil { throw ValidationError("--target: a backend's scaling is not measured; without --trigger only") }
        if maxWorkers != nil { throw ValidationError("--max-workers: with --trigger give serve's --workers after --") }
        if maxLoss != nil { throw ValidationError("--max-loss: with --trigger use --slo \"missing<=0.1%\"") }
        if clock != "real" { throw ValidationError("--clock: a plan of your backend runs in real time") }
        guard settle >= 0 && settle <= 600 else { throw ValidationError("--settle: expected 0 to 600, got \(settle)") }
        for flag in serveArguments {
            let name = flag.split(separator: "=", maxSplits: 1).first.map(String.init) ?? flag
            if BackendSettings.reservedFlags.contains(name) {
                throw ValidationError("\(name) after --: each step sets it (the plan's own --trigger, --register, --settle)")
            }
        }
        var loops = max(ProcessInfo.processInfo.activeProcessorCount, 1)
        for (k, flag) in serveArguments.enumerated() {
            var value: String?
            if flag == "--workers", k + 1 < serveArguments.count { value = serveArguments[k + 1] }
            if flag.hasPrefix("--workers=") { value = String(flag.dropFirst("--workers=".count)) }
            if let value, let n = Int(value), n > 0 { loops = n }
        }
        guard let executable = Bundle.main.executablePath else {
            throw CommandFailure("fanout plan: cannot find its own executable to run fanout serve")
        }
        var b = BackendSettings(
            executable: executable, triggerURL: trigger, registerURL: register, serveArguments: serveArguments,
            folder: out ?? "reports/plans/\(Run.timestamp())-backend-\(s.name)")
        b.settleSeconds = settle
        guard cooldown >= 0 && cooldown <= 3600 else {
            throw ValidationError("--cooldown: expected 0 to 3600, got \(cooldown)")
        }
        b.cooldownSeconds = cooldown
        return (b, loops)
    }
}
