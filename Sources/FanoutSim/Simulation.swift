import Dispatch
import FanoutCore
import FanoutMetrics
import Foundation
import UVLoop

/// What a worker tells the coordinator. Messages go through one locked queue, drained when the
/// coordinator's `Wakeup` fires: the only object the threads share.
enum WorkerMessage: Sendable {
    case ready(worker: Int, activities: Int)
    case progress(worker: Int, sample: ProgressSample)
    case finished(worker: Int, result: WorkerResult)
    case failed(worker: Int, message: String)
    /// The worker stopped without a result because the run was stopped (another worker failed).
    case stopped(worker: Int)
}

/// A worker's cumulative counts with what it has finished since the last sample: log intervals before
/// `intervalIndex` (their histograms, recorded once) and event completions.
public struct ProgressSample: Sendable {
    public var accounting: Accounting
    public var eventsProcessed: Int
    public var intervalIndex = 0
    public var intervals: [WorkerInterval] = []
    public var completions = CompletionChunk()
}

/// Everything a worker measured and had not handed over yet, once at the end.
public struct WorkerResult: Sendable {
    public var accounting: Accounting
    /// The completion of the events not handed over in progress samples.
    public var completions: CompletionChunk
    public var activities: Int
    public var eventsProcessed: Int
    public var intervals: [WorkerInterval]
    public var intervalNanos: UInt64
    /// Broadcasts this worker applied in more than one slice (real time).
    public var slicedFanouts = 0
    /// Events with no recipient on this worker (it did nothing for them).
    public var eventsSkipped = 0
    /// Clock reads for measurements.
    public var clockReads = 0
    /// The worker's pipeline (its devices' final state), when the run keeps them (`keepState`).
    public var finalState: FinalState?
}

/// A worker's pipeline, handed over once its thread is done with it (nothing touches it there any more): what its
/// devices show at the end, for a state dump.
public struct FinalState: @unchecked Sendable {
    public let pipeline: Pipeline
}

/// A live view of a running simulation, once a second.
public struct ProgressLine: Sendable {
    public var elapsedSeconds: Double
    public var deliveriesPerSecond: Double
    /// End-to-end latency of the newest interval merged across workers (a second of run time, a
    /// simulated minute in virtual time), and that interval's number.
    public var interval: LatencySummary
    public var intervalIndex: Int
    public var accounting: Accounting
}

/// The merged outcome of a run.
public struct RunResult: Sendable {
    public var scenario: Scenario
    public var workers: Int
    public var accounting: Accounting
    /// The run's totals, every metric: the merged intervals and the recorded completions.
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
    /// (worker, event) pairs with no local recipient: events a worker skipped.
    public var eventsSkipped = 0
    /// Clock reads the workers took for measurements (0 in virtual time).
    public var clockReads = 0
    /// Each worker's pipeline at the end (`keepState`; empty otherwise), for `fanout run --state`.
    public var finalStates: [FinalState] = []
    /// Wall-clock seconds spent merging what the workers handed over last (after the wall time).
    public var finalMergeSeconds = 0.0
}

/// Runs a scenario: one thread, one `EventLoop` and one slice of the devices per worker.
public enum Simulation {
    /// Test hooks: a worker that fails at a given point (the run must fail with its error, no thread
    /// left waiting).
    enum Fault: Sendable, Equatable {
        case none
        case failBeforeReady(worker: Int)
        case failAtShutdown(worker: Int)
    }

    /// `keepEventCompletions`: keep every event's completion columns in `RunResult.completion`
    /// (20 bytes per event; sharded runs write them, capacity plans read them). Without it the run's
    /// memory does not grow with its length.
    /// `keepState`: keep each worker's pipeline (its devices' final state) in `RunResult.finalStates`.
    public static func run(
        _ scenario: Scenario, workers requested: Int, shard: Shard = .whole, keepEventCompletions: Bool = true,
        keepState: Bool = false, progress: @escaping @Sendable (ProgressLine) -> Void
    ) throws -> RunResult {
        try run(
            scenario, workers: requested, shard: shard, keepEventCompletions: keepEventCompletions, fault: .none,
            keepState: keepState, progress: progress)
    }

    static func run(
        _ scenario: Scenario, workers requested: Int, shard: Shard, keepEventCompletions: Bool, fault: Fault,
        keepState: Bool = false, progress: @escaping @Sendable (ProgressLine) -> Void
    ) throws -> RunResult {
        let workers = requested > 0 ? requested : max(ProcessInfo.processInfo.activeProcessorCount, 1)
        let world = World(scenario: scenario, shard: shard)
        let baseline = ResourceUsage.residentBytes()
        let overhead = scenario.clock == .real ? measureClockOverhead() : 0
        let startedAt = Date()
        let intervalNanos =
            scenario.clock == .real ? WorkerEngine.realIntervalNanos : WorkerEngine.virtualIntervalNanos
        let collector = try RunCollector(
            workers: workers, intervalNanos: intervalNanos, keepEvents: keepEventCompletions)
        let coordinator = try Coordinator(workers: workers, collector: collector)
        let shared = WorkerShared(
            world: world, workers: workers, mailbox: coordinator.mailbox, fault: fault,
            feed: EventFeed(world: world, consumers: workers, hrtime: { EventLoop.hrtimeNanos }), keepState: keepState)
        for k in 0..<workers {
            let thread = Thread { WorkerThread.main(index: k, shared: shared) }
            thread.name = "fanout-worker-\(k)"
            thread.stackSize = 8 << 20
            thread.start()
        }
        let outcome = Result { try coordinator.run(shared: shared, progress: progress) }
        // Every worker thread has ended before the run returns, whatever happened.
        for _ in 0..<workers { shared.exited.wait() }
        let results = try outcome.get()
        let wall = Double(coordinator.lastWorkerFinishedNanos &- shared.start.value) / 1e9
        // After the wall time: merging what the workers handed over last is not part of the run.
        let mergeStart = EventLoop.hrtimeNanos
        try coordinator.finishCollecting()
        var accounting = Accounting()
        var activities = 0
        for r in results {
            accounting += r.accounting
            activities += r.activities
        }
        let measured = coordinator.collector
        var result = RunResult(
            scenario: scenario, workers: workers, accounting: accounting, recorder: measured.totals,
            activities: activities, events: measured.events, wallSeconds: wall, timerOverheadNanos: overhead,
            peakResidentBytes: max(
                ResourceUsage.peakResidentBytes(), coordinator.resources.map(\.residentBytes).max() ?? 0),
            baselineResidentBytes: baseline,
            startedAt: startedAt, intervals: try measured.intervals(), intervalNanos: intervalNanos,
            completion: measured.kept)
        result.shard = shard
        // Sampled while the workers run (their threads, loops and descriptors exist): start, every 10 s.
        result.resources = coordinator.resources
        result.slicedFanouts = results.reduce(0) { $0 + $1.slicedFanouts }
        result.eventsSkipped = results.reduce(0) { $0 + $1.eventsSkipped }
        result.clockReads = results.reduce(0) { $0 + $1.clockReads }
        result.finalStates = results.compactMap(\.finalState)
        result.finalMergeSeconds = Double(EventLoop.hrtimeNanos &- mergeStart) / 1e9
        return result
    }

    /// The cost of one clock read (`uv_hrtime`), which every timed measurement includes.
    static func measureClockOverhead() -> Double {
        let n = 100_000
        var sink: UInt64 = 0
        let t0 = EventLoop.hrtimeNanos
        for _ in 0..<n { sink &+= EventLoop.hrtimeNanos }
        let t1 = EventLoop.hrtimeNanos
        withExtendedLifetime(sink) {}  // keeps the reads from being optimised away
        return Double(t1 &- t0) / Double(n)
    }
}

public struct SimulationError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
