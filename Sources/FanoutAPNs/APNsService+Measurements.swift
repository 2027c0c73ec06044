import FanoutCore
import FanoutMetrics
import FanoutSim
import Foundation

/// Every sample recorded once, into this event loop's `IntervalRecorder`; the interval is taken each second
/// and handed to the run's `ServeMeasurements`, where the loops' intervals are merged (the run's totals are
/// their sum).
extension APNsService {
    @inline(__always)
    func record(_ metric: ServeMetric, _ nanos: UInt64) {
        recorder.record(metricIndex: metric.rawValue, nanos: nanos)
    }

    /// Ends this loop's current interval (each second, and once more at the end with `last`): its histograms
    /// go to the run's log with their real start and end.
    public func closeInterval(last: Bool = false) {
        let now = clock()
        let taken = recorder.takeInterval()
        let service = taken[metricIndex: ServeMetric.service.rawValue]
        lastServiceP99Nanos = service.isEmpty ? 0 : service.valueAtPercentile(99)
        measurements.add(source: worker, startNanos: intervalStartNanos, endNanos: now, taken, last: last)
        intervalStartNanos = now
    }

    /// Measures into `log` (the run's, shared by every loop) from now on; call before serving.
    public func measure(into log: ServeMeasurements) {
        measurements = log
        intervalStartNanos = max(log.startNanos, intervalStartNanos)
    }

    /// One request's service time: request complete (END_STREAM received) → response submitted.
    public func recordService(_ nanos: UInt64) {
        record(.service, nanos)
    }
}

/// The run's measurements, shared by the event loops: each hands over its finished intervals (about once a
/// second, under a lock held for the merge), which are merged across loops into one interval of the log once
/// every loop has moved past it, then spooled to disk (`IntervalLog`). An interval's index is the second of
/// the run it ends in, counted from `startNanos` (when serving began); its real start and end go to the log.
/// A measurement that cannot be merged or stored is kept as the run's failure and thrown by `finish`.
public final class ServeMeasurements: @unchecked Sendable {
    // @unchecked: `log`, `next` and `failure` are touched only under `lock`.
    /// When serving began (`EventLoop.hrtimeNanos`): the log's StartTime, interval times are counted from it.
    public let startNanos: UInt64
    public let loops: Int
    private let lock = Lock()
    private var log: IntervalLog
    private var next: [Int]
    private var failure: MetricsError?

    public init(loops: Int, startNanos: UInt64) {
        self.loops = loops
        self.startNanos = startNanos
        log = IntervalLog(sources: loops, metricCount: ServeMetric.allCases.count)
        next = Array(repeating: 0, count: loops)
    }

    /// Loop `source`'s interval from `startNanos` to `endNanos` (clock readings).
    func add(source: Int, startNanos start: UInt64, endNanos end: UInt64, _ h: LatencyRecorder, last: Bool) {
        lock.lock()
        defer { lock.unlock() }
        guard failure == nil else { return }
        let from = start > startNanos ? start - startNanos : 0
        let to = end > startNanos ? end - startNanos : 0
        // The second the interval ends in, rounded: a tick a few milliseconds late still closes its second.
        let index = max(next[source], Int((to + 500_000_000) / 1_000_000_000) - 1)
        next[source] = index + 1
        do {
            try log.add(source: source, index: index, startNanos: from, endNanos: to, histograms: h, last: last)
        } catch {
            failure = error as? MetricsError ?? MetricsError("\(error)")
        }
    }

    /// Loop `source` hands over nothing more (it failed before its last interval).
    public func finish(source: Int) {
        lock.lock()
        defer { lock.unlock() }
        guard failure == nil else { return }
        do { try log.finish(source: source) } catch { failure = error as? MetricsError ?? MetricsError("\(error)") }
    }

    /// The sum of the intervals merged so far.
    public var totals: LatencyRecorder {
        lock.lock()
        defer { lock.unlock() }
        return log.totals
    }

    /// The most intervals held unmerged at once (bounded by the loops' skew, not by the run's length).
    public var peakPending: Int {
        lock.lock()
        defer { lock.unlock() }
        return log.peakPending
    }

    /// Merges what every loop handed over and reads the log back: the run's totals and every interval (by
    /// index, then metric). Throws the run's first measurement failure.
    public func finish() throws(MetricsError) -> (totals: LatencyRecorder, intervals: [LoggedInterval]) {
        lock.lock()
        defer { lock.unlock() }
        if let failure { throw failure }
        do {
            try log.finish()
            return (log.totals, try log.intervals())
        } catch {
            let e = error as? MetricsError ?? MetricsError("\(error)")
            failure = e
            throw e
        }
    }
}
