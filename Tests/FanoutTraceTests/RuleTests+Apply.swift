import FanoutCore
import FanoutTrace
import Foundation
import Testing

// TRACE rules 10 onwards (apply, dump) and unreadable traces, continued from RuleTests+Validation.swift.
extension RuleTests {
    @Test("TRACE 10: limits count only active or stale activities; ended and dismissed ones free a slot")
    func trace10LiveOnly() throws {
        var t = Trace(limits: #"{"perApp":1,"perDevice":10}"#)
        t.request(0, "a1", staleDate: E + 1)
        t.request(2000, "a2")  // a1 stale: still counts
        t.send(3000, "a1", end(3))
        t.request(3000, "a3")
        t.dismiss(4000, "a3")
        t.request(4000, "a4")
        let r = try t.run()
        #expect(r.id("a2") == nil && r.id("a3") != nil && r.id("a4") != nil)
        #expect(r.acc.requestsLimitExceeded == 1)
    }

    @Test("TRACE 10: a request or start is refused when either count (per app, per device) has reached its limit")
    func trace10EitherLimit() throws {
        var t = Trace(limits: #"{"perApp":2,"perDevice":3}"#)
        t.startToken(0, "5502", app: NEWS)
        t.request(0, "a1")
        t.request(0, "a2")
        t.request(0, "a3")  // app count 2
        t.request(0, "n1", app: NEWS)
        t.start(1000, "5502", "n2", startPayload(1), topic: NEWS + ".push-type.liveactivity")  // device count 3
        let r = try t.run()
        #expect(r.id("a3") == nil && r.id("n2") == nil && r.id("n1") != nil)
        #expect(r.acc.requestsLimitExceeded == 1 && r.acc[Outcome.limitExceeded] == 1)
    }

    @Test("TRACE 11: the budget window is (now − 3600 s, now]")
    func trace11Window() throws {
        var t = Trace(budget: 2)
        t.request(0, "a1")
        t.send(0, "a1", update(1))
        t.send(1000, "a1", update(2))
        t.send(HOUR - 1, "a1", update(3))  // 2 in window: throttled
        t.send(HOUR, "a1", update(4))  // the push at 0 left the window
        t.send(HOUR + 500, "a1", update(5))  // pushes at 1000 and HOUR: throttled
        t.send(HOUR + 1000, "a1", update(6))  // the push at 1000 left
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == 4)
        #expect(r.outcome(.throttled, "a1") == 2)
        #expect(r.timestamp("a1") == Int64(E + 6))
    }

    @Test("TRACE 11: a push that then fails to decode is counted; priority 5 is not")
    func trace11DecodeFailedCounts() throws {
        var t = Trace(budget: 1)
        t.request(0, "a1")
        t.send(1000, "a1", update(1), priority: 5)
        t.send(2000, "a1", update(2, ["home": "x", "away": 0]))
        t.send(3000, "a1", update(3))
        let r = try t.run()
        #expect(
            r.outcome(.applied, "a1") == 1 && r.outcome(.decodeFailed, "a1") == 1 && r.outcome(.throttled, "a1") == 1)
    }

    @Test("TRACE 11: throttled, ignored and push-to-start pushes are never counted")
    func trace11NotCounted() throws {
        var t = Trace(budget: 1)
        t.startToken(0, "5501")
        t.start(0, "5501", "s1", startPayload(10))  // not counted
        t.send(500, "s1", update(10))  // ignoredStaleTimestamp: not counted
        t.send(1000, "s1", update(11))  // counted
        t.send(2000, "s1", update(12))  // throttled: not counted
        t.send(HOUR + 1000, "s1", update(13))  // only the push at 1000 was counted, and it left the window
        let r = try t.run()
        #expect(r.outcome(.ignoredStaleTimestamp, "s1") == 1)
        #expect(r.outcome(.throttled, "s1") == 1)
        #expect(r.outcome(.applied, "s1") == 3)
    }

    @Test("TRACE 11: priority-1 broadcasts are not counted; a broadcast counts against each recipient's own budget")
    func trace11Broadcast() throws {
        var t = Trace(budget: 1)
        t.request(0, "a1", channel: "ch")
        t.request(0, "a2", channel: "ch")
        t.request(0, "a3")
        t.broadcast(1000, "ch", update(1), priority: 1)
        t.broadcast(2000, "ch", update(2), priority: 10)
        for a in ["a1", "a2", "a3"] { t.send(3000, a, update(3)) }
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == 2 && r.outcome(.throttled, "a1") == 1)
        #expect(r.outcome(.applied, "a2") == 2 && r.outcome(.throttled, "a2") == 1)
        #expect(r.outcome(.applied, "a3") == 1 && r.outcome(.throttled, "a3") == 0)
    }

    @Test("TRACE 12: content-state is required on update — absent or null → decodeFailed")
    func trace12UpdateNeedsContent() throws {
        var t = Trace()
        t.request(0, "a1")
        t.send(1000, "a1", aps("update", 1))
        t.send(2000, "a1", aps("update", 2, ["content-state": null]))
        t.send(3000, "a1", aps("update", 3, ["content-state": [1]]))
        let r = try t.run()
        #expect(r.outcome(.decodeFailed, "a1") == 3)
        #expect(r.timestamp("a1") == nil)
    }

    @Test("TRACE 12: an end without content-state keeps the content, stale-date and relevance-score; it only ends")
    func trace12EndKeeps() throws {
        var t = Trace()
        t.request(0, "a1")
        t.request(0, "a2")
        let more: [String: Any] = ["stale-date": E + 7200, "relevance-score": 7]
        t.send(1000, "a1", update(1, ["home": 2, "away": 1], more))
        t.send(1000, "a2", update(1, ["home": 2, "away": 1], more))
        t.send(2000, "a1", end(2))
        t.send(2000, "a2", end(2, ["content-state": null]))
        let r = try t.run()
        for a in ["a1", "a2"] {
            #expect(r.state(of: a) == .ended && r.timestamp(a) == Int64(E + 2))
            #expect(r.content(a) == #"{"home": 2, "away": 1}"#)
            #expect(r.staleDate(a) == Double(E + 7200) && r.relevance(a) == 7)
        }
    }

    @Test("TRACE 12: an end with content-state replaces content, stale-date (absent → none) and relevance (absent → 0)")
    func trace12EndWithContent() throws {
        var t = Trace()
        t.request(0, "a1", staleDate: E + 7200, relevance: 9)
        t.send(1000, "a1", end(1, ["content-state": ["home": 4, "away": 4]]))
        let r = try t.run()
        #expect(r.state(of: "a1") == .ended && r.content("a1") == #"{"home": 4, "away": 4}"#)
        #expect(r.staleDate("a1") == nil && r.relevance("a1") == 0)
    }

    @Test("TRACE 12: stale-date and dismissal-date are absent/null (none) or integral numbers, else decodeFailed")
    func trace12Dates() throws {
        var t = Trace()
        t.request(0, "a1")
        t.send(1000, "a1", update(1, SCORE, ["stale-date": Raw("1700000100.5")]))
        t.send(2000, "a1", update(2, SCORE, ["stale-date": "1700000100"]))
        t.send(3000, "a1", end(3, ["dismissal-date": Raw("1700000100.5")]))
        t.send(4000, "a1", end(4, ["dismissal-date": true]))
        t.send(5000, "a1", update(5, SCORE, ["stale-date": Raw("1700000100.0")]))
        t.send(6000, "a1", update(6, SCORE, ["stale-date": null]))
        let r1 = try t.run()
        #expect(r1.outcome(.decodeFailed, "a1") == 4 && r1.outcome(.applied, "a1") == 2)
        #expect(r1.state(of: "a1") == .active && r1.staleDate("a1") == nil)
        t.send(7000, "a1", end(7, ["dismissal-date": null]))
        #expect(try t.state("a1", at: 7000 + 4 * HOUR - 1) == .ended)
    }

    @Test("TRACE 12: relevance-score absent or null → 0, any finite number, else decodeFailed")
    func trace12Relevance() throws {
        var t = Trace()
        t.request(0, "a1", relevance: 5)
        t.send(1000, "a1", update(1, SCORE, ["relevance-score": Raw("-2.5e2")]))
        let r1 = try t.run()
        #expect(r1.relevance("a1") == -250)
        t.send(2000, "a1", update(2, SCORE, ["relevance-score": "9"]))
        t.send(3000, "a1", update(3, SCORE, ["relevance-score": [9]]))
        let r2 = try t.run()
        #expect(r2.outcome(.decodeFailed, "a1") == 2 && r2.relevance("a1") == -250)
        t.send(4000, "a1", update(4, SCORE, ["relevance-score": null]))
        #expect(try t.run().relevance("a1") == 0)
    }

    @Test("TRACE 12: alert is not examined on update and end")
    func trace12AlertIgnored() throws {
        var t = Trace()
        t.request(0, "a1")
        t.send(1000, "a1", update(1, SCORE, ["alert": 5]))
        t.send(2000, "a1", end(2, ["alert": ["title": 1]]))
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == 2 && r.state(of: "a1") == .ended)
    }

    @Test("TRACE 13: int = integral number in Int64 range (3.0 yes; 3.5, true, \"3\" no)")
    func trace13Int() throws {
        var t = Trace()
        t.request(0, "a1")
        let bad: [Any] = [Raw("3.5"), true, "3", null, Raw("9223372036854775808"), Raw("-9223372036854775809")]
        for (k, v) in bad.enumerated() { t.send(1000 * (k + 1), "a1", update(k + 1, ["home": v, "away": 0])) }
        t.send(10_000, "a1", update(10, ["home": Raw("3.0"), "away": Raw("1e2")]))
        let r1 = try t.run()
        #expect(r1.outcome(.decodeFailed, "a1") == bad.count)
        #expect(r1.content("a1") == #"{"home": 3, "away": 100}"#)
        t.send(11_000, "a1", update(11, ["home": Raw("9223372036854775807"), "away": Raw("-9223372036854775808")]))
        #expect(try t.run().content("a1") == #"{"home": 9223372036854775807, "away": -9223372036854775808}"#)
    }

    @Test("TRACE 13: double = any finite number; string; bool = true/false only")
    func trace13OtherTypes() throws {
        var t = Trace()
        let ok: [String: Any] = ["i": 1, "d": 2, "s": "x", "b": false]
        t.request(0, "t1", state: ok, type: "Typed")
        let bad: [[String: Any]] = [
            ["d": "2"], ["d": true], ["s": 5], ["s": null], ["b": 1], ["b": "true"], ["b": null],
        ]
        for (k, change) in bad.enumerated() {
            var cs = ok
            for (key, v) in change { cs[key] = v }
            t.send(1000 * (k + 1), "t1", update(k + 1, cs))
        }
        let r = try t.run()
        #expect(r.outcome(.decodeFailed, "t1") == bad.count)
        #expect(r.content("t1") == #"{"i": 1, "d": 2.0, "s": "x", "b": false}"#)
        t.send(20_000, "t1", update(20, ["i": 1, "d": Raw("1e300"), "s": "", "b": true]))
        #expect(try t.run().content("t1") == #"{"i": 1, "d": 1e+300, "s": "", "b": true}"#)
    }

    @Test("TRACE 13: a trailing ? allows absent or null, and such a field is left out of the dumped content")
    func trace13Optional() throws {
        var t = Trace()
        t.request(0, "a1", state: ["home": 0, "away": 0, "clock": "05:00", "prob": 0.5, "final": false])
        let r1 = try t.run()
        #expect(r1.content("a1") == #"{"home": 0, "away": 0, "clock": "05:00", "prob": 0.5, "final": false}"#)
        t.send(1000, "a1", update(1, ["home": 1, "away": 0, "clock": null, "final": null]))
        let r2 = try t.run()
        #expect(r2.outcome(.applied, "a1") == 1)
        #expect(r2.content("a1") == #"{"home": 1, "away": 0}"#)
    }

    @Test("TRACE 13: unknown keys are ignored and left out of the dump; duplicate keys — the last one wins")
    func trace13UnknownAndDuplicates() throws {
        var t = Trace()
        t.request(0, "a1")
        let head = #"{"aps":{"event":"update","timestamp":"#
        t.send(1000, "a1", head + #"1700000001,"content-state":{"home":1,"zzz":[1],"home":7,"away":0,"Home":"x"}}}"#)
        let r1 = try t.run()
        #expect(r1.content("a1") == #"{"home": 7, "away": 0}"#)
        t.send(2000, "a1", head + #"1700000002,"content-state":{"home":1,"away":0,"home":"one"}}}"#)
        let r2 = try t.run()
        #expect(r2.outcome(.decodeFailed, "a1") == 1 && r2.content("a1") == #"{"home": 7, "away": 0}"#)
    }

    @Test("TRACE 14: push-to-start checks the limit first (limitExceeded), then decoding")
    func trace14LimitFirst() throws {
        var t = Trace(limits: #"{"perApp":1,"perDevice":10}"#)
        t.startToken(0, "5501")
        t.request(0, "a1")
        t.start(1000, "5501", "s1", startPayload(1, ["content-state": ["home": "x"]]))
        let r = try t.run()
        #expect(r.acc[Outcome.limitExceeded] == 1 && r.acc[Outcome.decodeFailed] == 0)
    }

    @Test(
        "TRACE 14: a push-to-start that does not decode → decodeFailed; it creates nothing and counts only in the totals"
    )
    func trace14DecodeFailed() throws {
        var t = Trace()
        t.startToken(0, "5501")
        let payloads = [
            startPayload(1, ["attributes-type": "Nope"]), startPayload(1, drop: "attributes-type"),
            startPayload(1, ["attributes-type": 5]), startPayload(1, ["attributes": "x"]),
            startPayload(1, drop: "attributes"), startPayload(1, drop: "content-state"),
            startPayload(1, ["content-state": null]), startPayload(1, ["content-state": ["home": 1]]),
            startPayload(1, drop: "alert"), startPayload(1, ["alert": "Go"]),
            startPayload(1, ["stale-date": Raw("1.5")]), startPayload(1, ["relevance-score": "high"]),
            startPayload(1, ["input-push-channel": 5]),
        ]
        for (k, p) in payloads.enumerated() { t.start(1000 * (k + 1), "5501", "s\(k)", p) }
        let r = try t.run()
        #expect(r.acc[Outcome.decodeFailed] == payloads.count && r.acc.deliveries == payloads.count)
        #expect(r.store.activityCount == 0)
        #expect(r.dump.first?.hasPrefix(#"{"device": "d1""#) == true)
    }

    @Test(
        "TRACE 14: a start creates newActivity on the start token's device for its app, token newToken, timestamp aps.timestamp"
    )
    func trace14Success() throws {
        var t = Trace()
        t.startToken(0, "5502", device: "d7", app: NEWS)
        let more: [String: Any] = [
            "content-state": ["home": 2, "away": 1], "stale-date": E + 100, "relevance-score": 7.5,
        ]
        t.start(5000, "5502", "s1", startPayload(3, more), topic: NEWS + ".push-type.liveactivity")
        let r1 = try t.run()
        #expect(
            r1.line("s1") == #"{"activity": "s1", "device": "d7", "app": "com.example.news", "state": "active", "#
                + #""timestamp": 1700000003, "content": {"home": 2, "away": 1}, "staleDate": 1700000100, "relevance": 7.5, "#
                + #""outcomes": {"applied": 1}}"#)
        t.push(6000, .token(tok("s1")), update(3), topic: NEWS + ".push-type.liveactivity")
        t.push(7000, .token(tok("s1")), update(4), topic: NEWS + ".push-type.liveactivity")
        let r2 = try t.run()
        #expect(r2.outcome(.ignoredStaleTimestamp, "s1") == 1 && r2.outcome(.applied, "s1") == 2)
    }

    @Test("TRACE 15: request relevance null → 0")
    func trace15RelevanceNull() throws {
        var t = Trace()
        t.request(0, "a1", relevance: null)
        let r = try t.run()
        #expect(r.relevance("a1") == 0 && r.line("a1")?.contains(#""relevance": 0.0, "#) == true)
    }

    @Test("TRACE 15: a refused request creates nothing — no activity, token or channel")
    func trace15RefusedCreatesNothing() throws {
        var t = Trace(limits: #"{"perApp":1,"perDevice":10}"#)
        t.request(0, "a1")
        t.request(0, "a2", channel: "c2")
        t.send(1000, "a2", update(1))
        t.broadcast(1000, "c2", update(1))
        t.send(2000, "a1", end(2))
        t.request(3000, "a2")  // same id and token again: not "already exists"
        let r = try t.run()
        #expect(r.acc[UnroutableReason.unregistered] == 1 && r.acc[UnroutableReason.channelNotRegistered] == 1)
        #expect(r.id("a2") != nil && r.acc.requests == 3 && r.acc.requestsLimitExceeded == 1)
    }

    @Test(
        "TRACE 15: totals.requests counts request lines, totals.limitExceeded refused requests; refused starts are outcomes"
    )
    func trace15Totals() throws {
        var t = Trace(limits: #"{"perApp":1,"perDevice":10}"#)
        t.startToken(0, "5501")
        t.request(0, "a1")
        t.request(0, "a2")
        t.start(1000, "5501", "s1", startPayload(1))
        let totals = try t.run().totals
        #expect(int(totals["requests"]) == 2 && int(totals["limitExceeded"]) == 1)
        #expect(int((totals["outcomes"] as? [String: Any])?["limitExceeded"]) == 1 && int(totals["deliveries"]) == 1)
    }

    @Test("TRACE 15: attribute size is not checked in a replay")
    func trace15AttributeSize() throws {
        var t = Trace()
        var f = Trace.requestFields("a1")
        f["attributes"] = ["big": String(repeating: "x", count: 5000)]
        t.op(0, "request", f)
        #expect(try t.run().state(of: "a1") == .active)
    }

    @Test("TRACE 16: rotate, subscribe and dismiss of an activity that does not exist do nothing")
    func trace16Unknown() throws {
        var base = Trace()
        base.request(0, "a1")
        var t = base
        t.rotate(0, "ghost", "beef")
        t.subscribe(0, "ghost", "gch")
        t.dismiss(0, "ghost")
        func more(_ x: Trace) -> Trace {
            var y = x
            y.request(0, "a2", token: "beef")  // "beef" was never taken by the ghost
            y.broadcast(1000, "gch", update(1))
            y.send(2000, "a1", update(2))
            return y
        }
        let (rb, ru) = (try more(base).run(), try more(t).run())
        #expect(ru.id("ghost") == nil && ru.id("a2") != nil)
        #expect(ru.acc[UnroutableReason.channelNotRegistered] == 1)
        #expect(ru.dump == rb.dump)
    }

    @Test("TRACE 16: rotate, subscribe and dismiss act on activities in any state")
    func trace16AnyState() throws {
        var t = Trace()
        t.request(0, "a1")
        t.request(0, "a2")
        t.send(1000, "a1", end(1))
        t.send(1000, "a2", end(1))
        t.rotate(2000, "a1", "beef")
        t.dismiss(2000, "a2")
        t.subscribe(3000, "a2", "ch")
        t.push(4000, .token("beef"), update(4))
        t.send(4000, "a1", update(4))
        t.broadcast(5000, "ch", update(5))
        let r = try t.run()
        #expect(r.outcome(.ignoredEnded, "a1") == 1 && r.acc[UnroutableReason.unregistered] == 1)
        #expect(r.state(of: "a2") == .dismissed && r.outcome(.ignoredEnded, "a2") == 1)
    }

    // Dump

    @Test(
        "TRACE 17: dump lines — keys in order, relevance a float, content ints as integers and doubles as floats, zero counts left out"
    )
    func trace17Format() throws {
        var t = Trace()
        t.request(0, "a1")
        t.request(0, "a2", relevance: 3)
        t.send(
            1000, "a1",
            update(
                123, ["home": 2, "away": 1, "clock": "05:12", "prob": 0.61, "final": false],
                ["stale-date": E + 900, "relevance-score": 50]))
        t.send(2000, "a1", update(100))
        let d = try t.run().dump
        #expect(
            d == [
                #"{"activity": "a1", "device": "d1", "app": "com.example.scores", "state": "active", "timestamp": 1700000123, "#
                    + #""content": {"home": 2, "away": 1, "clock": "05:12", "prob": 0.61, "final": false}, "staleDate": 1700000900, "#
                    + #""relevance": 50.0, "outcomes": {"applied": 1, "ignoredStaleTimestamp": 1}}"#,
                #"{"activity": "a2", "device": "d1", "app": "com.example.scores", "state": "active", "timestamp": null, "#
                    + #""content": {"home": 0, "away": 0}, "staleDate": null, "relevance": 3.0, "outcomes": {}}"#,
                #"{"device": "d1", "lockScreen": ["a1", "a2"], "island": ["a1", "a2"]}"#,
                #"{"totals": {"pushes": 2, "rejected": {}, "unroutable": {}, "routed": 2, "deliveries": 2, "#
                    + #""outcomes": {"applied": 1, "ignoredStaleTimestamp": 1}, "requests": 2, "limitExceeded": 0}}"#,
            ])
    }

    @Test("TRACE 17: a device line for every device named by a request (refused ones too) or a startToken line")
    func trace17Devices() throws {
        var t = Trace(limits: #"{"perApp":0,"perDevice":10}"#)
        t.request(0, "a1", device: "d2")
        t.startToken(0, "5501", device: "d3")
        t.push(0, .token("abcd"), update(0))
        let d = try t.run().dump
        #expect(d.count == 3)
        #expect(d[0] == #"{"device": "d2", "lockScreen": [], "island": []}"#)
        #expect(d[1] == #"{"device": "d3", "lockScreen": [], "island": []}"#)
    }

    @Test("TRACE 17: lines sorted by Unicode code point; strings in UTF-8 with escapes only where JSON requires them")
    func trace17SortingAndEscapes() throws {
        var t = Trace()
        for (a, d) in [("😀", "d😀"), ("～", "d～"), ("é", "dé"), ("z", "dz"), ("Z", "dZ")] { t.request(0, a, device: d) }
        t.request(0, "a1", state: ["home": 0, "away": 0, "clock": "é/\"\\😀\u{7F}\u{2028}"])
        let d = try t.run().dump
        let ids = d.compactMap { l in
            ["activity", "device"].lazy.compactMap { k -> String? in
                guard let o = try? JSONSerialization.jsonObject(with: Data(l.utf8)) as? [String: Any] else {
                    return nil
                }
                return o[k] as? String
            }.first
        }
        #expect(ids == ["Z", "a1", "z", "é", "～", "😀", "d1", "dZ", "dz", "dé", "d～", "d😀"])
        #expect(d[1].contains(#""clock": "é/\"\\😀"# + "\u{7F}\u{2028}\""))
    }
}
