import Dispatch
import FanoutCore
import FanoutMetrics
import Foundation
import UVLoop

/// What the coordinator and the workers share: the start gate and instant, the mailbox, the event feed,
/// a stop flag (a worker failed: the others stop at their next slice) and the exit count.
final class WorkerShared: Sendable {
    let world: World
    let workers: Int
    let mailbox: Mailbox
    let fault: Simulation.Fault
    let feed: EventFeed
    /// Each worker hands over its pipeline with its result (`fanout run --state`).
    let keepState: Bool
    let gate = DispatchSemaphore(value: 0)
    /// Signalled by each worker thread as its last act.
    let exited = DispatchSemaphore(value: 0)
    let start = StartTime()
    let stop = StopFlag()

    init(
        world: World, workers: Int, mailbox: Mailbox, fault: Simulation.Fault, feed: EventFeed, keepState: Bool = false
    ) {
        self.keepState = keepState
        self.world = world
        self.workers = workers
        self.mailbox = mailbox
        self.fault = fault
        self.feed = feed
    }
}

/// The common start instant of the workers (hrtime nanoseconds), set once by the coordinator.
final class StartTime: @unchecked Sendable {
    // @unchecked: written once before the start gate opens, read by workers only after it does
    // (the semaphore orders the accesses).
    var value: UInt64 = 0
}

/// Set once when the run must stop early.
final class StopFlag: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = Lock()
    private var value = false

    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

/// The workers' side of the coordinator's queue.
final class Mailbox: @unchecked Sendable {
    // @unchecked: `messages` is only touched under `lock`; `sender` is Sendable.
    private let lock = Lock()
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
    /// When the last worker's result arrived (hrtime): the end of the run's wall time.
    private(set) var lastWorkerFinishedNanos: UInt64 = 0

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

    /// Runs until every worker has ended (finished, failed or stopped). The first failure (a worker's
    /// error, or a measurement that could not be merged) stops the other workers and is thrown, after
    /// every worker has ended: no thread is left waiting at the gate or running.
    func run(shared: WorkerShared, progress: @escaping @Sendable (ProgressLine) -> Void) throws -> [WorkerResult] {
        let start = shared.start
        var ready = 0
        var gateOpen = false
        var results = [WorkerResult?](repeating: nil, count: workers)
        var accountings = [Accounting](repeating: Accounting(), count: workers)
        var failure: String?
        var lastDeliveries = 0
        var lastTick: UInt64 = 0
        var ended = 0
        func tick() {
            let now = EventLoop.hrtimeNanos
            var accounting = Accounting()
            for a in accountings { accounting += a }
            let seconds = Double(now &- lastTick) / 1e9
            let latest = collector.latestEndToEnd
            let line = ProgressLine(
                elapsedSeconds: Double(now &- start.value) / 1e9,
                deliveriesPerSecond: seconds > 0 ? Double(accounting.deliveries - lastDeliveries) / seconds : 0,
                interval: latest?.summary ?? LatencySummary(LatencyHistogram()), intervalIndex: latest?.index ?? -1,
                accounting: accounting)
            progress(line)
            let elapsed = Double(now &- start.value) / 1e9
            // Only while the workers run: the last tick comes after their threads and loops are gone.
            if ended < workers, elapsed >= Double(resources.count) * ResourceSample.intervalSeconds {
                resources.append(ResourceSample.now(elapsedSeconds: elapsed))
            }
            lastDeliveries = accounting.deliveries
            lastTick = now
        }
        func fail(_ message: String) {
            if failure == nil { failure = message }
            shared.stop.set()
            shared.feed.cancel()
            if !gateOpen {
                gateOpen = true
                for _ in 0..<workers { shared.gate.signal() }
            }
        }
        let tickTimer = Timer(loop: loop) { _ in tick() }
        box.drain = { [self] in
            for message in mailbox.drain() {
                switch message {
                case .ready:
                    ready += 1
                    if ready == workers && !gateOpen {
                        resources.append(ResourceSample.now(elapsedSeconds: 0))
                        start.value = EventLoop.hrtimeNanos
                        lastTick = start.value
                        gateOpen = true
                        for _ in 0..<workers { shared.gate.signal() }
                        tickTimer.start(afterMillis: 1000, repeatMillis: 1000)
                    }
                case .progress(let worker, let sample):
                    accountings[worker] = sample.accounting
                    do {
                        try collector.add(
                            worker: worker, intervals: sample.intervals, intervalIndex: sample.intervalIndex,
                            completions: sample.completions)
                    } catch {
                        fail("measurements of worker \(worker): \(error)")
                    }
                case .finished(let worker, let result):
                    do {
                        try collector.add(
                            worker: worker, intervals: result.intervals, intervalIndex: .max,
                            completions: result.completions)
                    } catch {
                        fail("measurements of worker \(worker): \(error)")
                    }
                    var kept = result
                    kept.intervals = []
                    kept.completions = CompletionChunk()
                    results[worker] = kept
                    accountings[worker] = result.accounting
                    ended += 1
                    lastWorkerFinishedNanos = EventLoop.hrtimeNanos
                case .failed(_, let message):
                    fail(message)
                    ended += 1
                case .stopped:
                    ended += 1
                }
            }
            if ended == workers {
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
