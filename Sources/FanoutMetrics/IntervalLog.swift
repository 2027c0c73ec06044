/// The histogram log of several sources measured in real time (`fanout serve`'s event loops), built
/// while the run goes on: each source records every sample once into its `IntervalRecorder`, takes
/// the interval at each boundary and hands it over here with its real start and end; an interval is
/// merged across sources (counts added, never re-encoded) once every source has moved past it,
/// encoded and summarised once, added to the run's totals and spooled to disk. What stays in memory
/// is the part still open, so it does not grow with the run's length. Not thread-safe: its owner
/// serialises the sources' hand-overs.
public struct IntervalLog {
    public let sources: Int
    public let metricCount: Int
    /// Created with the first merged interval (a run without samples needs no file).
    private var spool: IntervalSpool?

    struct Pending {
        var histograms: LatencyRecorder
        var startNanos: UInt64
        var endNanos: UInt64
    }

    /// Source intervals not yet merged, by index.
    private var pending: [Int: Pending] = [:]
    /// Per source: the lowest index it may still hand over (`Int.max` once it has finished).
    private var next: [Int]
    /// The run's totals: the sum of the merged intervals.
    public private(set) var totals: LatencyRecorder
    /// Merged intervals (spooled metric histograms) so far.
    public private(set) var spooled = 0
    /// The most intervals held unmerged at once.
    public private(set) var peakPending = 0

    public init(sources: Int, metricCount: Int) {
        precondition(sources > 0 && metricCount > 0)
        self.sources = sources
        self.metricCount = metricCount
        next = Array(repeating: 0, count: sources)
        totals = LatencyRecorder(metricCount: metricCount)
    }

    /// Source `source`'s interval `index`, from `startNanos` to `endNanos` (nanoseconds from the log's
    /// start). A source's indices rise; `last` says it hands over nothing more.
    public mutating func add(
        source: Int, index: Int, startNanos: UInt64, endNanos: UInt64, histograms: LatencyRecorder, last: Bool = false
    ) throws {
        guard (0..<sources).contains(source) else {
            throw MetricsError("interval \(index) handed over by source \(source) of \(sources)")
        }
        guard index >= next[source], index < Int.max else {
            throw MetricsError(
                "source \(source) handed over interval \(index), expected \(next[source]) or later (indices rise)")
        }
        guard startNanos <= endNanos else {
            throw MetricsError(
                "source \(source)'s interval \(index) ends (\(endNanos) ns) before it starts (\(startNanos) ns)")
        }
        guard histograms.metricCount == metricCount else {
            throw MetricsError(
                "source \(source)'s interval \(index) holds \(histograms.metricCount) metrics, the log \(metricCount)")
        }
        if var p = pending[index] {
            p.histograms.add(histograms)
            p.startNanos = min(p.startNanos, startNanos)
            p.endNanos = max(p.endNanos, endNanos)
            pending[index] = p
        } else {
            pending[index] = Pending(histograms: histograms, startNanos: startNanos, endNanos: endNanos)
        }
        peakPending = max(peakPending, pending.count)
        next[source] = last ? .max : index + 1
        try merge(before: next.min()!)
    }

    /// Source `source` hands over nothing more (it ended, or failed).
    public mutating func finish(source: Int) throws {
        guard (0..<sources).contains(source) else { throw MetricsError("no source \(source) of \(sources)") }
        next[source] = .max
        try merge(before: next.min()!)
    }

    /// Merges what is left (every source has ended).
    public mutating func finish() throws {
        for s in 0..<sources { next[s] = .max }
        try merge(before: .max)
    }

    /// Every interval of the log, by index then metric.
    public func intervals() throws -> [LoggedInterval] {
        guard let spool else { return [] }
        return try spool.readAllLogged().sorted { ($0.index, $0.metricIndex) < ($1.index, $1.metricIndex) }
    }

    private mutating func merge(before index: Int) throws {
        for k in pending.keys.sorted() where k < index {
            let p = pending.removeValue(forKey: k)!
            let spool = try self.spool ?? IntervalSpool()
            self.spool = spool
            for m in 0..<metricCount where !p.histograms[metricIndex: m].isEmpty {
                try spool.append(
                    LoggedInterval(
                        index: k, metricIndex: m, startNanos: p.startNanos, lengthNanos: p.endNanos - p.startNanos,
                        histogram: p.histograms[metricIndex: m]))
                spooled += 1
            }
            totals.add(p.histograms)
        }
    }
}
