import FanoutMetrics
import Testing

/// `--trigger A,B`: each URL's counts and the identity that they add up to the totals (`byURLAddsUp`), which
/// `fanout serve` checks (exit 1 when broken).
@Suite struct BackendURLResultsTests {
    static func row(_ url: String, ok: Int, refused: Int, cancelled: Int) -> BackendURLResults {
        var r = BackendURLResults(url: url)
        r.sent = ok + refused + cancelled
        if ok > 0 { r.counts.byStatus[200] = ok }
        if refused > 0 { r.counts.byStatus[500] = refused }
        r.cancelled = cancelled
        for _ in 0..<(ok + refused) { r.responseNanos.record(1_000_000) }
        for _ in 0..<r.sent { r.scheduleLagNanos.record(10_000) }
        return r
    }

    static func trigger(_ rows: [BackendURLResults]) -> TriggerResults {
        var t = TriggerResults()
        let total = BackendURLResults.total(rows)
        t.sent = total.sent
        t.counts = total.counts
        t.cancelledAtShutdown = total.cancelled
        t.responseNanos = total.responseNanos
        t.scheduleLagNanos = total.scheduleLagNanos
        t.byURL = rows
        return t
    }

    @Test func rowsThatAddUpHold() {
        let t = Self.trigger([
            Self.row("http://a/t", ok: 10, refused: 0, cancelled: 1),
            Self.row("http://b/t", ok: 0, refused: 7, cancelled: 0),
        ])
        #expect(t.byURLAddsUp && t.identityHolds)
        #expect(t.failures == 7 && t.byURL[1].failures == 7 && t.byURL[0].failures == 0)
        #expect(BackendURLResults.failureText(t.byURL) == "http://a/t none; http://b/t 7 answered 500")
    }

    @Test func aRequestCountedOnOneSideOnlyBreaksIt() {
        var t = Self.trigger([
            Self.row("http://a/t", ok: 10, refused: 0, cancelled: 0),
            Self.row("http://b/t", ok: 3, refused: 0, cancelled: 0),
        ])
        t.byURL[1].sent += 1  // sent to b, never ended there
        #expect(!t.byURLAddsUp)
        var u = Self.trigger([Self.row("http://a/t", ok: 2, refused: 0, cancelled: 0)])
        u.counts.timeouts += 1  // a timeout in the totals no URL has
        u.sent += 1
        #expect(!u.byURLAddsUp)
        #expect(TriggerResults().byURLAddsUp, "no rows: nothing to add up")
    }

    @Test func registrationRowsAddUpToRequests() {
        var g = RegisterResults()
        g.byURL = [
            Self.row("http://a/r", ok: 5, refused: 0, cancelled: 0),
            Self.row("http://b/r", ok: 0, refused: 3, cancelled: 1),
        ]
        g.requests = 9
        g.counts = BackendURLResults.total(g.byURL).counts
        g.unregisteredAtDeadline = 1
        #expect(g.byURLAddsUp)
        g.unregisteredAtDeadline = 0  // a request cancelled at the deadline, no activity left unregistered
        #expect(!g.byURLAddsUp)
    }
}
