import FanoutCore
import FanoutMetrics
import Testing

@Suite struct CountsTests {
    /// One `+=` adds every case of the enum: a count added to `ConnectionStats.Count` or `FaultCounts.Count` is
    /// summed across loops without anyone writing it into an `add`.
    @Test func plusEqualsAddsEveryCase() {
        var a = ConnectionStats()
        var b = ConnectionStats()
        for (i, c) in ConnectionStats.Count.allCases.enumerated() {
            a[c] = i + 1
            b[c] = 100 * (i + 1)
        }
        for (i, c) in FaultCounts.Count.allCases.enumerated() { b.faults[c] = 7 + i }
        b.endReasons = ["IdleTimeout": 2]
        a.endReasons = ["IdleTimeout": 1, "Shutdown": 3]
        a += b
        for (i, c) in ConnectionStats.Count.allCases.enumerated() { #expect(a[c] == 101 * (i + 1), "\(c)") }
        for (i, c) in FaultCounts.Count.allCases.enumerated() { #expect(a.faults[c] == 7 + i, "\(c)") }
        #expect(a.endReasons == ["IdleTimeout": 3, "Shutdown": 3])
    }

    @Test func allListsCasesInOrder() {
        var f = FaultCounts()
        f[.reset] = 4
        f[.goAway] = 1
        #expect(f.counts.all.map(\.count) == [0, 0, 0, 4, 1, 0, 0, 0, 0])
        #expect(f.injected.map(\.kind) == ["503", "429", "500", "reset", "goaway", "stall"])
        #expect(f.injected.map(\.count) == [0, 0, 0, 4, 1, 0])
    }
}
