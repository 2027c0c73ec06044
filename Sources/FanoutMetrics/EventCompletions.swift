/// Per-event completion columns: for each source event its intended time, when its last recipient
/// was applied (0: none) and how many recipients it had.
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

/// The histogram of one metric over one interval, merged across workers: its compressed encoding (a
/// line of `latency.hlog`) and its summary (the report's charts), both made once, when it closed.
public struct MergedInterval: Sendable, Equatable {
    public var index: Int
    public var metric: Metric
    public var bytes: [UInt8]
    public var summary: LatencySummary

    public var maxNanos: UInt64 { summary.max }

    public init(index: Int, metric: Metric, bytes: [UInt8], summary: LatencySummary) {
        self.index = index
        self.metric = metric
        self.bytes = bytes
        self.summary = summary
    }

    public init(index: Int, metric: Metric, histogram: LatencyHistogram) {
        self.init(
            index: index, metric: metric, bytes: histogram.encodedCompressed(), summary: LatencySummary(histogram))
    }

    /// The interval's histogram, decoded from its encoding.
    public func histogram() throws -> LatencyHistogram { try LatencyHistogram(decoding: bytes) }
}
