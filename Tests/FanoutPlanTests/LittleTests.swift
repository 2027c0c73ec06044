import Testing

@testable import FanoutPlan

@Suite("Little's law check")
struct LittleTests {
    /// Events every `gapNanos` from 0 to `endNanos`, each completing `latency(i)` after it is due.
    static func events(
        gapNanos: UInt64, endNanos: UInt64, latency: (Int) -> UInt64
    )
        -> (intended: [UInt64], completed: [UInt64], recipients: [Int32])
    {
        let count = Int(endNanos / gapNanos)
        let intended = (0..<count).map { UInt64($0) * gapNanos + 1 }
        let completed = intended.enumerated().map { $1 + latency($0) }
        return (intended, completed, [Int32](repeating: 5, count: count))
    }

    @Test("steady state: 1,000 events/s × 3 ms = 3 in flight, and L = X·W")
    func steady() {
        let e = Self.events(gapNanos: 1_000_000, endNanos: 10_000_000_000) { _ in 3_000_000 }
        let c = LittleCheck.compute(
            intended: e.intended, completed: e.completed, recipients: e.recipients,
            windowStartNanos: 1_000_000_000, windowEndNanos: 9_000_000_000)
        #expect(abs(c.inFlight - 3) < 0.01)
        #expect(abs(c.throughputPerSecond - 1000) < 1)
        #expect(abs(c.meanLatencySeconds - 0.003) < 1e-9)
        #expect(c.relativeDifference < 0.01 && c.holds && c.events == 8000)
    }

    @Test("a growing backlog still obeys L = X·W over a window inside the run")
    func backlog() {
        // Due every 1 ms, served every 1.25 ms: latency grows by 0.25 ms per event.
        let e = Self.events(gapNanos: 1_000_000, endNanos: 10_000_000_000) { UInt64($0) * 250_000 + 1_000_000 }
        let c = LittleCheck.compute(
            intended: e.intended, completed: e.completed, recipients: e.recipients,
            windowStartNanos: 1_000_000_000, windowEndNanos: 9_000_000_000)
        #expect(c.inFlight > 500 && c.holds, "L \(c.inFlight) X·W \(c.predictedInFlight)")
    }

    @Test("a window shorter than the latency, from a cold start, is flagged")
    func coldStart() {
        let e = Self.events(gapNanos: 1_000_000, endNanos: 10_000_000_000) { _ in 2_000_000_000 }
        let c = LittleCheck.compute(
            intended: e.intended, completed: e.completed, recipients: e.recipients,
            windowStartNanos: 0, windowEndNanos: 1_000_000_000)
        // 500 in flight on average, none completed in the window.
        #expect(abs(c.inFlight - 500) < 1 && c.throughputPerSecond == 0 && !c.holds)
    }

    @Test("events with no recipient or no completion are left out")
    func ignored() {
        let c = LittleCheck.compute(
            intended: [10, 20, 30], completed: [110, 0, 130], recipients: [1, 1, 0],
            windowStartNanos: 0, windowEndNanos: 1000)
        #expect(c.events == 1 && abs(c.inFlight - 0.1) < 1e-12)
        #expect(c.throughputPerSecond == 1e6 && abs(c.meanLatencySeconds - 1e-7) < 1e-18)
    }
}
