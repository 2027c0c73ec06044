import Benchmark

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The CPU time of the measuring thread (`CLOCK_THREAD_CPUTIME_ID`, ns resolution on Linux), recorded
/// per iteration as the custom metric `cpuThread`. Unlike wall clock it does not grow while the thread
/// waits for a core, so on a shared machine its percentiles hold still where wall clock's p90 jumps by
/// the length of a scheduler slice. It still includes the kernel time of the thread's own syscalls.
public enum ThreadCPU {
    /// The custom metric: nanoseconds per iteration (scaled per update like wall clock).
    public static var metric: BenchmarkMetric {
        .custom("cpuThread", polarity: .prefersSmaller, useScalingFactor: true)
    }

    @inline(__always)
    public static func nanos() -> Int {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return time.tv_sec * 1_000_000_000 + time.tv_nsec
    }
}

extension Benchmark {
    /// Ends the measured region and records the thread CPU time used since `start` (`ThreadCPU.nanos()`)
    /// outside it, so that recording it allocates nothing inside the region.
    @inline(__always)
    public func stopMeasurement(cpuSince start: Int) {
        let used = ThreadCPU.nanos() - start
        stopMeasurement()
        measurement(ThreadCPU.metric, used)
    }
}

/// The tolerances every suite uses with package-benchmark's `thresholds check` (README.md).
public enum Tolerance {
    /// Allocation counts repeat exactly from run to run: any change fails, up or down.
    public static var exact: BenchmarkThresholds { BenchmarkThresholds(relative: [.p90: 0], absolute: [.p90: 0]) }
    /// Wall-clock p90 may be up to 21× the recorded one (+2000%); it cannot fail by being faster.
    public static var wallClock: BenchmarkThresholds { BenchmarkThresholds(relative: [.p90: 2000]) }
    /// Thread CPU time p90 within ±90% of the recorded one: a slowdown to 1.9× fails, and so does a
    /// speed-up to a tenth (re-record after an optimisation).
    public static var cpu: BenchmarkThresholds { BenchmarkThresholds(relative: [.p90: cpuPercent]) }
    public static let cpuPercent: Double = 90

    /// The metrics every benchmark records.
    public static var metrics: [BenchmarkMetric] { [.wallClock, .throughput, .mallocCountTotal, ThreadCPU.metric] }
    /// Allocation and CPU counts as plain numbers (no K/M units), so reports keep every digit.
    public static var units: [BenchmarkMetric: BenchmarkUnits] { [.mallocCountTotal: .count, ThreadCPU.metric: .count] }

    /// Exact allocations, loose wall clock, CPU time within `cpuPercent`; throughput is not gated.
    public static var standard: [BenchmarkMetric: BenchmarkThresholds] {
        [.mallocCountTotal: exact, .wallClock: wallClock, ThreadCPU.metric: cpu]
    }
}
