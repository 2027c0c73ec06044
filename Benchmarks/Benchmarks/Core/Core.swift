import BenchFixtures
import BenchSupport
import Benchmark
import FanoutCore
import FanoutTrace

// The fan-out core path, stage by stage and whole, through FanoutCore's public API.
//
// Per-update benchmarks run 1,000 updates per iteration (`scalingFactor: .kilo`): the scaled
// figures (marked `*` in the text output) are per update, the thresholds and the raw histograms
// per 1,000 updates. Each workload is built and warmed up in `setup`, outside the measured region,
// so `mallocCountTotal` counts only what the measured updates allocate: 0 on the hot path. Every
// benchmark also records the thread's CPU time (`cpuThread`, BenchSupport) next to wall clock.

let benchmarks: @Sendable () -> Void = {
    Benchmark("encode", configuration: CoreConfiguration.perUpdate) { benchmark, workload in
        let cpu = ThreadCPU.nanos()
        for k in benchmark.scaledIterations { blackHole(workload.encode(variant: k)) }
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        TokenWorkload()
    }

    Benchmark("validate", configuration: CoreConfiguration.perUpdate) { benchmark, workload in
        let cpu = ThreadCPU.nanos()
        for k in benchmark.scaledIterations { blackHole(workload.validate(k)) }
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        TokenWorkload()
    }

    Benchmark("route", configuration: CoreConfiguration.perUpdate) { benchmark, workload in
        let cpu = ThreadCPU.nanos()
        for k in benchmark.scaledIterations { blackHole(workload.route(k)) }
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        TokenWorkload()
    }

    Benchmark("apply", configuration: CoreConfiguration.perUpdate) { benchmark, workload in
        workload.prepareApply(variant: benchmark.currentIteration)
        benchmark.startMeasurement()
        let cpu = ThreadCPU.nanos()
        for k in benchmark.scaledIterations { blackHole(workload.apply(k)) }
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        TokenWorkload()
    }

    Benchmark("pipeline.token", configuration: CoreConfiguration.perUpdate) { benchmark, workload in
        let cpu = ThreadCPU.nanos()
        for k in benchmark.scaledIterations { blackHole(workload.update(k)) }
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        TokenWorkload()
    }

    Benchmark(
        "pipeline.broadcast10k",
        configuration: CoreConfiguration.perBroadcast
    ) { benchmark, workload in
        let cpu = ThreadCPU.nanos()
        blackHole(workload.broadcast())
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        BroadcastWorkload(subscribers: 10_000)
    }

    // One iteration replays a whole 1,000-line trace from its first line (header, requests, pushes,
    // rotations, dismissals) into a fresh replay: scaled figures are per line, throughput lines/s.
    Benchmark(
        "replay",
        configuration: CoreConfiguration.replay
    ) { benchmark, trace in
        let cpu = ThreadCPU.nanos()
        let replay = TraceReplay()
        do {
            for line in trace.lines { try line.withUnsafeBytes { try replay.apply(line: $0) } }
            try replay.finish()
        } catch {
            benchmark.error("replay failed: \(error)")
        }
        blackHole(replay)
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        ReplayInput(lines: TraceFixture.lines(count: 1000))
    }
}

/// The trace's lines, made once in setup.
final class ReplayInput {
    let lines: [[UInt8]]

    init(lines: [[UInt8]]) {
        precondition(lines.count == 1000, "replay is scaled per 1,000 lines")
        self.lines = lines
    }
}
