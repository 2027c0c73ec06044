import BenchSupport
import Benchmark

/// How the Loop benchmarks run and their tolerances (see Core/CoreConfiguration.swift).
enum LoopConfiguration {
    /// 1,000 timers or wakeups per iteration; scaled figures are per timer or wakeup.
    static var perOperation: Benchmark.Configuration {
        .init(
            metrics: Tolerance.metrics, timeUnits: .nanoseconds, units: Tolerance.units, warmupIterations: 10,
            scalingFactor: .kilo, maxDuration: .seconds(2), maxIterations: 20_000, thresholds: Tolerance.standard)
    }
}
