import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import FanoutReport
import FanoutSim
import Histogram

/// What a step must meet to pass.
public struct PlanCriteria: Sendable {
    public var slos: [SLO]
    /// Highest allowed loss share (`Step.lossShare`); nil: not judged (shown).
    public var maxLoss: Double?
    /// The harness counts as saturated (the step fails) when its schedule lag p99 exceeds this.
    public var maxScheduleLagNanos: UInt64
    /// ... or when it ran behind its schedule: achieved events/s below this share of the offered rate.
    public var minAchievedRatio: Double
    /// Bounds on the end-to-end judge's counts (a plan of the user's backend: `missing==0`).
    public var counts: [CountObjective] = []

    public init(
        slos: [SLO], maxLoss: Double? = nil, maxScheduleLagNanos: UInt64 = 10_000_000,
        minAchievedRatio: Double = 0.95
    ) {
        self.slos = slos
        self.maxLoss = maxLoss
        self.maxScheduleLagNanos = maxScheduleLagNanos
        self.minAchievedRatio = minAchievedRatio
    }

    /// The most samples any objective needs for a stable percentile (`SLO.samplesNeeded`).
    public var samplesNeeded: Int { slos.compactMap(\.samplesNeeded).max() ?? 0 }
}

/// One step of a saturation search: the scenario at one rate factor, on some workers, for a while.
public struct Step: Sendable {
    public var workers: Int
    public var factor: Double
    /// Scheduled length of the step and its discarded warm-up (whole seconds at the start).
    public var scheduledSeconds: Double
    public var warmupSeconds: Double
    public var wallSeconds: Double
    /// The machine's 1-minute load average when the step started (nil where unknown): how busy the
    /// shared cores were.
    public var loadAverage: Double? = nil
    /// The repeat of a step that failed (`PlanSettings.confirmFailures`).
    public var repeated = false
    /// When the last recipient of any event was applied, seconds after the start.
    public var lastCompletionSeconds: Double
    /// Source events scheduled; of them, those due after the warm-up that reached a recipient.
    public var events: Int
    public var measuredEvents: Int
    public var deliveries: Int
    /// Objective values over the measured part, in `criteria.slos` order, with their sample counts.
    public var sloValues: [UInt64]
    public var sloSamples: [UInt64]
    public var endToEnd: LatencySummary
    public var scheduleLag: LatencySummary
    /// (rejected + unroutable pushes + expired deliveries) / (rejected + unroutable + deliveries).
    public var lossShare: Double
    public var identitiesHold: Bool
    public var little: LittleCheck
    /// Why it failed (empty: passed).
    public var failures: [String]
    /// Caveats (too few samples for a percentile, Little's law off).
    public var notes: [String]
    /// A step of a backend plan (`fanout plan --trigger`): the serve run's counts.
    public var backend: BackendMeasures? = nil
    /// A step measured several times (`PlanSettings.repeats`): each run, in order; this step holds their median
    /// (each objective's value, each count) and is judged on it. Empty: measured once.
    public var runs: [RepeatRun] = []
    /// fanout's own harness (not the system under test) held the step up: why. The search ends at such a step.
    public var harnessLimited: String? = nil

    /// One run of a repeated step, as judged on its own.
    public struct RepeatRun: Sendable, Equatable {
        public var folder: String?
        public var passed: Bool
        public var failures: [String]
        /// In `criteria.slos` order.
        public var sloValues: [UInt64]
        public var endToEndP99: UInt64
        public var harnessLimited: String?
    }

    public var passed: Bool { failures.isEmpty }
    public var offeredEventsPerSecond: Double { Double(events) / scheduledSeconds }
    /// Deliveries (every outcome) per scheduled second.
    public var deliveriesPerSecond: Double { Double(deliveries) / scheduledSeconds }
    /// Achieved events/s ÷ offered: the scheduled length ÷ the time the workers took to apply every
    /// event (to the last recipient; the harness's own start and end, such as thread start and
    /// histogram encoding, are not counted). A run that falls behind its schedule by a backlog
    /// growing at rate (offered − capacity) finishes at offered/capacity × the scheduled length.
    public var achievedRatio: Double { scheduledSeconds / max(scheduledSeconds, lastCompletionSeconds) }
}

extension Step {
    /// Judges a finished run. Latency is taken over the measured part only: interval histograms
    /// (one a second) from `warmupSeconds` on, so population and cold caches do not count.
    public static func evaluate(
        _ r: RunResult, factor: Double, warmupSeconds: Double, criteria: PlanCriteria
    ) throws -> Step {
        let scheduled = r.scenario.durationSeconds
        let warmupIntervals = UInt64(warmupSeconds.rounded(.down))
        var window = LatencyRecorder()
        if warmupIntervals == 0 {
            window = r.recorder
        } else {
            let first = Int(warmupIntervals * 1_000_000_000 / r.intervalNanos)
            for interval in r.intervals where interval.index >= first {
                window.add(interval.metric, try interval.histogram())
            }
        }
        let a = r.accounting
        let lost = a.rejectedTotal + a.unroutableTotal + a[.expired]
        let attempts = a.rejectedTotal + a.unroutableTotal + a.deliveries
        let windowStart = warmupIntervals * 1_000_000_000
        let windowEnd = max(UInt64(scheduled * 1e9), windowStart + 1)
        let c = r.completion
        let little = LittleCheck.compute(
            intended: c.intendedNanos, completed: c.lastNanos, recipients: c.recipients,
            windowStartNanos: windowStart, windowEndNanos: windowEnd)
        var step = Step(
            workers: r.workers, factor: factor, scheduledSeconds: scheduled, warmupSeconds: Double(warmupIntervals),
            wallSeconds: r.wallSeconds, lastCompletionSeconds: Double(c.lastNanos.max() ?? 0) / 1e9,
            events: r.events, measuredEvents: little.events, deliveries: a.deliveries,
            sloValues: criteria.slos.map { $0.value(LatencySummary(window[$0.metric])) },
            sloSamples: criteria.slos.map { window[$0.metric].totalCount },
            endToEnd: LatencySummary(window[.endToEnd]), scheduleLag: LatencySummary(window[.scheduleLag]),
            lossShare: attempts > 0 ? Double(lost) / Double(attempts) : 0, identitiesHold: a.identitiesHold,
            little: little, failures: [], notes: [])
        step.judge(criteria)
        return step
    }

    /// Fills `failures` and `notes` from the measured values.
    public mutating func judge(_ criteria: PlanCriteria) {
        failures = []
        notes = []
        harnessLimited = nil
        for (k, slo) in criteria.slos.enumerated() {
            if sloSamples[k] == 0 {
                failures.append("\(slo.name): no samples")
            } else if !slo.met(by: sloValues[k]) {
                failures.append("\(slo.name) \(PlanText.duration(sloValues[k])) > \(PlanText.duration(slo.limitNanos))")
            }
            if let needed = slo.samplesNeeded, measuredEvents < needed {
                notes.append(
                    "\(slo.name): \(measuredEvents) events measured, \(needed) wanted for a stable "
                        + "\(slo.percentile.rawValue)")
            }
        }
        if let maxLoss = criteria.maxLoss, lossShare > maxLoss {
            failures.append("loss \(PlanText.percent(lossShare)) > \(PlanText.percent(maxLoss))")
        }
        if let b = backend {
            // The backend's own counts first (what broke), then the trigger's lag: a backend that answers
            // triggers slowly fills --trigger-concurrency and makes events wait for a slot.
            for objective in criteria.counts where !objective.met(count: b[objective.name], expected: b.expected) {
                let limit =
                    objective.share
                    ? "\(PlanText.percent(objective.limit)) of \(b.expected) expected" : "\(Int(objective.limit))"
                failures.append("\(objective.name.rawValue) \(b[objective.name]) > \(limit)")
            }
            failures += b.failures
            if scheduleLag.count > 0, scheduleLag.p99 > criteria.maxScheduleLagNanos {
                failures.append(
                    "trigger behind schedule: scheduleLag.p99 \(PlanText.duration(scheduleLag.p99)) > "
                        + PlanText.duration(criteria.maxScheduleLagNanos)
                        + (b.waitedForSlot > 0
                            ? " (\(b.waitedForSlot) events waited for a free --trigger-concurrency slot: the backend "
                                + "answered too slowly)" : " (fanout's own trigger loop)"))
            }
            // Behind with no event waiting for the backend: fanout's own trigger could not keep the schedule. The
            // step says nothing about the backend; the search ends (harness-limited).
            if b.waitedForSlot == 0 {
                if scheduleLag.count > 0, scheduleLag.p99 > criteria.maxScheduleLagNanos {
                    harnessLimited = "fanout's trigger fell behind its schedule (scheduleLag.p99 "
                        + "\(PlanText.duration(scheduleLag.p99)), no event waited for the backend)"
                } else if b.triggerUnsent > 0 {
                    harnessLimited = "fanout's trigger left \(b.triggerUnsent) events unsent with none waiting for "
                        + "the backend"
                }
            }
        } else {
            if achievedRatio < criteria.minAchievedRatio {
                failures.append(
                    "harness behind schedule: achieved \(PlanText.percent(achievedRatio)) of the offered "
                        + "rate (< \(PlanText.percent(criteria.minAchievedRatio)))")
            }
            if scheduleLag.count > 0, scheduleLag.p99 > criteria.maxScheduleLagNanos {
                failures.append(
                    "harness saturated: scheduleLag.p99 \(PlanText.duration(scheduleLag.p99)) > "
                        + PlanText.duration(criteria.maxScheduleLagNanos))
            }
        }
        if !identitiesHold && backend == nil { failures.append("accounting identities broken") }
        if !little.holds {
            notes.append(
                "Little's law off by \(PlanText.percent(little.relativeDifference)): L = "
                    + "\(PlanText.fixed(little.inFlight, 2)) vs X·W = \(PlanText.fixed(little.predictedInFlight, 2))")
        }
    }
}

extension Step {
    /// A step measured `runs.count` times, judged on the median: the run whose endToEnd p99 is the median one, with
    /// each objective's value and each count of the judge replaced by the median over the runs (the lower middle of
    /// an even count), then judged again. A step is harness-limited when any run was.
    public static func median(of runs: [Step], criteria: PlanCriteria) -> Step {
        precondition(!runs.isEmpty)
        func middle<T: Comparable>(_ values: [T]) -> T { values.sorted()[(values.count - 1) / 2] }
        let order = runs.indices.sorted { runs[$0].endToEnd.p99 < runs[$1].endToEnd.p99 }
        var step = runs[order[(runs.count - 1) / 2]]
        step.runs = runs.map {
            RepeatRun(
                folder: $0.backend?.folder, passed: $0.passed, failures: $0.failures, sloValues: $0.sloValues,
                endToEndP99: $0.endToEnd.p99, harnessLimited: $0.harnessLimited)
        }
        guard runs.count > 1 else { return step }
        step.sloValues = criteria.slos.indices.map { k in middle(runs.map { $0.sloValues[k] }) }
        step.sloSamples = criteria.slos.indices.map { k in runs.map { $0.sloSamples[k] }.min() ?? 0 }
        step.lossShare = middle(runs.map(\.lossShare))
        if var b = step.backend {
            for name in CountObjective.Name.allCases { b.counts[name] = middle(runs.map { $0.backend?[name] ?? 0 }) }
            step.backend = b
        }
        step.judge(criteria)
        if step.harnessLimited == nil, let limited = runs.compactMap(\.harnessLimited).first {
            step.harnessLimited = limited
        }
        return step
    }
}
