import FanoutMetrics
import FanoutPush
import FanoutReport
import Testing

/// `PushMerge` on results made here: counts summed exactly, histograms added, and the sets it must refuse.
@Suite("PushMerge: push shards added, incomplete or foreign sets refused")
struct PushMergeTests {
    static func shard(
        _ k: Int, of n: Int, seed: UInt64 = 7, config: String = "c0", latencies: [UInt64]
    ) -> PushResults {
        var r = PushResults()
        r.scenario = "smoke"
        r.seed = seed
        r.configHash = config
        r.shard = "\(k)/\(n)"
        r.events = latencies.count
        r.tokenPushes = latencies.count
        r.sent = latencies.count + 1
        r.submitted = latencies.count
        r.byStatus = [200: latencies.count - 1, 400: 1]
        r.byReason = ["BadRequestPayload": 1]
        r.failures = ["reset": 1]
        for (i, v) in latencies.enumerated() {
            r.latency.record(v)
            r.scheduleLag.record(v / 10)
            var h = LatencyHistogram()
            h.record(v)
            r.intervals.append(PushInterval(
                tag: "latency", startSeconds: Double(i), lengthSeconds: 1, compressed: h.encodedCompressed(),
                maxValue: h.max))
        }
        return r
    }

    @Test("two shards: counts summed, histograms added, second k of each shard in second k")
    func sums() throws {
        var a = Self.shard(0, of: 2, latencies: [1_000_000, 2_000_000])
        var b = Self.shard(1, of: 2, latencies: [3_000_000, 4_000_000, 5_000_000])
        a.connectionsDrained = 2
        a.drainedForStreamIds = 1
        b.connectionsDrained = 1
        b.drainedForStreamIds = 1
        let m = try PushMerge.merge([("a", a), ("b", b)])
        #expect(m.connectionsDrained == 3 && m.drainedForStreamIds == 2)
        #expect(m.sent == 7 && m.answered == 5 && m.failed == 2 && m.identityHolds)
        #expect(m.byStatus == [200: 3, 400: 2] && m.byReason == ["BadRequestPayload": 2])
        #expect(m.shards == 2 && m.shard == nil)
        var whole = LatencyHistogram()
        for v: UInt64 in [1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000] { whole.record(v) }
        #expect(m.latency == whole)
        let seconds = try m.intervals.map { try LatencyHistogram(decoding: $0.compressed).totalCount }
        #expect(seconds == [2, 2, 1])
    }

    @Test("a missing or repeated shard, another N, seed or configuration: refused, each with its reason")
    func refusals() {
        let a = Self.shard(0, of: 2, latencies: [1_000_000])
        let b = Self.shard(1, of: 2, latencies: [1_000_000])
        func refusal(_ parts: [(String, PushResults)]) -> MergeRefusal? {
            do {
                _ = try PushMerge.merge(parts.map { (folder: $0.0, results: $0.1) })
                return nil
            } catch {
                return error.refusal
            }
        }
        #expect(refusal([("a", a)]) == .shardSet)
        #expect(refusal([("a", a), ("b", b), ("a2", a)]) == .shardSet)
        #expect(refusal([("a", a), ("c", Self.shard(1, of: 3, latencies: [1]))]) == .shardSet)
        var whole = b
        whole.shard = nil
        #expect(refusal([("a", a), ("w", whole)]) == .shardSet)
        #expect(refusal([("a", a), ("s", Self.shard(1, of: 2, seed: 8, latencies: [1]))]) == .notOneRun)
        #expect(refusal([("a", a), ("r", Self.shard(1, of: 2, config: "c1", latencies: [1]))]) == .notOneRun)
        #expect(refusal([("a", a), ("b", b)]) == nil)
    }
}
