import FanoutCore
import FanoutTrace
import Foundation
import Testing

// DOMAIN §4 onwards (time, relevance order, accounting), continued from RuleTests.swift.
extension RuleTests {
    // §4 Time

    @Test("DOMAIN §4: an active activity is stale while now >= stale-date")
    func timeStale() throws {
        var t = Trace()
        t.request(0, "a1", staleDate: E + 60)
        #expect(try t.state("a1", at: 59_999) == .active)
        #expect(try t.state("a1", at: 60_000) == .stale)
        #expect(try t.state("a1", at: 2 * HOUR) == .stale)
    }

    @Test("DOMAIN §4: an update moving the stale-date later, or removing it, makes a stale activity active again")
    func timeStaleBack() throws {
        var t = Trace()
        t.request(0, "a1", staleDate: E + 60)
        t.request(0, "a2", staleDate: E + 60)
        t.send(61_000, "a1", update(61, SCORE, ["stale-date": E + 120]))
        t.send(61_000, "a2", update(61))
        let r = try t.run()
        #expect(r.state(of: "a1") == .active && r.state(of: "a2") == .active)
        #expect(try t.state("a1", at: 120_000) == .stale)
        #expect(try t.state("a2", at: 8 * HOUR - 1) == .active)
    }

    @Test("DOMAIN §4: an activity not ended 8 hours after it started is ended by the system")
    func timeEightHours() throws {
        var t = Trace()
        t.request(1000, "a1")
        #expect(try t.state("a1", at: 1000 + 8 * HOUR - 1) == .active)
        let r = try t.run(until: 1000 + 8 * HOUR)
        #expect(r.state(of: "a1") == .ended)
        t.send(1000 + 8 * HOUR, "a1", update(1))
        #expect(try t.run().outcome(.ignoredEnded, "a1") == 1)
    }

    @Test("DOMAIN §4: no dismissal-date → dismissed at end + 4 h")
    func timeDismissDefault() throws {
        var t = Trace()
        t.request(0, "a1")
        t.send(10_000, "a1", end(10))
        #expect(try t.state("a1", at: 10_000 + 4 * HOUR - 1) == .ended)
        #expect(try t.state("a1", at: 10_000 + 4 * HOUR) == .dismissed)
    }

    @Test("DOMAIN §4: a dismissal-date at or before the end time → dismissed at once")
    func timeDismissAtOnce() throws {
        var t = Trace()
        t.request(0, "a1")
        t.request(0, "a2")
        t.send(10_000, "a1", end(10, ["dismissal-date": E + 10]))
        t.send(10_000, "a2", end(10, ["dismissal-date": E - 100]))
        let r = try t.run()
        #expect(r.state(of: "a1") == .dismissed && r.state(of: "a2") == .dismissed)
        #expect(r.lock("d1").isEmpty)
    }

    @Test("DOMAIN §4: otherwise dismissed at min(dismissal-date, end + 4 h)")
    func timeDismissMin() throws {
        var t = Trace()
        t.request(0, "a1")
        t.request(0, "a2")
        t.send(10_000, "a1", end(10, ["dismissal-date": E + 11]))
        t.send(10_000, "a2", end(10, ["dismissal-date": E + 10 + 5 * 3600]))
        #expect(try t.state("a1", at: 10_999) == .ended)
        #expect(try t.state("a1", at: 11_000) == .dismissed)
        #expect(try t.state("a2", at: 10_000 + 4 * HOUR - 1) == .ended)
        #expect(try t.state("a2", at: 10_000 + 4 * HOUR) == .dismissed)
    }

    @Test("DOMAIN §4: nothing is visible more than 12 hours after its start")
    func timeTwelveHours() throws {
        var t = Trace()
        t.request(0, "a1", staleDate: E + 60)
        t.request(0, "a2")
        t.send(8 * HOUR - 1000, "a2", end(8 * 3600 - 1, ["dismissal-date": E + 24 * 3600]))
        let before = try t.run(until: 12 * HOUR - 1001)
        #expect(before.lock("d1") == ["a1", "a2"])
        let after = try t.run(until: 12 * HOUR)
        #expect(after.lock("d1").isEmpty)
        #expect(after.state(of: "a1") == .dismissed && after.state(of: "a2") == .dismissed)
    }

    @Test("DOMAIN §4: a person can dismiss an activity at any time → dismissed at once")
    func timeUserDismiss() throws {
        var t = Trace()
        t.request(0, "a1")
        t.request(0, "a2", staleDate: E + 1)
        t.request(0, "a3")
        t.send(1000, "a3", end(1))
        t.dismiss(5000, "a1")
        t.dismiss(5000, "a2")
        t.dismiss(5000, "a3")
        let r = try t.run()
        #expect(r.state(of: "a1") == .dismissed && r.state(of: "a2") == .dismissed && r.state(of: "a3") == .dismissed)
        #expect(r.lock("d1").isEmpty && r.island("d1").isEmpty)
    }

    @Test(
        "DOMAIN §4: all rules read the simulation clock — dates in the wall-clock past are judged at the trace's time")
    func timeOneClock() throws {
        var t = Trace()  // epoch 1700000000 (2023) is long past on the wall clock
        t.request(0, "a1", staleDate: E + 3600)
        t.send(1000, "a1", update(1, SCORE, ["stale-date": E + 3600]))
        let r1 = try t.run()
        let r2 = try t.run()
        #expect(r1.state(of: "a1") == .active)
        #expect(r1.dump == r2.dump)
    }

    // §5 Relevance ordering

    @Test("DOMAIN §5: the Lock Screen shows every activity not dismissed, by relevance, highest first")
    func lockScreenOrder() throws {
        var t = Trace()
        t.request(0, "a1", relevance: 10)
        t.request(0, "a2", relevance: 30)
        t.request(0, "a3", relevance: 20)
        t.request(0, "a4", relevance: 99)
        t.send(1000, "a3", end(1, ["content-state": SCORE, "relevance-score": 20]))  // ended: still shown
        t.dismiss(1000, "a4")
        let r = try t.run()
        #expect(r.lock("d1") == ["a2", "a3", "a1"])
    }

    @Test("DOMAIN §5: relevance ties go to the activity that started first")
    func lockScreenTieStart() throws {
        var t = Trace()
        t.request(0, "z9", relevance: 5)
        t.request(1000, "a1", relevance: 5)
        let r = try t.run()
        #expect(r.lock("d1") == ["z9", "a1"])
    }

    @Test("DOMAIN §5: remaining ties go by activity id")
    func lockScreenTieId() throws {
        var t = Trace()
        t.request(0, "b", relevance: 5)
        t.request(0, "c", relevance: 5)
        t.request(0, "a", relevance: 5)
        let r = try t.run()
        #expect(r.lock("d1") == ["a", "b", "c"])
    }

    @Test("DOMAIN §5: the Dynamic Island shows the first two activities that are active or stale")
    func islandTwo() throws {
        var t = Trace()
        t.request(0, "a1", relevance: 40)
        t.request(0, "a2", staleDate: E + 1, relevance: 30)
        t.request(0, "a3", relevance: 20)
        t.request(0, "a4", relevance: 10)
        t.send(1000, "a1", end(1, ["content-state": SCORE, "relevance-score": 40]))
        let r = try t.run(until: 2000)
        #expect(r.state(of: "a2") == .stale)
        #expect(r.lock("d1") == ["a1", "a2", "a3", "a4"])
        #expect(r.island("d1") == ["a2", "a3"])
    }

    @Test("DOMAIN §5: the order is kept current after every apply and every time transition")
    func orderKeptCurrent() throws {
        var t = Trace()
        t.request(0, "a1", relevance: 30)
        t.request(HOUR, "a2", relevance: 20)
        t.request(HOUR, "a3", relevance: 10)
        t.send(HOUR + 1000, "a3", update(3601, SCORE, ["relevance-score": 25]))
        let r1 = try t.run()
        #expect(r1.lock("d1") == ["a1", "a3", "a2"] && r1.island("d1") == ["a1", "a3"])
        let r2 = try t.run(until: 8 * HOUR)  // a1 ends by the system
        #expect(r2.lock("d1") == ["a1", "a3", "a2"] && r2.island("d1") == ["a3", "a2"])
        let r3 = try t.run(until: 12 * HOUR)  // a1 dismissed
        #expect(r3.lock("d1") == ["a3", "a2"])
    }

    // §6 Accounting

    @Test("DOMAIN §6: pushes = rejected + unroutable + routed; deliveries = Σ recipients = Σ outcomes")
    func accountingIdentities() throws {
        var t = Trace()
        t.startToken(0, "5501")
        t.request(0, "a1", channel: "ch")
        t.request(0, "a2", channel: "ch")
        t.request(0, "a3", channel: "ch")
        t.send(1000, "a3", end(1))
        t.send(2000, "a1", "")  // rejected
        t.send(3000, "a1", update(3), priority: 3)  // rejected
        t.push(4000, .token("0000"), update(4))  // unroutable
        t.broadcast(5000, "nope", update(5))  // unroutable
        t.send(6000, "a1", update(6))  // applied
        t.send(7000, "a1", update(6))  // stale timestamp
        t.send(8000, "a2", update(8, ["home": 1.5, "away": 0]))  // decode failed
        t.broadcast(9000, "ch", update(9))  // 3 deliveries: 2 applied, 1 ignoredEnded
        t.start(10_000, "5501", "s1", startPayload(10))  // applied
        let r = try t.run()
        let totals = r.totals
        #expect(int(totals["pushes"]) == 10)
        #expect(sum(totals["rejected"]) == 2 && sum(totals["unroutable"]) == 2 && int(totals["routed"]) == 6)
        #expect(int(totals["pushes"]) == sum(totals["rejected"]) + sum(totals["unroutable"]) + int(totals["routed"]))
        #expect(int(totals["deliveries"]) == 8 && sum(totals["outcomes"]) == 8)
        #expect(r.acc.identitiesHold)
        #expect(r.acc[Outcome.applied] == 5 && r.acc[Outcome.ignoredEnded] == 1)
    }
}
