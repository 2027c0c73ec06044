import Benchmark

/// How the Loop benchmarks run and their tolerances (see Core/CoreConfiguration.swift).
enum LoopConfiguration {
    /// 1,000 timers or wakeups per iteration; scaled figures are per timer or wakeup.
    static var perOperation: Benchmark.Configuration {
        .init(
            metrics: [.wallClock, .throughput, .mallocCountTotal], timeUnits: .nanoseconds,
            units: [.mallocCountTotal: .count], warmupIterations: 10, scalingFactor: .kilo, maxDuration: .seconds(2),
            maxIterations: 20_000,
            thresholds: [.mallocCountTotal: Tolerance.exact, .wallClock: Tolerance.wallClock])
    }
}

/// The tolerances every suite uses (as in Core/CoreConfiguration.swift; a suite is its own module).
enum Tolerance {
    /// Allocation counts repeat exactly from run to run: any change fails, up or down.
    static var exact: BenchmarkThresholds { BenchmarkThresholds(relative: [.p90: 0], absolute: [.p90: 0]) }
    /// Wall-clock p90 may be up to 21× the recorded one (+2000%); it cannot fail by being faster.
    static var wallClock: BenchmarkThresholds { BenchmarkThresholds(relative: [.p90: 2000]) }
}
