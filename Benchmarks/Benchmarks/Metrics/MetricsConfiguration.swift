import Benchmark

/// How the Metrics benchmarks run and their tolerances (see Core/CoreConfiguration.swift).
enum MetricsConfiguration {
    /// Exact allocation counts: 0 for record and merge; the snapshot's (the encoded bytes, zlib's
    /// state) repeat exactly too.
    static var thresholds: [BenchmarkMetric: BenchmarkThresholds] {
        [.mallocCountTotal: Tolerance.exact, .wallClock: Tolerance.wallClock]
    }

    static var metrics: [BenchmarkMetric] { [.wallClock, .throughput, .mallocCountTotal] }

    /// 1,000 samples per iteration; scaled figures are per sample.
    static var record: Benchmark.Configuration {
        .init(
            metrics: metrics, timeUnits: .nanoseconds, units: [.mallocCountTotal: .count], warmupIterations: 10,
            scalingFactor: .kilo, maxDuration: .seconds(1), maxIterations: 100_000, thresholds: thresholds)
    }

    /// One interval histogram encoded and reset per iteration.
    static var snapshot: Benchmark.Configuration { once }

    /// One recorder (every metric) merged per iteration.
    static var merge: Benchmark.Configuration { once }

    private static var once: Benchmark.Configuration {
        .init(
            metrics: metrics, timeUnits: .microseconds, units: [.mallocCountTotal: .count], warmupIterations: 3,
            scalingFactor: .one, maxDuration: .seconds(1), maxIterations: 10_000, thresholds: thresholds)
    }
}

/// The tolerances every suite uses (as in Core/CoreConfiguration.swift; a suite is its own module).
enum Tolerance {
    /// Allocation counts repeat exactly from run to run: any change fails, up or down.
    static var exact: BenchmarkThresholds { BenchmarkThresholds(relative: [.p90: 0], absolute: [.p90: 0]) }
    /// Wall-clock p90 may be up to 21× the recorded one (+2000%); it cannot fail by being faster.
    static var wallClock: BenchmarkThresholds { BenchmarkThresholds(relative: [.p90: 2000]) }
}
