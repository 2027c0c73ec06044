import FanoutCore
import FanoutTrace
import Foundation
import Testing

// TRACE.md "Unreadable traces": each kind of line that stops the replay, with the line number.
// Helpers are in RuleTests.swift.

/// A trace with a request of a1 (line 2) and `body` appended; returns it and the number of the last
/// line `body` appended.
func trace(_ body: (inout Trace) -> Void) -> (text: String, line: Int) {
    var t = Trace()
    t.request(0, "a1")
    body(&t)
    let line = t.lines.count
    t.advance(999_999)  // a valid line after the bad one: the replay must stop before it
    return (t.text, line)
}

/// The line at which byte-level lines stop the replay, or nil.
func errorLine(bytes lines: [[UInt8]]) -> Int? {
    let replay = TraceReplay()
    do {
        for line in lines { try line.withUnsafeBytes { try replay.apply(line: $0) } }
        try replay.finish()
        return nil
    } catch let error as TraceError {
        return error.line
    } catch {
        return -1
    }
}

extension RuleTests {
    @Test("Unreadable: invalid UTF-8 stops the replay at its line")
    func unreadableUTF8() {
        let header = Array(Trace().lines[0].utf8)
        let good = Array(#"{"at":0,"op":"advance"}"#.utf8)
        #expect(errorLine(bytes: [header, good, [0x7B, 0xFF, 0x7D]]) == 3)
        let inString = Array(#"{"at":0,"op":"dismiss","activity":"a"#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(errorLine(bytes: [header, inString, good]) == 2)
        let overlong = Array(#"{"at":0,"op":"dismiss","activity":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8)
        #expect(errorLine(bytes: [header, good, overlong]) == 3)
    }

    @Test("Unreadable: invalid JSON stops the replay at its line")
    func unreadableJSON() {
        for bad in [
            #"{"at":0,"op":"advance""#, #"{"at":0,"op":"advance"} x"#, #"{"at":0,"op":'advance'}"#,
            #"{"at":0,"op":"advance",}"#, #"{"at":NaN,"op":"advance"}"#,
        ] {
            let (text, line) = trace { $0.lines.append(bad) }
            #expect(errorLine(text) == line, "\(bad)")
        }
        #expect(errorLine("{\"trace\":1,") == 1)
    }

    @Test("Unreadable: a line that is not a JSON object")
    func unreadableNotObject() {
        for bad in ["[]", "null", #""advance""#, "42"] {
            let (text, line) = trace { $0.lines.append(bad) }
            #expect(errorLine(text) == line, "\(bad)")
        }
    }

    @Test("Unreadable: a bad header — trace not 1, bad schemas, an unknown type")
    func unreadableHeader() {
        let headers = [
            #"{"trace":2,"epoch":1700000000,"schemas":{}}"#, #"{"trace":"1","epoch":1700000000,"schemas":{}}"#,
            #"{"epoch":1700000000,"schemas":{}}"#, #"{"trace":1,"epoch":1700000000,"schemas":[]}"#,
            #"{"trace":1,"epoch":1700000000,"schemas":{"S":{"x":"float"}}}"#,
            #"{"trace":1,"epoch":1700000000,"schemas":{"S":{"x":"int??"}}}"#,
            #"{"trace":1,"epoch":1700000000,"schemas":{"S":{"x":1}}}"#,
            #"{"trace":1,"epoch":1700000000,"schemas":{"S":[]}}"#,
            #"[1]"#, #"{"at":0,"op":"advance"}"#,
        ]
        for h in headers { #expect(errorLine(h + "\n" + #"{"at":0,"op":"advance"}"#) == 1, "\(h)") }
        #expect(errorLine(Trace().lines[0]) == nil)
    }

    @Test("Unreadable: an unknown op")
    func unreadableUnknownOp() {
        for op in ["launch", "Advance", "", "push "] {
            let (text, line) = trace { $0.op(0, op) }
            #expect(errorLine(text) == line, "\(op)")
        }
    }

    @Test("Unreadable: a missing field (request, push, startToken, rotate, at, op)")
    func unreadableMissingField() {
        var cases: [(String, [String: Any])] = []
        for key in [
            "device", "app", "activity", "type", "attributes", "state", "staleDate", "relevance", "token", "channel",
        ] {
            var f = Trace.requestFields("a2")
            f[key] = nil
            cases.append(("request", f))
        }
        for key in ["pushType", "topic", "priority", "expiration", "payload"] {
            var f = Trace.pushFields(.token(tok("a1")), update(1))
            f[key] = nil
            cases.append(("push", f))
        }
        cases += [
            ("startToken", ["device": "d1", "app": APP]), ("rotate", ["activity": "a1"]),
            ("subscribe", ["channel": "c"]), ("dismiss", [:]),
        ]
        for (op, fields) in cases {
            let (text, line) = trace { $0.op(0, op, fields) }
            #expect(errorLine(text) == line, "\(op) \(fields.keys.sorted())")
        }
        let (noAt, l1) = trace { $0.lines.append(#"{"op":"advance"}"#) }
        let (noOp, l2) = trace { $0.lines.append(#"{"at":0}"#) }
        #expect(errorLine(noAt) == l1 && errorLine(noOp) == l2)
    }

    @Test("Unreadable: a field of the wrong JSON type")
    func unreadableWrongType() {
        var cases: [(String, [String: Any])] = []
        for (key, value) in [
            ("device", 5), ("app", null), ("activity", 1), ("type", true), ("attributes", "x"),
            ("state", [1]), ("staleDate", "soon"), ("relevance", "high"), ("token", 12),
            ("channel", 5),
        ] as [(String, Any)] {
            var f = Trace.requestFields("a2")
            f[key] = value
            cases.append(("request", f))
        }
        var push = Trace.pushFields(.token(tok("a1")), update(1))
        push["payload"] = ["aps": [:] as [String: Any]]
        cases.append(("push", push))
        cases += [
            ("rotate", ["activity": "a1", "token": 5]), ("dismiss", ["activity": null]),
            ("subscribe", ["activity": "a1", "channel": ["c"]]),
            ("startToken", ["device": "d1", "app": 1, "token": "55"]),
        ]
        for (op, fields) in cases {
            let (text, line) = trace { $0.op(0, op, fields) }
            #expect(errorLine(text) == line, "\(op) \(fields)")
        }
    }

    @Test("Unreadable (not): push header values of any JSON type are judged by validation instead")
    func headerValuesValidated() throws {
        var t = Trace()
        t.request(0, "a1")
        t.push(1000, .token(tok("a1")), update(1), pushType: 5)
        t.push(2000, .token(tok("a1")), update(2), topic: ["x"])
        t.push(3000, .token(tok("a1")), update(3), priority: "10")
        t.push(4000, .token(tok("a1")), update(4), expiration: ["e": 0])
        t.push(5000, .token(tok("a1")), update(5), collapseId: 5)
        t.push(6000, .token(tok("a1")), update(6), apnsId: false)
        let r = try t.run()
        #expect(r.acc.pushes == 6 && r.acc.rejectedTotal == 6)
        for reason: RejectReason in [
            .invalidPushType, .topicDisallowed, .badPriority, .badExpirationDate,
            .badCollapseId, .badMessageId,
        ] {
            #expect(r.acc[reason] == 1, "\(reason.name)")
        }
    }

    @Test("Unreadable: collapseId and apnsId must be present, though they may be null")
    func unreadableCollapseApnsPresent() throws {
        for key in ["collapseId", "apnsId"] {
            var f = Trace.pushFields(.token(tok("a1")), update(1))
            f[key] = nil
            let (text, line) = trace { $0.op(1000, "push", f) }
            #expect(errorLine(text) == line, "\(key)")
        }
        let (ok, _) = trace { $0.push(1000, .token(tok("a1")), update(1), collapseId: null, apnsId: null) }
        #expect(try TraceReplay.replay(text: ok).acc[Outcome.applied] == 1)
    }

    @Test("Unreadable: at negative, non-integral, not a number, or smaller than the line before (equal is fine)")
    func unreadableAt() {
        for bad in [
            #"{"at":-1,"op":"advance"}"#, #"{"at":1.5,"op":"advance"}"#, #"{"at":"5","op":"advance"}"#,
            #"{"at":null,"op":"advance"}"#,
        ] {
            let (text, line) = trace { $0.lines.append(bad) }
            #expect(errorLine(text) == line, "\(bad)")
        }
        let (back, line) = trace {
            $0.advance(5000)
            $0.advance(4999)
        }
        #expect(errorLine(back) == line)
        #expect(
            errorLine(
                trace {
                    $0.advance(5000)
                    $0.advance(5000)
                }.text) == nil)
    }

    @Test("Unreadable: a push without exactly one target (none, two, three)")
    func unreadableTargets() {
        var none = Trace.pushFields(.token(tok("a1")), update(1))
        none["token"] = nil
        var two = Trace.pushFields(.token(tok("a1")), update(1))
        two["channel"] = "ch"
        var three = two
        three["startToken"] = "5501"
        for f in [none, two, three] {
            let (text, line) = trace { $0.op(1000, "push", f) }
            #expect(errorLine(text) == line)
        }
    }

    @Test("Unreadable: an activity id that already exists (request, push-to-start newActivity)")
    func unreadableDuplicateActivity() {
        let (req, l1) = trace { $0.request(0, "a1", token: "beef") }
        #expect(errorLine(req) == l1)
        let (start, l2) = trace {
            $0.startToken(0, "5501")
            $0.push(1000, .start("5501"), startPayload(1), newActivity: "a1")
        }
        #expect(errorLine(start) == l2)
        var f = Trace.pushFields(.start("5501"), startPayload(1), newActivity: "s1")
        f["newActivity"] = nil
        let (missing, l3) = trace {
            $0.startToken(0, "5501")
            $0.op(1000, "push", f)
        }
        #expect(errorLine(missing) == l3)
    }

    @Test("Unreadable: an update token that already exists (request, rotate, push-to-start newToken)")
    func unreadableDuplicateToken() {
        let (req, l1) = trace { $0.request(0, "a2", token: tok("a1")) }
        let (rot, l2) = trace {
            $0.request(0, "a2")
            $0.rotate(0, "a2", tok("a1"))
        }
        var f = Trace.pushFields(.start("5501"), startPayload(1), newActivity: "s1")
        f["newToken"] = tok("a1")
        let (start, l3) = trace {
            $0.startToken(0, "5501")
            $0.op(1000, "push", f)
        }
        #expect(errorLine(req) == l1 && errorLine(rot) == l2 && errorLine(start) == l3)
        #expect(errorLine(trace { $0.rotate(0, "a1", tok("a1")) }.text) == nil)  // its own token: no change
    }

    @Test("Unreadable: a start token held by another (device, app)")
    func unreadableStartTokenHeld() {
        let (device, l1) = trace {
            $0.startToken(0, "5501")
            $0.startToken(0, "5501", device: "d2")
        }
        let (app, l2) = trace {
            $0.startToken(0, "5501")
            $0.startToken(0, "5501", app: NEWS)
        }
        #expect(errorLine(device) == l1 && errorLine(app) == l2)
        #expect(
            errorLine(
                trace {
                    $0.startToken(0, "5501")
                    $0.startToken(0, "5501")
                }.text) == nil)
    }

    @Test("Unreadable: request type must name a schema and state must decode (TRACE 15)")
    func unreadableRequestTypeState() {
        var unknown = Trace.requestFields("a2")
        unknown["type"] = "Nope"
        let (t1, l1) = trace { $0.op(0, "request", unknown) }
        let (t2, l2) = trace { $0.request(0, "a2", state: ["home": 1]) }
        let (t3, l3) = trace { $0.request(0, "a2", state: ["home": 1.5, "away": 0]) }
        #expect(errorLine(t1) == l1 && errorLine(t2) == l2 && errorLine(t3) == l3)
    }

    @Test("Unreadable: blank lines are ignored only at the end of the file")
    func unreadableBlankLines() throws {
        var t = Trace()
        t.request(0, "a1")
        #expect(try TraceReplay.replay(text: t.text + "\n\n  \n\n").id("a1") != nil)
        let middle = t.lines[0] + "\n\n" + t.lines[1]
        #expect(errorLine(middle) == 2)
        #expect(errorLine("") == 1)
    }

    @Test("Unreadable: the error names the line number and nothing of the line is half-applied")
    func unreadableNothingHalfApplied() throws {
        let replay = TraceReplay()
        var t = Trace()
        t.request(0, "a1")
        t.startToken(0, "5501")
        var bad = Trace.requestFields("a2", device: "d9", channel: "c9")
        bad["token"] = tok("a1")
        t.op(1000, "request", bad)  // line 4: duplicate token, checked after every other field
        var push = Trace.pushFields(.start("5501"), startPayload(1), newActivity: "s1")
        push["newToken"] = tok("a1")
        t.op(2000, "push", push)  // line 5
        for (k, line) in t.lines.enumerated() {
            do {
                try Array(line.utf8).withUnsafeBytes { try replay.apply(line: $0) }
                #expect(k < 3, "line \(k + 1) should not apply")
            } catch let error as TraceError {
                #expect(error.line == k + 1)
            }
        }
        let p = replay.pipeline!
        #expect(p.store.activityIds.lookup("a2") == nil && p.store.deviceIds.lookup("d9") == nil)
        #expect(p.store.deviceCount == 1 && p.router.channels.count == 0)
        #expect(p.router.channels.lookup("c9") == nil && p.store.activityIds.lookup("s1") == nil)
        #expect(p.accounting.requests == 1 && p.accounting.pushes == 0)
        #expect(replay.nowMillis == Int64(E) * 1000)
    }
}
