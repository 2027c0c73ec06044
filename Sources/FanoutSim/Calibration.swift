import FanoutCore
import FanoutMetrics

/// Measures this machine's stage costs for a scenario's workload, to put into its `costModel` (virtual
/// time's service times). One worker runs the scenario's events unpaced on the monotonic clock with every
/// stage timed (`stageSampleEvery` 1): once with every source delivered by token and once with every
/// source broadcast, `seconds` each at most. Each figure is a median less one clock read (what timing a
/// stage adds): encode per event, validate and route per push from the token pass, apply per recipient
/// from the broadcast pass, and decode = the token pass's apply (which decodes every push) − the broadcast
/// pass's (which decodes once per push).
public enum Calibration {
    public struct Measured: Sendable {
        public var model: CostModel
        public var clockReadNanos: Double
        /// Samples behind each figure: encode, validate, route, token apply, broadcast apply.
        public var samples: [UInt64]
    }

    public static func measure(
        _ scenario: Scenario, seconds: Double, hrtime: @escaping @Sendable () -> UInt64
    ) -> Measured {
        let read = clockReadNanos(hrtime)
        let token = pass(scenario, broadcastShare: 0, seconds: seconds, hrtime: hrtime)
        let broadcast = pass(scenario, broadcastShare: 1, seconds: seconds, hrtime: hrtime)
        func median(_ h: LatencyHistogram) -> Int {
            h.isEmpty ? 0 : max(1, Int((Double(h.valueAtPercentile(50)) - read).rounded()))
        }
        let tokenApply = median(token[.apply])
        let broadcastApply = median(broadcast[.apply])
        let model = CostModel(
            encodeNanos: median(token[.encode]), validateNanos: median(token[.validate]),
            routeNanos: median(token[.route]), decodeNanos: max(0, tokenApply - broadcastApply),
            applyNanos: broadcastApply)
        return Measured(
            model: model, clockReadNanos: read,
            samples: [
                token[.encode].totalCount, token[.validate].totalCount, token[.route].totalCount,
                token[.apply].totalCount, broadcast[.apply].totalCount,
            ])
    }

    /// One unpaced pass on one worker; the histograms of every stage.
    static func pass(
        _ base: Scenario, broadcastShare: Double, seconds: Double, hrtime: @escaping @Sendable () -> UInt64
    ) -> LatencyRecorder {
        var s = base
        s.sources.broadcastShare = broadcastShare
        s.clock = .real
        s.stageSampleEvery = 1
        s.costNanosPerDelivery = 0
        let world = World(scenario: s)
        let engine = WorkerEngine(world: world, index: 0, count: 1, hrtime: hrtime)
        let feed = EventFeed(world: world, consumers: 1, hrtime: hrtime)
        var cursor = FeedCursor(feed: feed)
        let start = hrtime()
        engine.startRealClock(atHrtime: start)
        let end = start &+ UInt64(seconds * 1e9)
        var total = LatencyRecorder()
        while let (batch, k) = cursor.peek() {
            cursor.advance()
            engine.process(batch, k)
            if k == batch.count - 1 {
                if hrtime() >= end { break }
                for i in engine.takeFinished().intervals { total.add(i.histograms) }
            }
        }
        feed.cancel()
        for i in engine.result().intervals { total.add(i.histograms) }
        return total
    }

    /// The cost of one clock read, which every timed stage includes once.
    static func clockReadNanos(_ hrtime: @Sendable () -> UInt64) -> Double {
        let n = 200_000
        var sink: UInt64 = 0
        let t0 = hrtime()
        for _ in 0..<n { sink &+= hrtime() }
        let t1 = hrtime()
        withExtendedLifetime(sink) {}
        return Double(t1 &- t0) / Double(n)
    }
}
