import FanoutCore
import Testing
import UVLoop

@testable import FanoutWire

/// The one place a server connection's deadlines are decided (`H2ServerConnection.sweep`), on a virtual clock.
@Suite("H2ServerConnection.sweep: preface, request, stall and idle deadlines")
struct ConnectionSweepTests {
    let d = ConnectionDeadlines(prefaceSeconds: 10, requestSeconds: 5, idleSeconds: 60)

    @Test("no preface by the preface deadline: closed, and not a moment before")
    func preface() throws {
        let h = try Harness(preface: false)
        let c = h.connection!
        #expect(c.sweep(now: c.openedNanos + d.prefaceNanos - 1, d) == .none)
        #expect(!c.finished)
        #expect(c.sweep(now: c.openedNanos + d.prefaceNanos, d) == .aborted)
        #expect(c.finished && c.endReason == "no HTTP/2 preface in time" && h.keeper.closed == 1)
    }

    @Test("idle for the idle deadline: one GOAWAY IdleTimeout, not one per sweep")
    func idle() throws {
        let h = try Harness()
        h.keeper.answerAtOnce = true
        let c = h.connection!
        #expect(c.sweep(now: 1_000, d) == .none)  // the first look starts the idle clock
        #expect(c.sweep(now: 1_000 + d.idleNanos - 1, d) == .none)
        #expect(c.sweep(now: 1_000 + d.idleNanos, d) == .wentAway)
        #expect(c.goingAway)
        #expect(c.sweep(now: 1_000 + 3 * d.idleNanos, d) == .none, "GOAWAY is sent once")
        #expect(frames(h.written).filter { $0.type == 7 }.count == 1)
    }

    @Test("requests incomplete for the request deadline are reset; the connection stays")
    func request() throws {
        let h = try Harness()
        let c = h.connection!
        h.send(Client.request(1, end: false))
        let arrival = EventLoop.hrtimeNanos
        #expect(c.sweep(now: arrival, d) == .none)
        #expect(c.incompleteRequests == 1)
        #expect(c.sweep(now: arrival + d.requestNanos + 1_000_000_000, d) == .none)
        #expect(c.requestTimeouts == 1 && c.incompleteRequests == 0 && !c.finished)
    }
}
