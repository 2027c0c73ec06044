import Testing

@testable import FanoutMetrics

/// The log of several sources measured in real time (`fanout serve`'s loops): one record per sample, intervals
/// merged across sources once each has moved past them, spooled, totals their sum; bad input is a MetricsError.
@Suite("IntervalLog and IntervalSpool")
struct IntervalLogTests {
    static func interval(_ values: [(metric: Int, nanos: UInt64)], metrics: Int = 3) -> LatencyRecorder {
        let r = IntervalRecorder(metricCount: metrics)
        for v in values { r.record(metricIndex: v.metric, nanos: v.nanos) }
        return r.takeInterval()
    }

    @Test("a recorder of N metrics: each sample once, in its metric; the next interval starts empty")
    func recorderOfNMetrics() {
        let r = IntervalRecorder(metricCount: 5)
        #expect(r.metricCount == 5 && r.isEmpty)
        r.record(metricIndex: 4, nanos: 1_000)
        r.record(metricIndex: 4, nanos: 2_000, count: 3)
        r.record(metricIndex: 0, nanos: 7)
        let taken = r.takeInterval()
        #expect(taken.metricCount == 5)
        #expect(taken[metricIndex: 4].totalCount == 4 && taken[metricIndex: 0].totalCount == 1)
        #expect((1...3).allSatisfy { taken[metricIndex: $0].isEmpty })
        #expect(r.isEmpty && r.takeInterval().isEmpty)
        // `fanout run`'s recorder is unchanged: one histogram per `Metric`.
        #expect(IntervalRecorder().metricCount == Metric.allCases.count)
    }

    @Test("intervals merge once every source has moved past them; totals are their sum; real start and length")
    func merging() throws {
        var log = IntervalLog(sources: 2, metricCount: 3)
        try log.add(source: 0, index: 0, startNanos: 0, endNanos: 1_000, histograms: Self.interval([(0, 10), (1, 20)]))
        #expect(log.spooled == 0 && log.totals.isEmpty, "source 1 has not handed interval 0 over yet")
        try log.add(source: 0, index: 1, startNanos: 1_000, endNanos: 2_000, histograms: Self.interval([(0, 11)]))
        try log.add(source: 1, index: 0, startNanos: 5, endNanos: 1_010, histograms: Self.interval([(0, 12)]))
        #expect(log.spooled == 2 && log.totals[metricIndex: 0].totalCount == 2)
        try log.add(
            source: 1, index: 1, startNanos: 1_010, endNanos: 1_500, histograms: Self.interval([(2, 30)]), last: true)
        try log.finish()
        let intervals = try log.intervals()
        #expect(intervals.map { [$0.index, $0.metricIndex] } == [[0, 0], [0, 1], [1, 0], [1, 2]])
        #expect(intervals[0].summary.count == 2 && intervals[0].startNanos == 0 && intervals[0].lengthNanos == 1_010)
        #expect(intervals[2].startNanos == 1_000 && intervals[2].lengthNanos == 1_000)
        // Every sample once: the totals are the sum of the intervals, per metric.
        for m in 0..<3 {
            let sum = intervals.filter { $0.metricIndex == m }.reduce(UInt64(0)) { $0 + $1.summary.count }
            #expect(log.totals[metricIndex: m].totalCount == sum)
        }
        #expect(log.totals[metricIndex: 0].totalCount == 3)
        // The encodings are the merged histograms': decoded, they hold the same counts.
        let decoded = try LatencyHistogram(decoding: intervals[0].bytes)
        #expect(decoded.totalCount == 2 && decoded.max == intervals[0].summary.max)
    }

    @Test("memory does not grow with the run: a source that keeps up leaves nothing pending")
    func bounded() throws {
        var log = IntervalLog(sources: 2, metricCount: 1)
        for k in 0..<500 {
            let t = UInt64(k) * 1_000
            for s in 0..<2 {
                try log.add(
                    source: s, index: k, startNanos: t, endNanos: t + 1_000,
                    histograms: Self.interval([(0, UInt64(k + 1))], metrics: 1))
            }
        }
        #expect(log.peakPending == 1 && log.spooled == 500 && log.totals[metricIndex: 0].totalCount == 1_000)
    }

    @Test("an interval out of order, of another metric count, ending before it starts or of no source: MetricsError")
    func badIntervals() throws {
        var log = IntervalLog(sources: 2, metricCount: 3)
        try log.add(source: 0, index: 3, startNanos: 0, endNanos: 10, histograms: Self.interval([(0, 1)]))
        #expect(throws: MetricsError.self) {
            try log.add(source: 0, index: 3, startNanos: 10, endNanos: 20, histograms: Self.interval([(0, 1)]))
        }
        #expect(throws: MetricsError.self) {
            try log.add(source: 1, index: 0, startNanos: 0, endNanos: 10, histograms: Self.interval([], metrics: 4))
        }
        #expect(throws: MetricsError.self) {
            try log.add(source: 1, index: 0, startNanos: 20, endNanos: 10, histograms: Self.interval([]))
        }
        #expect(throws: MetricsError.self) {
            try log.add(source: 2, index: 0, startNanos: 0, endNanos: 10, histograms: Self.interval([]))
        }
        var totals = LatencyRecorder(metricCount: 3)
        #expect(throws: MetricsError.self) { try totals.adding(LatencyRecorder(metricCount: 2)) }
    }

    @Test("a spool record cut short or naming no metric is a MetricsError, not a crash")
    func spoolDecoding() throws {
        let h = Self.interval([(1, 1_234), (1, 99)])[metricIndex: 1]
        let good = LoggedInterval(index: 7, metricIndex: 1, startNanos: 5, lengthNanos: 9, histogram: h)
        var bytes: [UInt8] = []
        IntervalSpool.encode(good, into: &bytes)
        #expect(try IntervalSpool.decode(bytes) == [good])
        for cut in [1, 9, 30, bytes.count - 1] {
            #expect(throws: MetricsError.self) { try IntervalSpool.decode(Array(bytes.prefix(cut))) }
        }
        // `fanout run`'s reader: a metric index that is no `Metric` is an error.
        let spool = try IntervalSpool()
        try spool.append(
            LoggedInterval(index: 0, metricIndex: 200, startNanos: 0, lengthNanos: 0, bytes: [], summary: good.summary))
        #expect(throws: MetricsError.self) { try spool.readAll() }
        #expect(try spool.readAllLogged().map(\.metricIndex) == [200])
        #expect(throws: MetricsError.self) {
            try spool.append(
                LoggedInterval(
                    index: 0, metricIndex: 256, startNanos: 0, lengthNanos: 0, bytes: [], summary: good.summary))
        }
    }

    @Test("forEachLogged reads the spool a chunk at a time: the same intervals as readAllLogged, whatever the chunk")
    func spoolInChunks() throws {
        let spool = try IntervalSpool()
        var written: [LoggedInterval] = []
        for k in 0..<300 {
            var h = LatencyHistogram()
            for i in 0..<(k % 7) * 50 { h.record(UInt64(1_000 + i * (k + 1) * 997)) }
            let interval = LoggedInterval(
                index: k / 2, metricIndex: k % 2, startNanos: UInt64(k) * 1_000_000_007, lengthNanos: 999_999_937,
                histogram: h)
            written.append(interval)
            try spool.append(interval)
        }
        #expect(spool.count == 300)
        // Chunks smaller than one record, a record's size give or take, and larger than the whole file (and the
        // part still buffered, not yet flushed, read too).
        for chunk in [1, 7, 93, 200, 4_096, 1 << 20] {
            var read: [LoggedInterval] = []
            try spool.forEachLogged(chunkBytes: chunk) { read.append($0) }
            #expect(read == written, "chunk \(chunk): \(read.count) of \(written.count)")
        }
        #expect(try spool.readAllLogged() == written)
        let empty = try IntervalSpool()
        try empty.forEachLogged { _ in Issue.record("an empty spool hands nothing over") }
    }
}
