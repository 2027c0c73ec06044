import FanoutMetrics
import FanoutReport
import FanoutSim

extension RunReport {
    /// The report of a finished simulation (reports depend on metrics, never on the simulation: the
    /// command puts the two together).
    init(_ r: RunResult, gitRevision: String) {
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
    }
}
