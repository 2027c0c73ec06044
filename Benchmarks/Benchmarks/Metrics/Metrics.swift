import BenchSupport
import Benchmark
import FanoutMetrics

// Latency recording as the workers do it: a sample into the worker's `IntervalRecorder` (HdrHistogram's
// layout, preallocated; per update, so per 1,000 samples here), an interval snapshot (take the interval's
// histogram and its V2-compressed encoding, as `latency.hlog` gets once per interval and metric), and the
// merge of one worker's interval into the run totals (every metric, counts added).

let benchmarks: @Sendable () -> Void = {
    Benchmark(
        "record",
        configuration: MetricsConfiguration.record
    ) { benchmark, input in
        let cpu = ThreadCPU.nanos()
        for k in benchmark.scaledIterations {
            input.recorder.record(.endToEnd, nanos: input.samples[k & (Samples.count - 1)])
        }
        blackHole(input.recorder.isEmpty)
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        Samples()
    }

    Benchmark(
        "snapshot",
        configuration: MetricsConfiguration.snapshot
    ) { benchmark, input in
        // One interval: 10,000 samples (outside the measured region), then encode and reset.
        input.fillInterval()
        benchmark.startMeasurement()
        let cpu = ThreadCPU.nanos()
        let taken = input.interval.takeInterval()
        blackHole(taken[.endToEnd].encodedCompressed())
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        Samples()
    }

    Benchmark(
        "merge",
        configuration: MetricsConfiguration.merge
    ) { benchmark, input in
        let cpu = ThreadCPU.nanos()
        input.total.add(input.worker)
        blackHole(input.total.clamped)
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: { () -> Samples in
        let input = Samples()
        input.fillWorker()
        return input
    }
}

/// Latency samples spread over powers of two from 100 ns to ~13 ms, fixed (the same every run).
final class Samples {
    static let count = 4096
    let samples: [UInt64]
    let recorder = IntervalRecorder()
    let interval = IntervalRecorder()
    var total = LatencyRecorder()
    var worker = LatencyRecorder()

    init() {
        var state: UInt64 = 0x5EED_1234
        var values: [UInt64] = []
        for _ in 0..<Samples.count {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let mantissa = 100 + (state >> 40) % 100  // 100..<200
            values.append(mantissa << ((state >> 20) % 17))  // up to ~13 ms
        }
        samples = values
    }

    func fillInterval() {
        for k in 0..<10_000 { interval.record(.endToEnd, nanos: samples[k & (Samples.count - 1)]) }
    }

    func fillWorker() {
        for metric in Metric.allCases {
            for k in 0..<10_000 {
                worker.record(metric, nanos: samples[(k &* 7 &+ metric.rawValue) & (Samples.count - 1)])
            }
        }
    }
}
