import FanoutReport
import Foundation

/// `plan.md`: the plan in tables a person reads in a few minutes.
extension PlanReport {
    public static func markdown(_ plan: CapacityPlan) -> String {
        let s = plan.settings
        let c = s.criteria
        var out: [String] = []
        out.append("# fanout plan: \(s.scenario.name)")
        out.append("")
        out.append(headline(plan))
        out.append("")
        out.append(criteriaText(plan))
        out.append("")
        out.append("## Method")
        out.append("")
        if let b = s.backend { out.append("- \(backendMethod(b)).") }
        out.append(
            "- Scenario `\(s.scenario.name)` (config `\(s.scenario.configHash)`, seed \(s.scenario.seed)), "
                + "made stationary: \(PlanReport.steadyText(plan.steadyScenario.clock)). "
                + "Factor 1 = \(PlanText.fixed(plan.baseEventsPerSecond, 1)) source "
                + "events/s (the scenario's mean rate); steady config `\(plan.steadyScenario.configHash)`.")
        out.append(
            (s.backend == nil
                ? "- Saturation search per worker count (\(PlanText.list(s.workerCounts))): "
                : "- Saturation search (fanout serve on \(PlanText.list(s.workerCounts)) event loops): ")
                + "geometric steps "
                + "×\(PlanText.trimmed(s.search.growth, digits: 2)) from ×\(PlanText.factor(s.search.startFactor)) "
                + "(later worker counts start at the previous knee) until a step fails, then bisection at geometric "
                + "midpoints until first fail ÷ last pass ≤ \(PlanText.trimmed(s.search.precision, digits: 3)). "
                + (s.repeats > 1
                    ? "Every step is run \(s.repeats) times and judged on the median of its runs (each objective's "
                        + "value and each count; healthy runs of one backend differ by 2× in endToEnd p99, so one lucky "
                        + "run must not pass a step). A step fanout's own trigger held up ends the search as "
                        + "harness-limited. "
                    : s.confirmFailures
                        ? "A failing step is repeated and counts as failed only if the repeat fails "
                            + "too (a stall of the shared machine fails one step; a rate above capacity fails every "
                            + "time). "
                        : "")
                + "The knee is the highest passing factor, reported with the lowest failing one above it.")
        out.append("- Step length: \(stepRule(plan)).")
        if s.backend != nil {
            out.append(
                "- Deliveries/s: deliveries the devices applied (correlated with an event) per scheduled second; "
                    + "missing: expected deliveries (a follower of the event's source, not superseded by a newer "
                    + "event) that did not arrive by the end of the step; stale: followers not on their source's last "
                    + "event at the end.")
        } else {
            out.append("- Deliveries/s count every delivery outcome per scheduled second. \(lossDefinition).")
        }
        out.append("- Little's law per step: \(littleText).")
        out.append(
            "- Wall time of the plan: \(PlanText.fixed(plan.wallSeconds, 1)) s; machine: "
                + "\(plan.machine.cores) cores, \(plan.machine.cpu), \(plan.machine.os).")
        out.append("")
        out.append("## Saturation search")
        for w in plan.searches {
            out.append("")
            out.append("### \(w.workers) worker\(w.workers == 1 ? "" : "s")")
            out.append("")
            out.append(
                w.outcome.conclusion
                    + (w.knee.map {
                        ": knee ×\(PlanText.factor($0.factor)) = \(PlanText.rate($0.offeredEventsPerSecond)) events/s, "
                            + "**\(PlanText.rate($0.deliveriesPerSecond)) deliveries/s**."
                    } ?? "."))
            out.append("")
            let header = stepHeader(c, backend: s.backend != nil)
            out += table(header, stepRows(w), align: String(repeating: "r", count: header.count - 1) + "l")
            let notes = stepNotes(w, c)
            if !notes.isEmpty {
                out.append("")
                for n in notes { out.append("- note: \(n)") }
            }
        }
        out.append("")
        out.append("## Scaling (Universal Scalability Law)")
        out.append("")
        if s.backend != nil {
            out.append(
                "Not measured: the backend's own scaling (its processes, its APNs connections) is not fanout's to "
                    + "vary. Plan it again after scaling the backend and compare the knees.")
        } else if let fit = plan.fit {
            let m = fit.model
            out.append(
                "X(N) = λN / (1 + σ(N−1) + κN(N−1)) fitted to the knees (deliveries/s): linearised "
                    + "least squares on N/X, then Levenberg–Marquardt on relative residuals, σ, κ ≥ 0.")
            out.append("")
            out += table(
                ["parameter", "value"],
                [
                    ["λ (one worker)", PlanText.rate(m.lambda) + " deliveries/s"],
                    ["σ (contention)", String(format: "%.4g", m.sigma)],
                    ["κ (coherency)", String(format: "%.4g", m.kappa)],
                    ["R²", fit.rSquared.map { String(format: "%.4f", $0) } ?? "n/a (one point)"],
                    ["relative RMS residual", PlanText.percent(fit.relativeRMS)],
                    [
                        "points / worker counts / free parameters",
                        "\(fit.points) / \(fit.distinctWorkers) / "
                            + "\(fit.freeParameters)",
                    ],
                    ["peak N* = √((1−σ)/κ)", m.peakWorkers.map { PlanText.fixed($0, 1) } ?? "∞ (κ = 0)"],
                    [
                        "highest throughput",
                        m.maxThroughput.map { PlanText.rate($0) + " deliveries/s" }
                            ?? "unbounded (σ = κ = 0)",
                    ],
                    ["limited by", m.dominantTerm(at: Double(max(fit.distinctWorkers, 2)))],
                ], align: "lr")
            if !fit.note.isEmpty {
                out.append("")
                out.append("**Underdetermined:** \(fit.note).")
            }
            out.append("")
            out += table(
                ["workers", "knee deliveries/s", "fitted", "residual"],
                plan.points.map { p in
                    let f = m.throughput(Double(p.workers))
                    return [
                        "\(p.workers)", PlanText.rate(p.deliveriesPerSecond), PlanText.rate(f),
                        PlanText.percent((f - p.deliveriesPerSecond) / p.deliveriesPerSecond),
                    ]
                }, align: "rrrr")
        } else {
            out.append("No knee was found at any worker count: nothing to fit.")
        }
        if let p = plan.prediction {
            out.append("")
            out.append("## Prediction: \(p.target.description)")
            out.append("")
            out.append(predictionText(p))
            for n in p.notes { out.append("- \(n)") }
        }
        out.append("")
        out.append("## Caveats")
        out.append("")
        for n in notes(plan) { out.append("- \(n)") }
        out.append("")
        return out.joined(separator: "\n")
    }

    /// The criteria in one paragraph.
    static func criteriaText(_ plan: CapacityPlan) -> String {
        let c = plan.settings.criteria
        let objectives = c.slos.map { "`\($0.description)`" } + c.counts.map { "`\($0.description)`" }
        if plan.settings.backend != nil {
            return "Objectives: " + objectives.joined(separator: ", ")
                + "; a step also fails when the backend does not accept every trigger (non-2xx, timeout, error), "
                + "when registration leaves activities unregistered, when fanout serve exits non-zero or an identity "
                + "breaks, and when the trigger falls behind (scheduleLag.p99 above "
                + "\(PlanText.duration(c.maxScheduleLagNanos)), or events unsent at shutdown)."
        }
        return "SLOs: " + objectives.joined(separator: ", ")
            + (c.maxLoss.map { "; loss ≤ \(PlanText.percent($0))" } ?? "; loss not judged")
            + "; the harness counts as saturated above scheduleLag.p99 \(PlanText.duration(c.maxScheduleLagNanos)) "
            + "or below \(PlanText.percent(c.minAchievedRatio)) of the offered rate achieved."
    }

    /// How a backend plan's steps run, in one sentence.
    static func backendMethod(_ b: BackendSettings) -> String {
        "The system under test is the backend at \(b.triggerURL): each step is one `fanout serve` run (its folder "
            + "under `steps/`) that " + (b.registerURL.map { "registers every activity with \($0), then " } ?? "")
            + "sends the step's events to the trigger URL at their intended times (open loop) and judges every push "
            + "the backend makes (`--expect-events`, `--settle \(PlanText.trimmed(b.settleSeconds, digits: 2))`: "
            + "endToEnd from each event's intended time to the device's apply, missing and stale deliveries)"
            + (b.cooldownSeconds > 0
                ? "; after each step a serve on the same address takes what the backend still sends, until it is quiet "
                    + "for \(PlanText.trimmed(b.quietSeconds, digits: 1)) s (at most "
                    + "\(PlanText.trimmed(b.cooldownSeconds, digits: 0)) s), so that no push of one step reaches the "
                    + "next step's devices (same tokens, timestamps that can coincide)"
                : "; no drain between steps (--cooldown 0): a backlog of one step can reach the next")
            + (b.serveArguments.isEmpty ? "" : "; serve flags `\(b.serveArguments.joined(separator: " "))`")
    }

    /// One sentence: the knee (the best worker count) and the prediction.
    public static func headline(_ plan: CapacityPlan) -> String {
        if plan.settings.backend != nil { return backendHeadline(plan) }
        guard let best = bestKnee(plan) else {
            return "**No rate met every SLO** at any worker count (see the steps below)."
        }
        let k = best.step
        var text =
            "**Knee: ×\(PlanText.factor(k.factor)) the scenario's rate on \(best.workers) "
            + "worker\(best.workers == 1 ? "" : "s") — \(PlanText.rate(k.offeredEventsPerSecond)) events/s, "
            + "\(PlanText.rate(k.deliveriesPerSecond)) deliveries/s — with every SLO met.**"
        if let p = plan.prediction { text += " " + predictionText(p) }
        return text
    }

    public static func predictionText(_ p: Prediction) -> String {
        let need = "\(PlanText.rate(p.requiredPerSecond)) deliveries/s"
        if p.beyondPeak {
            return "\(p.target.description) needs \(need): beyond what scaling up reaches; sharded over "
                + "\(p.shardMachines!) machines of \(p.shardWorkersPerMachine!) worker"
                + "\(p.shardWorkersPerMachine! == 1 ? "" : "s") (\(PlanText.rate(p.shardThroughputPerMachine!)) "
                + "deliveries/s each)."
        }
        return "\(p.target.description) needs \(need): **\(p.workersNeeded!) worker\(p.workersNeeded! == 1 ? "" : "s")"
            + " (cores), \(p.machines!) machine\(p.machines! == 1 ? "" : "s") of \(p.coresPerMachine) cores**, "
            + "fitted \(PlanText.rate(p.throughputAtNeeded!)) deliveries/s, margin \(PlanText.percent(p.margin!))"
            + (p.extrapolated ? " — EXTRAPOLATED beyond the measured worker counts." : ".")
    }

    static let littleText =
        "L, the time-average number of source events in flight (due, last recipient not "
        + "yet applied) over the measured window, computed from each event's intended and completion times, is "
        + "compared with X·W, events completed in the window per second × the mean fan-out completion time of "
        + "the events due in it; they should agree within edge effects (10% is flagged)"

    static func table(_ header: [String], _ rows: [[String]], align: String) -> [String] {
        SummaryMarkdown.table(header, rows, align: align)
    }

    /// A backend plan's knee and what broke first above it.
    static func backendHeadline(_ plan: CapacityPlan) -> String {
        guard let search = plan.searches.first else { return "**No step ran.**" }
        let above = search.firstFail.map { f in
            " Above it, at ×\(PlanText.factor(f.factor)) (\(PlanText.rate(f.offeredEventsPerSecond)) events/s), what "
                + "broke first: " + f.failures.joined(separator: "; ") + "."
        }
        let limited = search.outcome.halted.map {
            " The search ended harness-limited: \($0); fanout's trigger, not the backend, was the limit there, so the "
                + "knee is a lower bound (give the serve more loops, or a faster machine)."
        }
        guard let k = search.knee else {
            return "**No rate met every objective through the backend.**" + (above ?? "") + (limited ?? "")
        }
        let interval = search.firstFail.map {
            "between \(PlanText.rate(k.offeredEventsPerSecond)) (pass) and \(PlanText.rate($0.offeredEventsPerSecond)) "
                + "(fail) events/s"
        } ?? "at least \(PlanText.rate(k.offeredEventsPerSecond)) events/s"
        return "**Knee of the backend: \(interval)** (×\(PlanText.factor(k.factor)) the scenario's mean rate passed; "
            + "\(PlanText.rate(k.deliveriesPerSecond)) deliveries/s delivered, endToEnd p99 "
            + "\(PlanText.duration(k.endToEnd.p99))\(spread(k)), \(k.backend?[.missing] ?? 0) missing) with every "
            + "objective met" + (k.runs.count > 1 ? " by the median of \(k.runs.count) runs." : ".")
            + (above ?? (limited == nil ? " No rate above it failed: the knee is a lower bound." : "")) + (limited ?? "")
    }

    /// ` (runs: 80 ms to 160 ms)`: the spread of a repeated step's endToEnd p99, empty for one run.
    static func spread(_ step: Step) -> String {
        guard step.runs.count > 1, let lo = step.runs.map(\.endToEndP99).min(),
            let hi = step.runs.map(\.endToEndP99).max()
        else { return "" }
        return " (its \(step.runs.count) runs: \(PlanText.duration(lo)) to \(PlanText.duration(hi)))"
    }

    /// The columns of a search's step table (plan.md and plan.html).
    static func stepHeader(_ c: PlanCriteria, backend: Bool = false) -> [String] {
        if backend {
            return ["#", "factor", "events/s", "seconds", "deliveries/s"] + c.slos.map(\.name)
                + ["missing", "stale", "trigger lag p99", "L / X·W", "load", "verdict"]
        }
        return ["#", "factor", "events/s", "seconds", "deliveries/s"] + c.slos.map(\.name)
            + ["lag p99", "achieved", "L / X·W", "load", "verdict"]
    }

    static func stepRows(_ w: WorkerSearch) -> [[String]] {
        w.steps.enumerated().map { k, step in
            let number: String = "\(k + 1)" + (step.repeated ? " (repeat)" : "")
            var row: [String] = [
                number, "×" + PlanText.factor(step.factor),
                PlanText.rate(step.offeredEventsPerSecond),
                PlanText.trimmed(step.scheduledSeconds, digits: 1),
                PlanText.rate(step.deliveriesPerSecond),
            ]
            row += step.sloValues.map { PlanText.duration($0) }
            let little: String =
                PlanText.fixed(step.little.inFlight, 2) + " / "
                + PlanText.fixed(step.little.predictedInFlight, 2)
            if let b = step.backend {
                row += ["\(b[.missing]) of \(b.expected)", "\(b[.staleAtEnd])", PlanText.duration(step.scheduleLag.p99)]
            } else {
                row += [PlanText.duration(step.scheduleLag.p99), PlanText.percent(min(step.achievedRatio, 1))]
            }
            row += [little, step.loadAverage.map { PlanText.fixed($0, 1) } ?? ""]
            var verdict =
                step.harnessLimited.map { "HARNESS-LIMITED: \($0)" }
                ?? (step.passed ? "pass" : "FAIL: " + step.failures.joined(separator: "; "))
            if step.runs.count > 1 {
                verdict += " (median of \(step.runs.count) runs: "
                    + step.runs.map { $0.harnessLimited != nil ? "limited" : $0.passed ? "pass" : "fail" }
                    .joined(separator: ", ") + "; endToEnd p99 " + step.runs.map { PlanText.duration($0.endToEndP99) }
                    .joined(separator: ", ") + ")"
            }
            row.append(verdict)
            return row
        }
    }

    /// A search's caveats: steps with fewer events than the percentile wants (one line), the rest
    /// by step.
    static func stepNotes(_ w: WorkerSearch, _ c: PlanCriteria) -> [String] {
        var notes: [String] = []
        let needed = c.samplesNeeded
        let short = w.steps.enumerated().filter { needed > 0 && $0.element.measuredEvents < needed }
        if let fewest = short.map(\.element.measuredEvents).min() {
            notes.append(
                "\(short.count) of \(w.steps.count) steps measured fewer than the \(needed) events the "
                    + "SLO percentiles want for a stable estimate (fewest: \(fewest), steps "
                    + short.map { "\($0.offset + 1)" }.joined(separator: ", ") + ")")
        }
        for (k, step) in w.steps.enumerated() {
            for n in step.notes where !n.contains(" events measured, ") { notes.append("step \(k + 1): \(n)") }
        }
        return notes
    }
}
