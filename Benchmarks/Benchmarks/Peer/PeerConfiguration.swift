import BenchSupport
import Benchmark

/// The peer baseline runs like the Core suite (see Core/CoreConfiguration.swift): 1,000 updates per
/// iteration. Its allocation counts repeat exactly from run to run, so they are held exactly too.
enum PeerConfiguration {
    static var perUpdate: Benchmark.Configuration {
        .init(
            metrics: Tolerance.metrics, timeUnits: .nanoseconds, units: Tolerance.units, warmupIterations: 3,
            scalingFactor: .kilo, maxDuration: .seconds(3), maxIterations: 10_000, thresholds: Tolerance.standard)
    }
}
