/// A worker's recorder for the current interval of the log: every sample is recorded here once, as
/// one increment in HdrHistogram's layout (`HdrLayout`) — no allocation, no lock, no generic code, no
/// reference counting — and `takeInterval()` hands the interval's histograms over at its boundary and
/// zeroes what was touched (HdrHistogram's Recorder pattern: record once, swap at the boundary).
/// Shared-nothing: only its worker's thread touches it. `fanout run` records `Metric`s; another
/// set of metrics (`fanout serve`'s) records by index, from 0 to `metricCount − 1`.
public final class IntervalRecorder {
    /// How many metrics: `Metric.allCases.count` unless given.
    public let metricCount: Int
    /// Counts of every metric, `HdrLayout.countsLength` each.
    @usableFromInline let counts: UnsafeMutablePointer<UInt64>
    /// Per metric: the lowest and the highest index touched since the last take (low > high: none).
    @usableFromInline let bounds: UnsafeMutablePointer<Int>
    /// Samples above one hour, recorded as one hour, since the last take.
    @usableFromInline var clampedSinceTake: UInt64 = 0

    public init(metricCount: Int = Metric.allCases.count) {
        precondition(metricCount > 0 && metricCount <= 256, "metrics: 1 to 256")
        self.metricCount = metricCount
        let n = metricCount * HdrLayout.countsLength
        counts = .allocate(capacity: n)
        counts.initialize(repeating: 0, count: n)
        bounds = .allocate(capacity: 2 * metricCount)
        for m in 0..<metricCount {
            bounds[2 * m] = .max
            bounds[2 * m + 1] = -1
        }
    }

    deinit {
        counts.deallocate()
        bounds.deallocate()
    }

    /// Records `count` samples of one value.
    @inlinable @inline(__always)
    public func record(_ metric: Metric, nanos: UInt64, count: UInt64 = 1) {
        record(metricIndex: metric.rawValue, nanos: nanos, count: count)
    }

    /// Records `count` samples of one value of the metric at `m` (0 ..< `metricCount`, not checked).
    @inlinable @inline(__always)
    public func record(metricIndex m: Int, nanos: UInt64, count: UInt64 = 1) {
        var value = nanos
        if _slowPath(value > HdrLayout.highestTrackableValue) {
            value = HdrLayout.highestTrackableValue
            clampedSinceTake &+= count
        }
        let index = HdrLayout.index(of: value)
        counts[m &* HdrLayout.countsLength &+ index] &+= count
        if _slowPath(index < bounds[2 &* m]) { bounds[2 &* m] = index }
        if _slowPath(index > bounds[2 &* m &+ 1]) { bounds[2 &* m &+ 1] = index }
    }

    /// True when nothing was recorded since the last take.
    public var isEmpty: Bool {
        for m in 0..<metricCount where bounds[2 * m] <= bounds[2 * m + 1] { return false }
        return true
    }

    /// The histograms recorded since the last take; the recorder starts the next interval empty. Costs
    /// the touched index ranges, not the samples.
    public func takeInterval() -> LatencyRecorder {
        var out = LatencyRecorder(metricCount: metricCount)
        for m in 0..<metricCount {
            let lo = bounds[2 * m]
            let hi = bounds[2 * m + 1]
            guard lo <= hi else { continue }
            let base = counts + m * HdrLayout.countsLength
            out.add(
                metricIndex: m,
                LatencyHistogram(first: lo, counts: UnsafeBufferPointer(start: base + lo, count: hi - lo + 1)))
            (base + lo).update(repeating: 0, count: hi - lo + 1)
            bounds[2 * m] = .max
            bounds[2 * m + 1] = -1
        }
        out.clamped = clampedSinceTake
        clampedSinceTake = 0
        return out
    }
}
