import FanoutMetrics

/// What serve's and push's summary.json (written with JSONSerialization) hold alike: their report enums take it
/// from here, so that the two files write a distribution and a tally by status the same way.
protocol SummaryObjectWriter {}

extension SummaryObjectWriter {
    /// A distribution: its count, p50 to p99.99, max and mean, in nanoseconds (`ServeSummaryFile` and
    /// `PushSummaryFile` read it back).
    static func percentiles(_ h: LatencyHistogram) -> [String: Any] {
        let v = h.values(atPercentiles: [50, 90, 99, 99.9, 99.99])
        return [
            "count": h.totalCount, "p50Nanos": v[0], "p90Nanos": v[1], "p99Nanos": v[2], "p999Nanos": v[3],
            "p9999Nanos": v[4], "maxNanos": h.max, "meanNanos": h.isEmpty ? 0 : Int(h.mean.rounded()),
        ]
    }

    /// Counts by HTTP status, keyed by the status's text (a JSON object's keys are strings).
    static func byStatus(_ counts: [Int: Int]) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: counts.map { (String($0.key), $0.value) })
    }
}

extension ServeReport: SummaryObjectWriter {}
extension PushReport: SummaryObjectWriter {}
