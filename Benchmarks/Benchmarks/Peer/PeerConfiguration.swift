import Benchmark

/// The peer baseline runs like the Core suite (see Core/CoreConfiguration.swift): 1,000 updates per
/// iteration. Its allocation counts repeat exactly from run to run, so they are held exactly too.
enum PeerConfiguration {
    static var perUpdate: Benchmark.Configuration {
        .init(
            metrics: [.wallClock, .throughput, .mallocCountTotal], timeUnits: .nanoseconds,
            units: [.mallocCountTotal: .count], warmupIterations: 3, scalingFactor: .kilo, maxDuration: .seconds(3),
            maxIterations: 10_000,
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
