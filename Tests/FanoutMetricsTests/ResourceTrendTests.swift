import Testing

@testable import FanoutMetrics

@Suite("Resource samples (soak)")
struct ResourceTrendTests {
    func samples(_ rss: [Int], fds: [Int]? = nil) -> [ResourceSample] {
        rss.enumerated().map { k, bytes in
            ResourceSample(elapsedSeconds: Double(k) * 10, residentBytes: bytes, openFileDescriptors: fds?[k] ?? 19)
        }
    }

    @Test("flat: within ±5% of the level after warm-up (the first 20%), descriptors constant")
    func flat() throws {
        let t = try #require(ResourceTrend(samples([40, 60, 100, 101, 99, 104, 100, 96, 102, 100].map { $0 << 20 })))
        #expect(t.rssFlat && t.fdsFlat)
        #expect(t.rssFirstAfterWarmUp == 100 << 20 && t.rssMax == 104 << 20 && t.rssLast == 100 << 20)
    }

    @Test("growth beyond 5% or one more descriptor is not flat")
    func notFlat() throws {
        let growing = try #require(ResourceTrend(samples([50, 60, 61, 64, 67, 70, 73, 76, 79, 82].map { $0 << 20 })))
        #expect(!growing.rssFlat && growing.fdsFlat)
        let fds = try #require(
            ResourceTrend(
                samples(
                    Array(repeating: 1 << 20, count: 10),
                    fds: [19, 19, 19, 19, 19, 20, 19, 19, 19, 19])))
        #expect(fds.rssFlat && !fds.fdsFlat && fds.fdsMax == 20)
        #expect(ResourceTrend([]) == nil)
    }
}
