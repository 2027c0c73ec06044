import Benchmark

/// How the Core benchmarks run and what `swift package benchmark thresholds check` tolerates.
///
/// package-benchmark 1.38.1 checks the p90 of each metric recorded in
/// `Thresholds/Core.<name>.p90.json` with the tolerances given here, both ways (an improvement
/// beyond the tolerance fails too; a metric without a tolerance is held to its exact p90).
/// Allocation counts repeat exactly, so they are held exactly. Wall clock's p90 moved up to 13×
/// between identical runs on this shared machine, so it only guards against order-of-magnitude
/// slowdowns (`Tolerance`, README.md); throughput, its reciprocal, is left out of the files.
enum CoreConfiguration {
    static var thresholds: [BenchmarkMetric: BenchmarkThresholds] {
        [.mallocCountTotal: Tolerance.exact, .wallClock: Tolerance.wallClock]
    }

    static var metrics: [BenchmarkMetric] { [.wallClock, .throughput, .mallocCountTotal] }

    /// 1,000 updates per iteration; scaled figures are per update.
    static var perUpdate: Benchmark.Configuration {
        .init(
            metrics: metrics, timeUnits: .nanoseconds, units: [.mallocCountTotal: .count], warmupIterations: 10,
            scalingFactor: .kilo, maxDuration: .seconds(2), maxIterations: 100_000, thresholds: thresholds)
    }

    /// One broadcast (10,000 applies) per iteration.
    static var perBroadcast: Benchmark.Configuration {
        .init(
            metrics: metrics, timeUnits: .microseconds, units: [.mallocCountTotal: .count], warmupIterations: 3,
            scalingFactor: .one, maxDuration: .seconds(2), maxIterations: 2000, thresholds: thresholds)
    }

    /// One 1,000-line trace per iteration; scaled figures are per line. Replay builds a population, so
    /// it allocates: about 1,062 times per trace, give or take one between runs, so ±10 is allowed.
    static var replay: Benchmark.Configuration {
        .init(
            metrics: metrics, timeUnits: .nanoseconds, units: [.mallocCountTotal: .count], warmupIterations: 3,
            scalingFactor: .kilo, maxDuration: .seconds(2), maxIterations: 10_000,
            thresholds: [.mallocCountTotal: BenchmarkThresholds(absolute: [.p90: 10]), .wallClock: Tolerance.wallClock])
    }
}

/// The tolerances every suite uses (the same file is in each suite: a suite is its own module).
enum Tolerance {
    /// Allocation counts repeat exactly from run to run: any change fails, up or down.
    static var exact: BenchmarkThresholds { BenchmarkThresholds(relative: [.p90: 0], absolute: [.p90: 0]) }
    /// Wall-clock p90 may be up to 21× the recorded one (+2000%); it cannot fail by being faster.
    static var wallClock: BenchmarkThresholds { BenchmarkThresholds(relative: [.p90: 2000]) }
}
