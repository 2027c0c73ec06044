import Testing

@testable import FanoutMetrics

@Suite("LatencyRecorder")
struct LatencyRecorderTests {
    @Test("records, summarises and merges per-worker histograms")
    func recordAndMerge() {
        var a = LatencyRecorder()
        var b = LatencyRecorder()
        for v in 1...1000 { a.record(.endToEnd, nanos: UInt64(v) * 1000) }
        b.record(.endToEnd, nanos: 5_000_000, count: 10)
        a.add(b)
        let s = LatencySummary(a[.endToEnd])
        #expect(s.count == 1010)
        #expect(s.p50 >= 504_000 && s.p50 <= 506_000)
        #expect(s.max >= 4_995_000 && s.max <= 5_005_000)
        #expect(LatencySummary(a[.encode]).count == 0)
    }

    @Test("values above one hour are clamped and counted, not lost")
    func clamping() {
        var r = LatencyRecorder()
        r.record(.scheduleLag, nanos: LatencyRecorder.highestTrackableNanos * 2)
        #expect(r[.scheduleLag].totalCount == 1)
        #expect(r.clamped == 1)
    }

    @Test("fan-out completion buckets: 1, 2–100, 101–10k, >10k")
    func buckets() {
        #expect(Metric.completionBucket(fanout: 1) == .fanoutCompletion1)
        #expect(Metric.completionBucket(fanout: 2) == .fanoutCompletion2to100)
        #expect(Metric.completionBucket(fanout: 100) == .fanoutCompletion2to100)
        #expect(Metric.completionBucket(fanout: 101) == .fanoutCompletion101to10k)
        #expect(Metric.completionBucket(fanout: 10_000) == .fanoutCompletion101to10k)
        #expect(Metric.completionBucket(fanout: 10_001) == .fanoutCompletionOver10k)
    }
}
