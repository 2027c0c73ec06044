import BenchSupport
import Benchmark
import CRawUV
import UVLoop

// UVLoop against libuv driven from C (Sources/CRawUV), the same work on both sides:
// - timers: 1,000 one-shot timers started at timeout 0, then the loop runs until all have fired
//   (start, the timer pass, the callback); per timer after scaling.
// - wakeups: 1,000 times, an async wakeup sent and one loop iteration that runs its callback (the
//   eventfd write, epoll, read, callback); per wakeup after scaling.
// `make bench` reports UVLoop's overhead as (uvloop median − libuv median) / libuv median.

let benchmarks: @Sendable () -> Void = {

    let swiftTimers = Holder<SwiftTimerChurn>()
    Benchmark("timers.uvloop", configuration: LoopConfiguration.perOperation) { benchmark in
        let cpu = ThreadCPU.nanos()
        blackHole(swiftTimers.value!.churn())
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        swiftTimers.value = try SwiftTimerChurn(count: 1000)
    } teardown: {
        try swiftTimers.value?.close()
        swiftTimers.value = nil
    }

    let rawTimers = Holder<OpaquePointer>()
    Benchmark("timers.libuv", configuration: LoopConfiguration.perOperation) { benchmark in
        let cpu = ThreadCPU.nanos()
        blackHole(crawuv_timers_churn(rawTimers.value!))
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        rawTimers.value = crawuv_timers_create(1000)
        precondition(rawTimers.value != nil, "crawuv_timers_create failed")
    } teardown: {
        precondition(crawuv_timers_destroy(rawTimers.value!) == 0, "uv_loop_close failed")
        rawTimers.value = nil
    }

    let swiftWakeups = Holder<SwiftWakeups>()
    Benchmark("wakeups.uvloop", configuration: LoopConfiguration.perOperation) { benchmark in
        let cpu = ThreadCPU.nanos()
        blackHole(swiftWakeups.value!.run(count: benchmark.scaledIterations.count))
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        swiftWakeups.value = try SwiftWakeups()
    } teardown: {
        try swiftWakeups.value?.close()
        swiftWakeups.value = nil
    }

    let rawWakeups = Holder<OpaquePointer>()
    Benchmark("wakeups.libuv", configuration: LoopConfiguration.perOperation) { benchmark in
        let cpu = ThreadCPU.nanos()
        blackHole(crawuv_wakeups_run(rawWakeups.value!, Int32(benchmark.scaledIterations.count)))
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        rawWakeups.value = crawuv_wakeups_create()
        precondition(rawWakeups.value != nil, "crawuv_wakeups_create failed")
    } teardown: {
        precondition(crawuv_wakeups_destroy(rawWakeups.value!) == 0, "uv_loop_close failed")
        rawWakeups.value = nil
    }
}

/// What a benchmark's setup makes and its teardown closes.
final class Holder<Value> {
    var value: Value?
}

/// Counts callbacks; the timers' and wakeup's callbacks capture it (one context, made once).
final class Counter {
    var fired: UInt64 = 0
}

final class SwiftTimerChurn {
    let loop: EventLoop
    let timers: [Timer]
    let counter = Counter()

    init(count: Int) throws(UVError) {
        loop = try EventLoop()
        let counter = counter
        timers = (0..<count).map { [loop] _ in Timer(loop: loop) { _ in counter.fired &+= 1 } }
    }

    func churn() -> UInt64 {
        let before = counter.fired
        for timer in timers { timer.start(afterMillis: 0) }
        loop.run()
        return counter.fired &- before
    }

    func close() throws(UVError) {
        for timer in timers { timer.close() }
        try loop.close()
    }
}

final class SwiftWakeups {
    let loop: EventLoop
    let wakeup: Wakeup
    let counter = Counter()

    init() throws(UVError) {
        loop = try EventLoop()
        let counter = counter
        wakeup = try Wakeup(loop: loop) { _ in counter.fired &+= 1 }
    }

    func run(count: Int) -> UInt64 {
        let before = counter.fired
        for _ in 0..<count {
            wakeup.send()
            loop.runOnce()
        }
        return counter.fired &- before
    }

    func close() throws(UVError) {
        wakeup.close()
        try loop.close()
    }
}
