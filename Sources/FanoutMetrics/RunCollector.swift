#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A measurement that could not be stored or merged: it stops the run (nothing is dropped silently).
public struct MetricsError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// One worker's histograms of one finished interval of the log.
public struct WorkerInterval: Sendable {
    public var index: Int
    public var histograms: LatencyRecorder

    public init(index: Int, histograms: LatencyRecorder) {
        self.index = index
        self.histograms = histograms
    }
}

/// One worker's local completion of a run of consecutive events (`base` ..< `base + count`), handed
/// over once none of them can change on that worker.
public struct CompletionChunk: Sendable, Equatable {
    public var base = 0
    public var events = EventCompletions()

    public init() {}

    public init(base: Int, events: EventCompletions) {
        self.base = base
        self.events = events
    }

    public var count: Int { events.count }
    public var end: Int { base + count }
}

/// Builds the completion intervals of the histogram log from events in intended-time order: one
/// interval is open at a time and is encoded when the next one starts.
public struct CompletionIntervals {
    public let intervalNanos: UInt64
    private var index = -1
    private var current = LatencyRecorder()

    public init(intervalNanos: UInt64) { self.intervalNanos = intervalNanos }

    /// Records one event; returns the intervals it closed (empty unless it starts a new one).
    public mutating func add(intended: UInt64, latency: UInt64, fanout: Int) -> [MergedInterval] {
        let next = Int(intended / intervalNanos)
        var closed: [MergedInterval] = []
        if next != index {
            closed = flush()
            index = next
        }
        current.record(.fanoutCompletion, nanos: latency)
        current.record(Metric.completionBucket(fanout: fanout), nanos: latency)
        return closed
    }

    /// Closes the open interval.
    public mutating func flush() -> [MergedInterval] {
        var closed: [MergedInterval] = []
        for metric in Metric.completionMetrics where current[metric].totalCount > 0 {
            closed.append(MergedInterval(index: index, metric: metric, histogram: current[metric]))
        }
        current.reset()
        return closed
    }
}

/// The coordinator's side of a run's measurements while it goes on. Workers hand over finished
/// intervals and finished event completions about once a second; an interval is merged across
/// workers once every worker has moved past it (counts added), encoded once for the log, summarised
/// once for the report, added to the run's totals and spooled; an event's completion (the last
/// recipient on any worker) is recorded once every worker has handed it over. What stays in memory
/// is the part still open, so it does not grow with the run's length.
public struct RunCollector {
    public let workers: Int
    public let intervalNanos: UInt64
    /// Keep every event's completion columns (sharded runs write them; capacity plans read them).
    public let keepEvents: Bool
    let spool: IntervalSpool

    /// Worker intervals not yet merged, by interval; each worker's interval in progress.
    private var pending: [Int: LatencyRecorder] = [:]
    private var workerInterval: [Int]
    /// Combined completion of the events from `window.base` on, not yet handed over by every worker.
    private var window = CompletionChunk()
    private var handedOver: [Int]
    private var builder: CompletionIntervals
    /// The run's totals, every metric: the sum of the merged intervals and the recorded completions.
    public private(set) var totals = LatencyRecorder()
    public private(set) var kept = EventCompletions()
    /// The most events and pending intervals held at once.
    public private(set) var peakWindow = 0
    public private(set) var peakPending = 0
    /// The newest merged end-to-end interval (the progress line's figures in virtual time).
    public private(set) var latestEndToEnd: (index: Int, summary: LatencySummary)?

    public init(workers: Int, intervalNanos: UInt64, keepEvents: Bool) throws {
        self.workers = workers
        self.intervalNanos = intervalNanos
        self.keepEvents = keepEvents
        spool = try IntervalSpool()
        workerInterval = Array(repeating: 0, count: workers)
        handedOver = Array(repeating: 0, count: workers)
        builder = CompletionIntervals(intervalNanos: intervalNanos)
    }

    /// Every event seen (finalised ones; all of them after `finish`).
    public var events: Int { window.base }

    /// What a worker handed over: its finished intervals (every one before `intervalIndex`) and the
    /// completion of a run of events.
    public mutating func add(
        worker: Int, intervals: [WorkerInterval], intervalIndex: Int, completions: CompletionChunk
    ) throws {
        for i in intervals {
            guard i.index < intervalIndex || intervalIndex == .max, i.index >= workerInterval[worker] else {
                throw MetricsError(
                    "worker \(worker) handed over interval \(i.index) outside \(workerInterval[worker])..<\(intervalIndex)"
                )
            }
            pending[i.index, default: LatencyRecorder()].add(i.histograms)
        }
        workerInterval[worker] = max(workerInterval[worker], intervalIndex)
        peakPending = max(peakPending, pending.count)
        try mergeIntervals(before: workerInterval.min()!)
        try combine(completions, worker: worker)
        try finalise(upTo: handedOver.min()!)
    }

    /// After every worker's result: merges and finalises what is left.
    public mutating func finish() throws {
        try mergeIntervals(before: .max)
        try finalise(upTo: window.end)
        for interval in builder.flush() { try spool.append(interval) }
    }

    /// Every interval of the log, by interval then metric.
    public func intervals() throws -> [MergedInterval] {
        try spool.readAll().sorted { ($0.index, $0.metric.rawValue) < ($1.index, $1.metric.rawValue) }
    }

    /// Merged intervals go to the spool and into the totals.
    private mutating func mergeIntervals(before index: Int) throws {
        for k in pending.keys.sorted() where k < index {
            let sum = pending.removeValue(forKey: k)!
            for metric in Metric.allCases where !sum[metric].isEmpty {
                let merged = MergedInterval(index: k, metric: metric, histogram: sum[metric])
                try spool.append(merged)
                if metric == .endToEnd { latestEndToEnd = (k, merged.summary) }
            }
            totals.add(sum)
        }
    }

    /// The later completion and the sum of recipients, event by event.
    private mutating func combine(_ chunk: CompletionChunk, worker: Int) throws {
        guard chunk.base == handedOver[worker] else {
            throw MetricsError("worker \(worker) handed over events from \(chunk.base), expected \(handedOver[worker])")
        }
        window.events.combine(chunk.events, at: chunk.base - window.base)
        peakWindow = max(peakWindow, window.count)
        handedOver[worker] = chunk.end
    }

    /// Records the events before `end` (every worker has handed them over) and forgets them.
    private mutating func finalise(upTo end: Int) throws {
        let n = end - window.base
        guard n > 0 else { return }
        window.events.record(into: &totals, upTo: n)
        var closed: [MergedInterval] = []
        window.events.forEach(upTo: n) { intended, latency, fanout in
            closed.append(contentsOf: builder.add(intended: intended, latency: latency, fanout: fanout))
        }
        for interval in closed { try spool.append(interval) }
        if keepEvents { kept.append(window.events.prefix(n)) }
        window.events.removeFirst(n)
        window.base = end
    }
}
