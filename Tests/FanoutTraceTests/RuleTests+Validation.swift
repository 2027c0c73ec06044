import FanoutCore
import FanoutTrace
import Foundation
import Testing

// TRACE.md: the "Exact rules" 1–17 and each kind of unreadable line. Helpers are in RuleTests+Support.swift; rules 10–17 continue in RuleTests+Apply.swift.

let UUID1 = "123e4567-e89b-12d3-a456-426614174000"

extension RuleTests {
    // Time and transitions

    @Test("TRACE 1: instants compare exactly — a non-integral stale date is neither rounded nor truncated")
    func trace1ExactInstants() throws {
        var t = Trace()
        t.request(0, "a1", staleDate: Raw("1700000010.5"))
        t.request(0, "a2", staleDate: Raw("1700000010.0001"))  // 10000.1 ms: stale from 10001
        t.request(0, "a3", staleDate: Raw("1700000010.9999"))  // 10999.9 ms: stale from 11000
        #expect(try t.state("a1", at: 10_499) == .active)
        #expect(try t.state("a1", at: 10_500) == .stale)
        #expect(try t.state("a2", at: 10_000) == .active)
        #expect(try t.state("a2", at: 10_001) == .stale)
        #expect(try t.state("a3", at: 10_999) == .active)
        #expect(try t.state("a3", at: 11_000) == .stale)
        #expect(try t.run().line("a1")?.contains(#""staleDate": 1700000010.5, "#) == true)
    }

    @Test("TRACE 2: transitions are inclusive — stale, ended, dismissed exactly at the instant; a line there sees it")
    func trace2Inclusive() throws {
        var t = Trace(limits: #"{"perApp":1,"perDevice":10}"#)
        t.request(0, "a1", staleDate: E + 10)
        t.request(0, "b1", device: "d2")
        t.send(5000, "b1", end(5, ["dismissal-date": E + 20]))
        #expect(try t.state("a1", at: 9_999) == .active)
        #expect(try t.state("a1", at: 10_000) == .stale)
        #expect(try t.state("a1", at: 8 * HOUR - 1) == .stale)
        #expect(try t.state("a1", at: 8 * HOUR) == .ended)
        #expect(try t.state("a1", at: 12 * HOUR - 1) == .ended)
        #expect(try t.state("a1", at: 12 * HOUR) == .dismissed)
        #expect(try t.state("b1", at: 19_999) == .ended)
        #expect(try t.state("b1", at: 20_000) == .dismissed)
        var u = t
        u.request(8 * HOUR - 1, "a2")  // a1 still live: refused
        u.request(8 * HOUR, "a3")  // a1 ended at this very instant: accepted
        let r = try u.run()
        #expect(r.id("a2") == nil && r.id("a3") != nil)
    }

    @Test("TRACE 3: the 8-hour end applies to stale activities too; dismissed at end + 4 h")
    func trace3StaleEnds() throws {
        var t = Trace()
        t.request(0, "a1", staleDate: E + 1)
        #expect(try t.state("a1", at: 8 * HOUR - 1) == .stale)
        #expect(try t.state("a1", at: 8 * HOUR) == .ended)
        #expect(try t.state("a1", at: 12 * HOUR) == .dismissed)
    }

    @Test("TRACE 3: a push-to-start activity starts at the clock of its push line (not aps.timestamp)")
    func trace3StartClock() throws {
        var t = Trace()
        t.startToken(0, "5501")
        t.start(HOUR, "5501", "s1", startPayload(10))
        #expect(try t.state("s1", at: 9 * HOUR - 1) == .active)
        #expect(try t.state("s1", at: 9 * HOUR) == .ended)
        #expect(try t.state("s1", at: 13 * HOUR - 1) == .ended)
        #expect(try t.state("s1", at: 13 * HOUR) == .dismissed)
    }

    @Test("TRACE: lines with the same at apply in file order")
    func traceSameAtFileOrder() throws {
        var t = Trace()
        t.request(0, "a1")
        t.request(0, "a2")
        t.send(1000, "a1", update(1))
        t.send(1000, "a1", end(2))
        t.send(1000, "a2", end(2))
        t.send(1000, "a2", update(1))
        t.dismiss(1000, "a2")
        t.request(1000, "a3")
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == 2 && r.state(of: "a1") == .ended)
        #expect(r.outcome(.applied, "a2") == 1 && r.outcome(.ignoredEnded, "a2") == 1)
        #expect(r.lock("d1") == ["a1", "a3"])
    }

    @Test("TRACE header: budgetPerHour null (or absent) means unlimited")
    func traceBudgetNull() throws {
        for header in [Trace(budget: nil).lines[0], #"{"trace":1,"epoch":\#(E),"schemas":\#(SCHEMAS)}"#] {
            var t = Trace(header: header)
            t.request(0, "a1")
            for k in 1...50 { t.send(k * 10, "a1", update(k)) }
            #expect(try t.run().outcome(.applied, "a1") == 50)
        }
    }

    // Validation

    @Test(
        "TRACE 4: size is strictly more than 4096 (token, start token) or 5120 (broadcast); zero bytes is PayloadEmpty")
    func trace4Sizes() throws {
        var t = Trace()
        t.startToken(0, "5501")
        t.request(0, "a1", channel: "ch")
        t.start(1000, "5501", "s1", padded(startPayload(1), to: 4097))
        t.start(2000, "5501", "s2", padded(startPayload(2), to: 4096))
        t.send(3000, "a1", padded(update(3), to: 5120))
        t.broadcast(4000, "ch", padded(update(4), to: 5120))
        t.broadcast(5000, "ch", "")
        t.start(6000, "5501", "s3", "")
        let r = try t.run()
        #expect(r.id("s1") == nil && r.id("s2") != nil)
        #expect(r.acc[RejectReason.payloadTooLarge] == 2)
        #expect(r.acc[RejectReason.payloadEmpty] == 2)
        #expect(r.outcome(.applied, "a1") == 1 && r.timestamp("a1") == Int64(E + 4))
    }

    @Test("TRACE validation order: the first failing check wins, PayloadTooLarge first … BadRequestPayload last")
    func traceValidationOrder() throws {
        var t = Trace()
        t.request(0, "a1")
        // Push k fails check k and every check after it.
        for k in 0..<10 {
            let payload = k == 0 ? padded(#"{"aps":{}}"#, to: 4097) : k == 1 ? "" : #"{"aps":{}}"#
            t.push(
                1000 * (k + 1), .token(tok("a1")), payload,
                pushType: k <= 2 ? "alert" : "liveactivity",
                topic: k <= 3 ? APP : k == 4 ? NEWS + ".push-type.liveactivity" : TOPIC,
                priority: k <= 5 ? 3 : 10, expiration: k <= 8 ? -1 : 0,
                collapseId: k <= 6 ? String(repeating: "c", count: 65) : null,
                apnsId: k <= 7 ? "nope" : null)
        }
        let r = try t.run()
        for reason in RejectReason.allCases {
            #expect(r.acc[reason] == 1, "\(reason.name)")
        }
    }

    @Test("TRACE 5: BadTopic is checked only when the target resolves; TopicDisallowed always")
    func trace5BadTopicOnlyResolved() throws {
        let news = NEWS + ".push-type.liveactivity"
        var t = Trace()
        t.request(0, "a1")
        t.push(1000, .token("abab"), update(1), topic: news)
        t.push(2000, .token("xyz!"), update(2), topic: news)
        t.push(3000, .channel("none"), update(3), topic: news)
        t.push(4000, .start("5599"), startPayload(4), topic: news, newActivity: "s1")
        t.push(5000, .token("abab"), update(5), topic: APP)
        let r = try t.run()
        #expect(r.acc[RejectReason.badTopic] == 0)
        #expect(r.acc[UnroutableReason.unregistered] == 2)
        #expect(r.acc[UnroutableReason.badDeviceToken] == 1)
        #expect(r.acc[UnroutableReason.channelNotRegistered] == 1)
        #expect(r.acc[RejectReason.topicDisallowed] == 1)
    }

    @Test("TRACE 5: a start token's bundle is its app; a channel's is the app of the activity that first joined it")
    func trace5TargetBundles() throws {
        let news = NEWS + ".push-type.liveactivity"
        var t = Trace()
        t.startToken(0, "5502", app: NEWS)
        t.request(0, "a1", channel: "ch")
        t.request(0, "n1", app: NEWS, channel: "ch")
        t.start(1000, "5502", "s1", startPayload(1))  // scores topic to a news start token
        t.broadcast(2000, "ch", update(2), topic: news)  // n1 is news, but a1 joined first
        t.broadcast(3000, "ch", update(3))
        t.start(4000, "5502", "s2", startPayload(4), topic: news)
        let r = try t.run()
        #expect(r.acc[RejectReason.badTopic] == 2)
        #expect(r.id("s1") == nil && r.id("s2") != nil)
        #expect(r.outcome(.applied, "a1") == 1 && r.outcome(.applied, "n1") == 1)
        #expect(r.timestamp("a1") == Int64(E + 3) && r.timestamp("n1") == Int64(E + 3))  // the scores-topic one
    }

    @Test("TRACE 6: priority is an integral number in {5, 10}, or {1, 5, 10} on a broadcast")
    func trace6Priority() throws {
        var t = Trace()
        t.startToken(0, "5501")
        t.request(0, "a1", channel: "ch")
        t.push(1000, .token(tok("a1")), update(1), priority: Raw("10.0"))
        t.push(2000, .token(tok("a1")), update(2), priority: Raw("5e0"))
        t.push(3000, .channel("ch"), update(3), priority: 1)
        t.push(4000, .channel("ch"), update(4), priority: 5)
        t.push(5000, .token(tok("a1")), update(5), priority: 1)
        t.push(6000, .start("5501"), startPayload(6), priority: 1, newActivity: "s1")
        t.push(7000, .channel("ch"), update(7), priority: Raw("1.5"))
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == 4)
        #expect(r.acc[RejectReason.badPriority] == 3)
        #expect(r.id("s1") == nil)
    }

    @Test("TRACE 6: collapseId is null or at most 64 UTF-8 bytes (\"\" allowed)")
    func trace6CollapseId() throws {
        var t = Trace()
        t.request(0, "a1")
        let good: [Any] = [null, "", String(repeating: "c", count: 64), String(repeating: "é", count: 32)]
        let bad: [Any] = [String(repeating: "c", count: 65), String(repeating: "é", count: 32) + "c", 64, true]
        for (k, c) in (good + bad).enumerated() {
            t.push(1000 * (k + 1), .token(tok("a1")), update(k + 1), collapseId: c)
        }
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == good.count)
        #expect(r.acc[RejectReason.badCollapseId] == bad.count)
    }

    @Test("TRACE 6: apnsId is null or a canonical 8-4-4-4-12 hex UUID, either case")
    func trace6ApnsId() throws {
        var t = Trace()
        t.request(0, "a1")
        let good: [Any] = [null, UUID1, UUID1.uppercased(), "aBcDeF01-2345-6789-AbCd-Ef0123456789"]
        let bad: [Any] = [" " + UUID1, UUID1 + " ", "123e4567_e89b_12d3_a456_426614174000", 12345]
        for (k, c) in (good + bad).enumerated() { t.push(1000 * (k + 1), .token(tok("a1")), update(k + 1), apnsId: c) }
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == good.count)
        #expect(r.acc[RejectReason.badMessageId] == bad.count)
    }

    @Test("TRACE 6: expiration is an integral number ≥ 0, and 0 on a broadcast")
    func trace6Expiration() throws {
        var t = Trace()
        t.request(0, "a1", channel: "ch")
        let a1 = Target.token(tok("a1"))
        let cases: [(Target, Any, Bool)] = [
            (a1, 0, true), (a1, E + 100, true), (a1, Raw("100.0"), true), (.channel("ch"), 0, true),
            (.channel("ch"), Raw("0.0"), true), (a1, -1, false), (a1, Raw("1.5"), false), (a1, "0", false),
            (a1, null, false), (.channel("ch"), 5, false),
        ]
        for (k, c) in cases.enumerated() { t.push(1000 * (k + 1), c.0, update(k + 1), expiration: c.1) }
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == cases.filter { $0.2 }.count)
        #expect(r.acc[RejectReason.badExpirationDate] == cases.filter { !$0.2 }.count)
    }

    @Test(
        "TRACE 7: a payload that is not strict JSON → BadRequestPayload (NaN, Infinity, lone surrogate, BOM, trailing bytes, huge numbers)"
    )
    func trace7StrictJSON() throws {
        var t = Trace()
        t.request(0, "a1")
        let u = #"{"aps":{"event":"update","timestamp":1700000001,"content-state":{"home":1,"away":0}}"#
        let bad = [
            u + #","x":NaN}"#, u + #","x":Infinity}"#, u + #","x":-Infinity}"#, u + #","x":"\ud800"}"#,
            u + #","x":"\udc00"}"#, "\u{FEFF}" + u + "}", u + "}x", u + "}{}", u + #","x":1e400}"#,
            u + #","x":-1e999}"#, u + ",}", u + #","x":'a'}"#, u + #","x":01}"#, u + ",\"x\":\"a\tb\"}",
        ]
        for (k, p) in bad.enumerated() { t.send(1000 * (k + 1), "a1", p) }
        t.send(100_000, "a1", " " + u + #","x":"\ud83d\ude00","y":1e300} "#)  // valid: surrounding whitespace, a pair
        let r = try t.run()
        #expect(r.acc[RejectReason.badRequestPayload] == bad.count)
        #expect(r.outcome(.applied, "a1") == 1)
    }

    @Test("TRACE 7: the top level or aps not an object → BadRequestPayload")
    func trace7NotObjects() throws {
        var t = Trace()
        t.request(0, "a1")
        let bad = ["[]", #""aps""#, "1", #"{"aps":[]}"#, #"{"aps":"x"}"#, #"{"aps":null}"#, #"{"aps":1}"#]
        for (k, p) in bad.enumerated() { t.send(1000 * (k + 1), "a1", p) }
        let r = try t.run()
        #expect(r.acc[RejectReason.badRequestPayload] == bad.count)
    }

    @Test("TRACE 7: event missing or not start/update/end → BadRequestPayload")
    func trace7Event() throws {
        var t = Trace()
        t.request(0, "a1")
        let events: [Any] = ["Update", "stop", "", 1, null, ["update"]]
        for (k, e) in events.enumerated() {
            t.send(1000 * (k + 1), "a1", js(["aps": ["event": e, "timestamp": E + k + 1, "content-state": SCORE]]))
        }
        t.send(9000, "a1", js(["aps": ["timestamp": E + 9, "content-state": SCORE]]))
        let r = try t.run()
        #expect(r.acc[RejectReason.badRequestPayload] == events.count + 1)
    }

    @Test("TRACE 7: timestamp must be an integral number in Int64 range (1700000000.0 fine; 1.5, \"1\", true not)")
    func trace7Timestamp() throws {
        var t = Trace()
        t.request(0, "a1")
        let good: [Any] = [Raw("1700000001.0"), Raw("1.700000002e9"), Raw("9223372036854775807")]
        let bad: [Any] = [Raw("1.5"), "1", true, null, Raw("9223372036854775808"), Raw("1700000003.5")]
        for (k, ts) in (bad + good).enumerated() {
            t.send(1000 * (k + 1), "a1", js(["aps": ["event": "update", "timestamp": ts, "content-state": SCORE]]))
        }
        t.send(20_000, "a1", js(["aps": ["event": "update", "content-state": SCORE]]))
        let r = try t.run()
        #expect(r.acc[RejectReason.badRequestPayload] == bad.count + 1)
        #expect(r.outcome(.applied, "a1") == good.count)
        #expect(r.timestamp("a1") == Int64.max)
    }

    @Test("TRACE 7: the event must fit the target — start only to a start token, update/end only to a token or channel")
    func trace7EventFitsTarget() throws {
        var t = Trace()
        t.startToken(0, "5501")
        t.request(0, "a1", channel: "ch")
        t.send(1000, "a1", startPayload(1))
        t.broadcast(2000, "ch", startPayload(2))
        t.push(3000, .start("5501"), update(3), newActivity: "s1")
        t.push(4000, .start("5501"), end(4), newActivity: "s2")
        let r = try t.run()
        #expect(r.acc[RejectReason.badRequestPayload] == 4)
        #expect(r.acc.routed == 0 && r.id("s1") == nil && r.id("s2") == nil)
    }

    // Routing

    @Test("TRACE 8: a token is well-formed when non-empty, even-length hex of either case; matching is by exact string")
    func trace8TokenMatching() throws {
        var t = Trace()
        t.request(0, "a1", token: "AbCd01")
        t.push(1000, .token("AbCd01"), update(1))
        t.push(2000, .token("abcd01"), update(2))
        t.push(3000, .token("ABCD01"), update(3))
        t.push(4000, .token("AbCd0"), update(4))
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == 1)
        #expect(r.acc[UnroutableReason.unregistered] == 2)
        #expect(r.acc[UnroutableReason.badDeviceToken] == 1)
    }

    @Test("TRACE 8: update tokens and start tokens are separate namespaces")
    func trace8Namespaces() throws {
        var t = Trace()
        t.startToken(0, "5501")
        t.request(0, "a1", token: "5501")  // same string as the start token: no conflict
        t.push(1000, .token("5501"), update(1))
        t.push(2000, .start("5501"), startPayload(2), newActivity: "s1")
        t.push(3000, .start(tok("s1")), startPayload(3), newActivity: "s2")
        t.push(4000, .token("5502"), update(4))
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == 1 && r.id("s1") != nil && r.id("s2") == nil)
        #expect(r.acc[UnroutableReason.unregistered] == 2)
    }

    @Test(
        "TRACE 8: a new startToken for the same (device, app) replaces the old one, which then routes as Unregistered")
    func trace8StartTokenReplaced() throws {
        var t = Trace()
        t.startToken(0, "5501")
        t.startToken(500, "5511")
        t.start(1000, "5501", "s1", startPayload(1))
        t.start(2000, "5511", "s2", startPayload(2))
        let r = try t.run()
        #expect(r.id("s1") == nil && r.id("s2") != nil)
        #expect(r.acc[UnroutableReason.unregistered] == 1)
    }

    @Test("TRACE 9: a channel is registered when an activity first joins it — request, subscribe or input-push-channel")
    func trace9Registration() throws {
        var t = Trace()
        t.startToken(0, "5501")
        t.broadcast(0, "c1", update(0))
        t.request(0, "a1", channel: "c1")
        t.request(0, "a2")
        t.subscribe(0, "a2", "c2")
        t.start(0, "5501", "s1", startPayload(0, ["input-push-channel": "c3"]))
        for (k, c) in ["c1", "c2", "c3"].enumerated() { t.broadcast(1000 * (k + 1), c, update(k + 1)) }
        let r = try t.run()
        #expect(r.acc[UnroutableReason.channelNotRegistered] == 1)
        #expect(r.outcome(.applied, "a1") == 1 && r.outcome(.applied, "a2") == 1 && r.outcome(.applied, "s1") == 2)
    }

    @Test(
        "TRACE 9: an activity is in at most one channel; a channel stays registered — no subscriber: routed, 0 deliveries"
    )
    func trace9OneChannelStaysRegistered() throws {
        var t = Trace()
        t.request(0, "a1", channel: "c1")
        t.subscribe(0, "a1", "c2")
        t.broadcast(1000, "c1", update(1))
        t.broadcast(2000, "c2", update(2))
        let r = try t.run()
        #expect(r.acc.routed == 2 && r.acc.deliveries == 1)
        #expect(r.acc[UnroutableReason.channelNotRegistered] == 0)
        #expect(r.outcome(.applied, "a1") == 1 && r.timestamp("a1") == Int64(E + 2))
    }

    @Test("TRACE 9: recipients are the subscribers now, in any state — ended and dismissed get ignoredEnded")
    func trace9AnyState() throws {
        var t = Trace()
        t.request(0, "a1", channel: "ch")
        t.request(0, "a2", channel: "ch")
        t.request(0, "a3", channel: "ch")
        t.send(1000, "a1", end(1))
        t.dismiss(1000, "a2")
        t.broadcast(2000, "ch", update(2))
        let r = try t.run()
        #expect(r.acc.deliveries == 4)
        #expect(r.outcome(.ignoredEnded, "a1") == 1 && r.outcome(.ignoredEnded, "a2") == 1)
        #expect(r.outcome(.applied, "a3") == 1)
    }

    @Test("TRACE 9: a channel's recipients are in activity-id order")
    func trace9IdOrder() throws {
        var t = Trace()
        for a in ["m", "b", "z", "a"] { t.request(0, a, channel: "ch") }
        let r = try t.run()
        let router = r.pipeline!.router
        #expect(r.names(router.subscribers[Int(router.channels.lookup("ch")!)]) == ["a", "b", "m", "z"])
    }

    // Apply
}
