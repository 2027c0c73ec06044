
/// latency.hlog's intervals of a push run on disk: each second's histograms (``tags``) go to an
/// `IntervalSpool` (an unlinked temporary file) when the second closes, so a run's memory does not grow with its
/// length (they were ~7 KiB a second held to the end); they are read back one at a time when the folder is written.
/// Appended on the run's loop thread only, read once the run has returned (hence `@unchecked Sendable`: the
/// results that hold it cross no thread while the run goes on).
public final class PushIntervalSpool: @unchecked Sendable {
    /// The tags of latency.hlog, by the spool's metric index.
    public static let tags = ["latency", "scheduleLag", "answeredLatency", "dispatchLag", "streamWait"]
    private let spool: IntervalSpool

    public init() throws { spool = try IntervalSpool() }

    /// Intervals spooled so far.
    public var count: Int { spool.count }

    /// Second `index`'s histogram of tag `tag` (an index of ``tags``), from `startNanos` to
    /// `startNanos + lengthNanos` (nanoseconds from t0).
    public func append(
        tag: Int, index: Int, startNanos: UInt64, lengthNanos: UInt64, histogram: LatencyHistogram
    ) throws {
        try spool.append(
            LoggedInterval(
                index: index, metricIndex: tag, startNanos: startNanos, lengthNanos: lengthNanos,
                histogram: histogram))
    }

    /// Every interval spooled, in order, one at a time (as ``PushInterval``, the seconds as the run computed them).
    public func forEach(_ body: (PushInterval) throws -> Void) throws {
        try spool.forEachLogged { i in
            guard PushIntervalSpool.tags.indices.contains(i.metricIndex) else {
                throw PushError("interval spool: interval \(i.index) has no tag of index \(i.metricIndex)")
            }
            try body(
                PushInterval(
                    tag: PushIntervalSpool.tags[i.metricIndex], startSeconds: Double(i.startNanos) / 1e9,
                    lengthSeconds: Double(i.lengthNanos) / 1e9, compressed: i.bytes, maxValue: i.summary.max,
                    summary: i.summary))
        }
    }
}

extension PushResults {
    /// Every interval of latency.hlog, one at a time: a run's from its spool (``spooled``), then any held in memory
    /// (``intervals``: a merged folder's).
    public func forEachInterval(_ body: (PushInterval) throws -> Void) throws {
        try spooled?.forEach(body)
        for i in intervals { try body(i) }
    }
}
