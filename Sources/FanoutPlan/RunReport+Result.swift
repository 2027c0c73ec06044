import FanoutMetrics
import FanoutReport
import FanoutSim

extension RunReport {
    /// The report of a finished simulation. Reports depend on metrics, never on the simulation; this
    /// target, which depends on both (capacity plans turn runs into reports), puts the two together.
    public init(_ r: RunResult, gitRevision: String) {
        let s = r.scenario
        let info = RunInfo(
            tool: "fanout", version: RunInfo.toolVersion, gitRevision: gitRevision, scenario: s.name, seed: s.seed,
            configHash: s.configHash, clock: s.clock.rawValue, workers: r.workers, durationSeconds: s.durationSeconds,
            wallSeconds: (r.wallSeconds * 1000).rounded() / 1000, startedAtSeconds: r.startedAt.timeIntervalSince1970,
            machine: MachineInfo.current, timerOverheadNanos: (r.timerOverheadNanos * 10).rounded() / 10,
            stageSampleEvery: s.stageSampleEvery, shard: r.shard.isWhole ? nil : r.shard.description, shards: 1)
        self.init(
            info: info, accounting: r.accounting, activities: r.activities, events: r.events, recorder: r.recorder,
            intervals: r.intervals, intervalNanos: r.intervalNanos, peakResidentBytes: r.peakResidentBytes,
            baselineResidentBytes: r.baselineResidentBytes, completion: r.shard.isWhole ? nil : r.completion)
        resources = r.resources
        measurement.sampling = RunReport.samplingRule(s)
        measurement.clockReads = r.clockReads
        measurement.clampedSamples = r.recorder.clamped
        measurement.eventsSkipped = r.eventsSkipped
        measurement.costModel = s.clock == .virtual ? s.costModel.jsonText : nil
        measurement.finalMergeSeconds = r.finalMergeSeconds
    }

    /// The sampling rule of a scenario's runs, in words (summary.json and summary.md say it).
    public static func samplingRule(_ s: Scenario) -> String {
        if s.clock == .virtual {
            return "virtual time: every sample is recorded; stage times are the scenario's cost model (no clock "
                + "is read); endToEnd of each delivery from its modelled completion"
        }
        let n = s.stageSampleEvery
        return "real time: encode timed for 1 event in \(n); validate and route for 1 token push in \(n) and every "
            + "broadcast push; apply for 1 token push and 1 broadcast recipient in \(n), each timed on its own; "
            + "endToEnd of every delivery: one clock read per token push and per group of 16 broadcast recipients "
            + "(the group's last apply: an upper bound)"
    }
}
