import BenchSupport
import Benchmark

/// How the Core benchmarks run and what `swift package benchmark thresholds check` tolerates.
///
/// package-benchmark 1.38.1 checks the p90 of each metric recorded in
/// `Thresholds/Core.<name>.p90.json` with the tolerances given here, both ways (an improvement
/// beyond the tolerance fails too; a metric without a tolerance is held to its exact p90). See
/// `Tolerance` (BenchSupport) and README.md for the choices: allocation counts exact, thread CPU time
/// within ±50%, wall clock only against order-of-magnitude slowdowns, throughput not gated.
enum CoreConfiguration {
    /// 1,000 updates per iteration; scaled figures are per update.
    static var perUpdate: Benchmark.Configuration {
        .init(
            metrics: Tolerance.metrics, timeUnits: .nanoseconds, units: Tolerance.units, warmupIterations: 10,
            scalingFactor: .kilo, maxDuration: .seconds(2), maxIterations: 100_000, thresholds: Tolerance.standard)
    }

    /// One broadcast (10,000 applies) per iteration.
    static var perBroadcast: Benchmark.Configuration {
        .init(
            metrics: Tolerance.metrics, timeUnits: .microseconds, units: Tolerance.units, warmupIterations: 3,
            scalingFactor: .one, maxDuration: .seconds(2), maxIterations: 2000, thresholds: Tolerance.standard)
    }

    /// One 1,000-line trace per iteration; scaled figures are per line. Replay builds a population, so
    /// it allocates: 1,062 or 1,063 times per trace between runs, so ±10 is allowed.
    static var replay: Benchmark.Configuration {
        var thresholds = Tolerance.standard
        thresholds[.mallocCountTotal] = BenchmarkThresholds(absolute: [.p90: 10])
        return .init(
            metrics: Tolerance.metrics, timeUnits: .nanoseconds, units: Tolerance.units, warmupIterations: 3,
            scalingFactor: .kilo, maxDuration: .seconds(2), maxIterations: 10_000, thresholds: thresholds)
    }
}
