import BenchSupport
import Benchmark

/// How the Metrics benchmarks run and their tolerances (see Core/CoreConfiguration.swift). Allocation
/// counts are exact: 0 for record and merge; the snapshot's (the encoded bytes, zlib's state) repeat too.
enum MetricsConfiguration {
    /// 1,000 samples per iteration; scaled figures are per sample.
    static var record: Benchmark.Configuration {
        .init(
            metrics: Tolerance.metrics, timeUnits: .nanoseconds, units: Tolerance.units, warmupIterations: 10,
            scalingFactor: .kilo, maxDuration: .seconds(1), maxIterations: 100_000, thresholds: Tolerance.standard)
    }

    /// One interval histogram encoded and reset per iteration.
    static var snapshot: Benchmark.Configuration { once }

    /// One recorder (every metric) merged per iteration.
    static var merge: Benchmark.Configuration { once }

    private static var once: Benchmark.Configuration {
        .init(
            metrics: Tolerance.metrics, timeUnits: .microseconds, units: Tolerance.units, warmupIterations: 3,
            scalingFactor: .one, maxDuration: .seconds(1), maxIterations: 10_000, thresholds: Tolerance.standard)
    }
}
