import Dispatch
import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import Foundation
import Histogram
import UVLoop

/// What a worker tells the coordinator. Messages go through one locked queue, drained when the
/// coordinator's `Wakeup` fires: the only object the threads share.
enum WorkerMessage: Sendable {
    case ready(worker: Int, activities: Int)
    case progress(worker: Int, sample: ProgressSample)
    case finished(worker: Int, result: WorkerResult)
    case failed(worker: Int, message: String)
}

/// A worker's cumulative counts and its end-to-end histogram since the last sample, with what it
/// has finished since: log intervals before `intervalIndex` and event completions.
public struct ProgressSample: Sendable {
    public var accounting: Accounting
    /// The end-to-end histogram, encoded (V2, a few kilobytes): the worker resets its own in place
    /// instead of handing over (and reallocating) half a megabyte of counts every second.
    public var interval: [UInt8]
    public var eventsProcessed: Int
    public var intervalIndex = 0
    public var intervals: [EncodedInterval] = []
    public var completions = CompletionChunk()
}

/// Everything a worker measured and had not handed over yet, once at the end.
public struct WorkerResult: Sendable {
    public var accounting: Accounting
    public var recorder: LatencyRecorder
    /// The completion of the events not handed over in progress samples.
    public var completions: CompletionChunk
    public var activities: Int
    public var eventsProcessed: Int
    public var intervals: [EncodedInterval]
    public var intervalNanos: UInt64
    /// Broadcasts this worker applied in more than one slice (real time).
    public var slicedFanouts = 0
}

/// One metric's histogram for one interval of the log, compressed (HdrHistogram V2).
public struct EncodedInterval: Sendable {
    public var index: Int
    public var metric: Metric
    public var bytes: [UInt8]
}

/// A live view of a running simulation, once a second.
public struct ProgressLine: Sendable {
    public var elapsedSeconds: Double
    public var deliveriesPerSecond: Double
    public var interval: LatencySummary
    public var accounting: Accounting
}

/// The merged outcome of a run.
public struct RunResult: Sendable {
    public var scenario: Scenario
    public var workers: Int
    public var accounting: Accounting
    public var recorder: LatencyRecorder
    public var activities: Int
    public var events: Int
    public var wallSeconds: Double
    public var timerOverheadNanos: Double
    public var peakResidentBytes: Int
    public var baselineResidentBytes: Int
    public var startedAt: Date
    /// Interval histograms merged across workers, by interval then metric (for `latency.hlog`).
    public var intervals: [MergedInterval]
    public var intervalNanos: UInt64
    /// The devices this run simulated.
    public var shard: Shard = .whole
    /// Resident memory and open file descriptors while the workers run: at the start, then every 10 s.
    public var resources: [ResourceSample] = []
    /// Per source event, merged across workers: the intended time, when its last local recipient
    /// was applied (0: none) and how many local recipients it had. A sharded run writes these so
    /// that `fanout merge` can take the last recipient over all shards. Empty unless the run was
    /// asked to keep them (`keepEventCompletions`): they grow with the run's length.
    public var completion: EventCompletions
    /// Broadcasts applied in more than one slice, summed over workers (real time).
    public var slicedFanouts = 0
}

/// Per-event completion columns (see `RunResult.completion`).
public struct EventCompletions: Sendable, Equatable {
    public var intendedNanos: [UInt64] = []
    public var lastNanos: [UInt64] = []
    public var recipients: [Int32] = []

    public init() {}

    public var count: Int { intendedNanos.count }

    /// Takes, event by event, the later completion and the sum of recipients; `other`'s first event
    /// is this one's event `offset`.
    public mutating func combine(_ other: EventCompletions, at offset: Int = 0) {
        while intendedNanos.count < offset + other.count {
            let e = intendedNanos.count - offset
            intendedNanos.append(e >= 0 ? other.intendedNanos[e] : 0)
            lastNanos.append(0)
            recipients.append(0)
        }
        for e in 0..<other.count {
            lastNanos[offset + e] = max(lastNanos[offset + e], other.lastNanos[e])
            recipients[offset + e] &+= other.recipients[e]
            if other.recipients[e] > 0 { intendedNanos[offset + e] = other.intendedNanos[e] }
        }
    }

    /// The first `n` events.
    public func prefix(_ n: Int) -> EventCompletions {
        var out = EventCompletions()
        out.intendedNanos = Array(intendedNanos[..<n])
        out.lastNanos = Array(lastNanos[..<n])
        out.recipients = Array(recipients[..<n])
        return out
    }

    /// Forgets the first `n` events (keeping the columns' capacity).
    public mutating func removeFirst(_ n: Int) {
        intendedNanos.removeFirst(n)
        lastNanos.removeFirst(n)
        recipients.removeFirst(n)
    }

    /// Appends events.
    public mutating func append(_ other: EventCompletions) {
        intendedNanos.append(contentsOf: other.intendedNanos)
        lastNanos.append(contentsOf: other.lastNanos)
        recipients.append(contentsOf: other.recipients)
    }

    /// Calls `body` for every event that reached a recipient, in event order, with its intended
    /// time, its completion latency (last recipient − intended time) and its fan-out.
    public func forEach(
        upTo end: Int? = nil, _ body: (_ intended: UInt64, _ latency: UInt64, _ fanout: Int) -> Void
    ) {
        for e in 0..<(end ?? count) where recipients[e] > 0 {
            body(intendedNanos[e], lastNanos[e] &- min(lastNanos[e], intendedNanos[e]), Int(recipients[e]))
        }
    }

    /// The completion histograms (all events, and by fan-out size) into `recorder`.
    public func record(into recorder: inout LatencyRecorder, upTo end: Int? = nil) {
        forEach(upTo: end) { _, latency, fanout in
            recorder.record(.fanoutCompletion, nanos: latency)
            recorder.record(Metric.completionBucket(fanout: fanout), nanos: latency)
        }
    }

    /// Completion per interval of the histogram log, by the event's intended time, for the whole
    /// metric and its size buckets. Events are in intended-time order: one interval at a time.
    public func intervals(intervalNanos: UInt64) -> [MergedInterval] {
        var builder = CompletionIntervals(intervalNanos: intervalNanos)
        var merged: [MergedInterval] = []
        forEach { intended, latency, fanout in
            merged.append(contentsOf: builder.add(intended: intended, latency: latency, fanout: fanout))
        }
        merged.append(contentsOf: builder.flush())
        return merged
    }
}

/// The histogram of one metric over one interval, merged across workers and compressed.
public struct MergedInterval: Sendable {
    public var index: Int
    public var metric: Metric
    public var bytes: [UInt8]
    public var maxNanos: UInt64

    public init(index: Int, metric: Metric, bytes: [UInt8], maxNanos: UInt64) {
        self.index = index
        self.metric = metric
        self.bytes = bytes
        self.maxNanos = maxNanos
    }
}

/// Runs a scenario: one thread, one `EventLoop` and one slice of the devices per worker.
public enum Simulation {
    /// `keepEventCompletions`: keep every event's completion columns in `RunResult.completion`
    /// (20 bytes per event; sharded runs write them, capacity plans read them). Without it the run's
    /// memory does not grow with its length.
    public static func run(
        _ scenario: Scenario, workers requested: Int, shard: Shard = .whole, keepEventCompletions: Bool = true,
        progress: @escaping @Sendable (ProgressLine) -> Void
    ) throws -> RunResult {
        let workers = requested > 0 ? requested : max(ProcessInfo.processInfo.activeProcessorCount, 1)
        let world = World(scenario: scenario, shard: shard)
        let baseline = ResourceUsage.residentBytes()
        let overhead = measureClockOverhead()
        let startedAt = Date()
        let intervalNanos =
            scenario.clock == .real ? WorkerEngine.realIntervalNanos : WorkerEngine.virtualIntervalNanos
        let collector = try RunCollector(
            workers: workers, intervalNanos: intervalNanos, keepEvents: keepEventCompletions)
        let coordinator = try Coordinator(workers: workers, collector: collector)
        let gate = DispatchSemaphore(value: 0)
        let start = StartTime()
        var threads: [Thread] = []
        for k in 0..<workers {
            let sender = coordinator.mailbox
            let thread = Thread {
                WorkerThread.main(world: world, index: k, count: workers, gate: gate, start: start, mailbox: sender)
            }
            thread.name = "fanout-worker-\(k)"
            thread.stackSize = 8 << 20
            threads.append(thread)
            thread.start()
        }
        let results = try coordinator.run(gate: gate, start: start, progress: progress)
        let wall = Double(EventLoop.hrtimeNanos &- start.value) / 1e9
        // After the wall time: merging what the workers handed over last is not part of the run.
        try coordinator.finishCollecting()
        var accounting = Accounting()
        var recorder = LatencyRecorder()
        var activities = 0
        for r in results {
            accounting.add(r.accounting)
            recorder.add(r.recorder)
            activities += r.activities
        }
        let measured = coordinator.collector
        recorder.add(measured.completionRecorder)
        var result = RunResult(
            scenario: scenario, workers: workers, accounting: accounting, recorder: recorder, activities: activities,
            events: measured.events, wallSeconds: wall, timerOverheadNanos: overhead,
            peakResidentBytes: ResourceUsage.peakResidentBytes(), baselineResidentBytes: baseline,
            startedAt: startedAt, intervals: try measured.intervals(), intervalNanos: intervalNanos,
            completion: measured.kept)
        result.shard = shard
        // Sampled while the workers run (their threads, loops and descriptors exist): start, every 10 s.
        result.resources = coordinator.resources
        result.slicedFanouts = results.reduce(0) { $0 + $1.slicedFanouts }
        return result
    }

    /// The cost of one clock read (`uv_hrtime`), which every timed measurement includes.
    static func measureClockOverhead() -> Double {
        let n = 1_000_000
        var sink: UInt64 = 0
        let t0 = EventLoop.hrtimeNanos
        for _ in 0..<n { sink &+= EventLoop.hrtimeNanos }
        let t1 = EventLoop.hrtimeNanos
        withExtendedLifetime(sink) {}  // keeps the reads from being optimised away
        return Double(t1 &- t0) / Double(n)
    }
}

/// The common start instant of the workers (hrtime nanoseconds), set once by the coordinator.
final class StartTime: @unchecked Sendable {
    // @unchecked: written once before the start gate opens, read by workers only after it does
    // (the semaphore orders the accesses).
    var value: UInt64 = 0
}

/// The workers' side of the coordinator's queue.
final class Mailbox: @unchecked Sendable {
    // @unchecked: `messages` is only touched under `lock`; `sender` is Sendable.
    private let lock = NSLock()
    private var messages: [WorkerMessage] = []
    let sender: Wakeup.Sender

    init(sender: Wakeup.Sender) { self.sender = sender }

    func post(_ message: WorkerMessage) {
        lock.withLock { messages.append(message) }
        sender.send()
    }

    func drain() -> [WorkerMessage] {
        lock.withLock {
            let all = messages
            messages.removeAll()
            return all
        }
    }
}

/// The main thread's loop: collects messages, opens the start gate, prints progress once a second.
final class Coordinator {
    let loop: EventLoop
    var wakeup: Wakeup!
    let mailbox: Mailbox
    let workers: Int
    /// Resource samples taken on the coordinator's thread (start, then every 10 s).
    private(set) var resources: [ResourceSample] = []
    /// The intervals and event completions handed over so far.
    private(set) var collector: RunCollector

    init(workers: Int, collector: RunCollector) throws {
        self.workers = workers
        self.collector = collector
        loop = try EventLoop()
        let box = DrainBox()
        wakeup = try Wakeup(loop: loop) { _ in box.drain?() }
        mailbox = Mailbox(sender: wakeup.sender)
        self.box = box
    }

    /// Merges and records what is still open once every worker has finished.
    func finishCollecting() throws { try collector.finish() }

    /// Holds the drain closure, set in `run` (it captures that call's state).
    private let box: DrainBox

    final class DrainBox {
        var drain: (() -> Void)?
    }

    func run(
        gate: DispatchSemaphore, start: StartTime, progress: @escaping @Sendable (ProgressLine) -> Void
    )
        throws -> [WorkerResult]
    {
        var ready = 0
        var results = [WorkerResult?](repeating: nil, count: workers)
        var samples = [ProgressSample?](repeating: nil, count: workers)
        var failure: String?
        var interval = LatencyRecorder.makeHistogram()
        var lastDeliveries = 0
        var lastTick: UInt64 = 0
        var finished = 0
        func tick() {
            let now = EventLoop.hrtimeNanos
            var accounting = Accounting()
            for s in samples.compactMap({ $0 }) { accounting.add(s.accounting) }
            let seconds = Double(now &- lastTick) / 1e9
            let line = ProgressLine(
                elapsedSeconds: Double(now &- start.value) / 1e9,
                deliveriesPerSecond: seconds > 0 ? Double(accounting.deliveries - lastDeliveries) / seconds : 0,
                interval: LatencySummary(interval), accounting: accounting)
            progress(line)
            let elapsed = Double(now &- start.value) / 1e9
            // Only while the workers run: the last tick comes after their threads and loops are gone.
            if finished < workers, elapsed >= Double(resources.count) * ResourceSample.intervalSeconds {
                resources.append(ResourceSample.now(elapsedSeconds: elapsed))
            }
            lastDeliveries = accounting.deliveries
            lastTick = now
            interval.reset()
        }
        let tickTimer = Timer(loop: loop) { _ in tick() }
        box.drain = { [self] in
            for message in mailbox.drain() {
                switch message {
                case .ready:
                    ready += 1
                    if ready == workers {
                        resources.append(ResourceSample.now(elapsedSeconds: 0))
                        start.value = EventLoop.hrtimeNanos
                        lastTick = start.value
                        for _ in 0..<workers { gate.signal() }
                        tickTimer.start(afterMillis: 1000, repeatMillis: 1000)
                    }
                case .progress(let worker, var sample):
                    if let h = try? HistogramCodec.decode(sample.interval) { interval.add(h) }
                    do {
                        try collector.add(
                            worker: worker, intervals: sample.intervals, intervalIndex: sample.intervalIndex,
                            completions: sample.completions)
                    } catch {
                        failure = "\(error)"
                    }
                    sample.intervals = []
                    sample.interval = []
                    sample.completions = CompletionChunk()
                    samples[worker] = sample
                case .finished(let worker, var result):
                    do {
                        try collector.add(
                            worker: worker, intervals: result.intervals, intervalIndex: .max,
                            completions: result.completions)
                    } catch {
                        failure = "\(error)"
                    }
                    result.intervals = []
                    result.completions = CompletionChunk()
                    results[worker] = result
                    samples[worker] = ProgressSample(
                        accounting: result.accounting, interval: [],
                        eventsProcessed: result.eventsProcessed)
                    finished += 1
                case .failed(_, let message):
                    failure = message
                    finished += 1
                }
            }
            if finished == workers {
                tickTimer.close()
                wakeup.close()
            }
        }
        _ = loop.run()
        box.drain = nil
        try loop.close()
        if let failure { throw SimulationError(message: failure) }
        tick()
        return results.map { $0! }
    }
}

public struct SimulationError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// The body of a worker thread.
enum WorkerThread {
    static func main(
        world: World, index: Int, count: Int, gate: DispatchSemaphore, start: StartTime,
        mailbox: Mailbox
    ) {
        do {
            try runWorker(world: world, index: index, count: count, gate: gate, start: start, mailbox: mailbox)
        } catch {
            mailbox.post(.failed(worker: index, message: "worker \(index): \(error)"))
        }
    }

    static func runWorker(
        world: World, index: Int, count: Int, gate: DispatchSemaphore, start: StartTime,
        mailbox: Mailbox
    ) throws {
        let scenario = world.scenario
        let loop = try EventLoop()
        // Populate before the start gate so that the clock starts with every worker ready.
        let engine = WorkerEngine(world: world, index: index, count: count, hrtime: { EventLoop.hrtimeNanos })
        mailbox.post(.ready(worker: index, activities: engine.activityCount))
        gate.wait()
        let startNanos = start.value
        if scenario.clock == .real { engine.startRealClock(atHrtime: startNanos) }
        let slicing = scenario.sliceBroadcasts
        var schedule = EventSchedule(scenario: scenario, world: world)
        var next = schedule.next()
        var lastProgress = EventLoop.hrtimeNanos
        loop.updateTime()
        let loopStartMillis = loop.nowMillis &- (EventLoop.hrtimeNanos &- startNanos) / 1_000_000
        func publishIfDue() {
            let now = EventLoop.hrtimeNanos
            if now &- lastProgress >= 1_000_000_000 {
                lastProgress = now
                mailbox.post(.progress(worker: index, sample: engine.takeSample()))
            }
        }
        func finish() {
            mailbox.post(.finished(worker: index, result: engine.result()))
        }
        let body = Timer(loop: loop) { t in
            switch scenario.clock {
            case .real:
                // Run everything already due. libuv timers have 1 ms granularity, so the timer is
                // armed 1 ms early and the last stretch is spun on the monotonic clock: events start
                // at their instant, not up to a millisecond late. With `sliceBroadcasts` a large
                // broadcast stops between batches once the next event is due (the engine's slices);
                // due events go first, the rest of the broadcast runs when nothing is due. After 10 ms
                // of continuous work the loop gets control back,
                // however far behind schedule the worker is (progress samples still go out).
                let sliceEnd = EventLoop.hrtimeNanos &+ 10_000_000
                while EventLoop.hrtimeNanos < sliceEnd {
                    let now = EventLoop.hrtimeNanos &- startNanos
                    if let event = next, event.intendedNanos <= now {
                        next = schedule.next()
                        if slicing {
                            engine.yieldAtNanos = next?.intendedNanos ?? .max
                            engine.yieldForSource = next?.source ?? -1
                        }
                        engine.process(event)
                    } else if engine.hasPendingSlices {
                        engine.yieldAtNanos = next?.intendedNanos ?? .max
                        engine.yieldForSource = next?.source ?? -1
                        engine.runSlice()
                    } else if let event = next, event.intendedNanos - now <= 1_000_000 {
                        while EventLoop.hrtimeNanos &- startNanos < event.intendedNanos {}
                    } else {
                        break
                    }
                }
                publishIfDue()
                if engine.hasPendingSlices {
                    t.start(afterMillis: 0)
                } else if let event = next {
                    let deadline = event.intendedNanos / 1_000_000
                    loop.updateTime()  // the cached loop time is as old as this callback
                    t.start(atLoopMillis: loopStartMillis + (deadline > 0 ? deadline - 1 : 0))
                } else {
                    t.close()
                    finish()
                }
            case .virtual:
                // As fast as the CPU allows, in slices of about 10 ms so the loop stays responsive.
                let sliceEnd = EventLoop.hrtimeNanos &+ 10_000_000
                while let event = next {
                    engine.process(event)
                    next = schedule.next()
                    if EventLoop.hrtimeNanos >= sliceEnd { break }
                }
                publishIfDue()
                if next != nil {
                    t.start(afterMillis: 0)
                } else {
                    t.close()
                    finish()
                }
            }
        }
        body.start(afterMillis: 0)
        _ = loop.run()
        try loop.close()
    }
}
