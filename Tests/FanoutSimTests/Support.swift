import FanoutMetrics

@testable import FanoutSim

/// Every event of a scenario, in order, from a feed of its own (scheduled and encoded once).
func forEachEvent(
    _ world: World, hrtime: @escaping @Sendable () -> UInt64 = { 0 }, _ body: (EventBatch, Int) throws -> Void
) rethrows {
    let feed = EventFeed(world: world, consumers: 1, hrtime: hrtime)
    var cursor = FeedCursor(feed: feed)
    while let (batch, k) = cursor.peek() {
        cursor.advance()
        try body(batch, k)
    }
}

extension WorkerResult {
    /// Every interval this result hands over, added.
    var histograms: LatencyRecorder {
        var total = LatencyRecorder()
        for i in intervals { total.add(i.histograms) }
        return total
    }
}
