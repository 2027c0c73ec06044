import FanoutMetrics
import Foundation

/// The over-time charts of report.html for pages of other tools (`fanout push`): from one summary per interval of
/// their latency.hlog, the same drawing and the same rules as a run's (at most 240 bars; a bar of several intervals
/// adds their counts and shows the latencies of its interval with the highest p99, never averaged).
extension HTMLReport {
    /// One interval of a log: its place in the run (seconds from the start), its length, and the summary of its
    /// histogram (nil or a zero count: no values in it).
    public struct Second: Sendable {
        public var start: Double
        public var length: Double
        public var summary: LatencySummary?

        public init(start: Double, length: Double, summary: LatencySummary?) {
            self.start = start
            self.length = length
            self.summary = summary
        }
    }

    /// Intervals grouped into at most `maxBuckets` bars, each interval k placed at [k·length, (k+1)·length).
    static func buckets(_ seconds: [Second], scheduledEnd: Double, maxBuckets: Int = 240) -> [TimeBucket] {
        guard !seconds.isEmpty else { return [] }
        let group = max(1, (seconds.count + maxBuckets - 1) / maxBuckets)
        var out: [TimeBucket] = []
        var first = 0
        var start = 0.0
        while first < seconds.count {
            let last = min(first + group, seconds.count)
            var total: UInt64 = 0
            var worst: LatencySummary?
            var covered = 0.0
            for s in seconds[first..<last] {
                covered += s.length > 0 && s.length.isFinite ? s.length : 1
                guard let part = s.summary, part.count > 0 else { continue }
                total &+= part.count
                if part.p99 >= (worst?.p99 ?? 0) { worst = part }
            }
            out.append(
                TimeBucket(
                    start: start, end: start + covered, count: total, worst: worst, seconds: covered,
                    afterScheduledEnd: start >= scheduledEnd - 1e-9))
            start += covered
            first = last
        }
        return out
    }

    /// Values per second as bars: `rateLabel` names them (answers per second), grey after `scheduledEnd`.
    public static func rateOverTime(_ seconds: [Second], scheduledEnd: Double, rateLabel: String) -> String {
        let buckets = buckets(seconds, scheduledEnd: scheduledEnd)
        guard !buckets.isEmpty else {
            return "<figure><figcaption>Throughput over time</figcaption><p class=\"empty\">No intervals in this "
                + "report.</p></figure>\n"
        }
        return throughputChart(
            buckets, unit: "seconds of run time", axisEnd: max(buckets.last?.end ?? 1, scheduledEnd),
            scheduledEnd: scheduledEnd, rateLabel: rateLabel)
    }

    /// p50, p99, p99.9 and max of `metric` per interval, on a log axis.
    public static func percentilesOverTime(
        _ seconds: [Second], scheduledEnd: Double, metric: String, title: String
    ) -> String {
        let buckets = buckets(seconds, scheduledEnd: scheduledEnd)
        return latencyOverTime(
            buckets, unit: "seconds of run time", axisEnd: max(buckets.last?.end ?? 1, scheduledEnd), title: title,
            metric: metric)
    }
}
