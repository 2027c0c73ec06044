import FanoutHistogramLog
import FanoutMetrics
import Foundation
import Histogram

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
            closed.append(
                MergedInterval(
                    index: index, metric: metric, bytes: HistogramCodec.encodeCompressed(current[metric]),
                    maxNanos: current[metric].max))
        }
        current.reset()
        return closed
    }
}

/// Finished log intervals on disk while the run goes on, read back once at the end: a run's log
/// grows with its length (about 7 MB per 1,000 one-second intervals), its memory should not.
/// An unnamed temporary file: removed as soon as it is created, gone with the descriptor.
final class IntervalSpool {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private(set) var count = 0

    init() throws {
        let directory = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(directory)/fanout-intervals-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw SimulationError(message: "cannot create the interval spool in \(directory): errno \(errno)")
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Appends one interval: index (8 bytes), metric (1), max (8), length (4), the encoded histogram.
    func append(_ interval: MergedInterval) throws {
        func put<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { buffer.append(contentsOf: $0) } }
        put(Int64(interval.index))
        put(UInt8(interval.metric.rawValue))
        put(interval.maxNanos)
        put(UInt32(interval.bytes.count))
        buffer.append(contentsOf: interval.bytes)
        count += 1
        if buffer.count >= 1 << 16 { try flush() }
    }

    private func flush() throws {
        var offset = 0
        while offset < buffer.count {
            let n = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw SimulationError(message: "cannot write the interval spool: errno \(errno)")
            }
            offset += n
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Every interval written, in order of writing.
    func readAll() throws -> [MergedInterval] {
        try flush()
        let size = Int(lseek(fd, 0, SEEK_END))
        var bytes = [UInt8](repeating: 0, count: size)
        var offset = 0
        while offset < size {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + offset, size - offset, off_t(offset)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw SimulationError(message: "cannot read the interval spool: errno \(errno)") }
            offset += n
        }
        var out: [MergedInterval] = []
        out.reserveCapacity(count)
        var p = 0
        func get<T: FixedWidthInteger>(_: T.Type) -> T {
            var v: T = 0
            withUnsafeMutableBytes(of: &v) { $0.copyBytes(from: bytes[p..<p + MemoryLayout<T>.size]) }
            p += MemoryLayout<T>.size
            return T(littleEndian: v)
        }
        while p < size {
            let index = Int(get(Int64.self))
            let metric = Metric(rawValue: Int(get(UInt8.self)))!
            let maxNanos = get(UInt64.self)
            let length = Int(get(UInt32.self))
            out.append(
                MergedInterval(index: index, metric: metric, bytes: Array(bytes[p..<p + length]), maxNanos: maxNanos))
            p += length
        }
        return out
    }
}

/// The coordinator's side of a run's measurements while it goes on. Workers hand over finished
/// intervals and finished event completions about once a second; an interval is merged across
/// workers once every worker has moved past it and goes to the spool; an event's completion (the
/// last recipient on any worker) is recorded once every worker has handed it over. What stays in
/// memory is the part still open, so it does not grow with the run's length.
struct RunCollector {
    let workers: Int
    let intervalNanos: UInt64
    /// Keep every event's completion columns (sharded runs write them; capacity plans read them).
    let keepEvents: Bool
    let spool: IntervalSpool

    /// Worker intervals not yet merged, by (interval, metric); each worker's interval in progress.
    private var pending: [Int: [EncodedInterval]] = [:]
    private var workerInterval: [Int]
    /// Combined completion of the events from `window.base` on, not yet handed over by every worker.
    private var window = CompletionChunk()
    private var handedOver: [Int]
    private var builder: CompletionIntervals
    /// Completion histograms of the whole run (the all-events metric and the size buckets).
    private(set) var completionRecorder = LatencyRecorder()
    private(set) var kept = EventCompletions()
    /// The most events and pending intervals held at once.
    private(set) var peakWindow = 0
    private(set) var peakPending = 0

    init(workers: Int, intervalNanos: UInt64, keepEvents: Bool) throws {
        self.workers = workers
        self.intervalNanos = intervalNanos
        self.keepEvents = keepEvents
        spool = try IntervalSpool()
        workerInterval = Array(repeating: 0, count: workers)
        handedOver = Array(repeating: 0, count: workers)
        builder = CompletionIntervals(intervalNanos: intervalNanos)
    }

    /// Every event seen (finalised ones; all of them after `finish`).
    var events: Int { window.base }

    mutating func add(
        worker: Int, intervals: [EncodedInterval], intervalIndex: Int, completions: CompletionChunk
    )
        throws
    {
        for e in intervals { pending[key(e.index, e.metric), default: []].append(e) }
        workerInterval[worker] = max(workerInterval[worker], intervalIndex)
        peakPending = max(peakPending, pending.count)
        try mergeIntervals(before: workerInterval.min()!)
        combine(completions, worker: worker)
        try finalise(upTo: handedOver.min()!)
    }

    /// After every worker's result: merges and finalises what is left.
    mutating func finish() throws {
        try mergeIntervals(before: .max)
        try finalise(upTo: window.end)
        for interval in builder.flush() { try spool.append(interval) }
    }

    /// Every interval of the log, by interval then metric.
    func intervals() throws -> [MergedInterval] {
        try spool.readAll().sorted { ($0.index, $0.metric.rawValue) < ($1.index, $1.metric.rawValue) }
    }

    private func key(_ index: Int, _ metric: Metric) -> Int { index * Metric.allCases.count + metric.rawValue }

    /// Adds the workers' histograms of each (interval, metric) — histograms are added, never
    /// percentiles averaged.
    private mutating func mergeIntervals(before index: Int) throws {
        let limit = index == .max ? Int.max : key(index, Metric.allCases[0])
        for k in pending.keys.sorted() where k < limit {
            let parts = pending.removeValue(forKey: k)!
            var sum = LatencyRecorder.makeHistogram()
            for part in parts {
                guard let h = try? HistogramCodec.decode(part.bytes) else { continue }
                sum.add(h)
            }
            try spool.append(
                MergedInterval(
                    index: parts[0].index, metric: parts[0].metric, bytes: HistogramCodec.encodeCompressed(sum),
                    maxNanos: sum.max))
        }
    }

    /// The later completion and the sum of recipients, event by event.
    private mutating func combine(_ chunk: CompletionChunk, worker: Int) {
        precondition(chunk.base == handedOver[worker], "worker \(worker) skipped events")
        window.events.combine(chunk.events, at: chunk.base - window.base)
        peakWindow = max(peakWindow, window.count)
        handedOver[worker] = chunk.end
    }

    /// Records the events before `end` (every worker has handed them over) and forgets them.
    private mutating func finalise(upTo end: Int) throws {
        let n = end - window.base
        guard n > 0 else { return }
        window.events.record(into: &completionRecorder, upTo: n)
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
