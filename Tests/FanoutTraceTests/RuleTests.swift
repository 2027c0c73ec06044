import FanoutCore
import FanoutTrace
import Foundation
import Testing

// One named test per rule of docs/DOMAIN.md and docs/TRACE.md. Each test replays a small trace built
// below and asserts the specific outcome the rule requires. DOMAIN rules are in this file; TRACE's
// "Exact rules" and the unreadable-line kinds are in RuleTests+Validation.swift.


// MARK: - DOMAIN.md

@Suite("Spec rules")
struct RuleTests {
    // §1 Entities

    @Test("DOMAIN §1: an app's Live Activity topic is <bundle>.push-type.liveactivity")
    func topicOfApp() throws {
        var t = Trace()
        t.request(0, "a1")
        t.send(1000, "a1", update(1))
        t.push(2000, .token(tok("a1")), update(2), topic: APP)
        t.push(3000, .token(tok("a1")), update(3), topic: APP + ".push-type.alert")
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == 1)
        #expect(r.acc[RejectReason.topicDisallowed] == 2)
    }

    @Test("DOMAIN §1: default limit is 5 concurrent activities per app")
    func defaultPerAppLimit() throws {
        var t = Trace()
        for k in 1...6 { t.request(0, "a\(k)") }
        t.request(0, "n1", app: NEWS)
        let r = try t.run()
        #expect(r.id("a5") != nil)
        #expect(r.id("a6") == nil)
        #expect(r.id("n1") != nil)
        #expect(r.acc.requestsLimitExceeded == 1)
    }

    @Test("DOMAIN §1: default limit is 10 concurrent activities per device")
    func defaultPerDeviceLimit() throws {
        var t = Trace()
        for k in 1...11 { t.request(0, "a\(k)", app: "com.example.app\(k)") }
        t.request(0, "b1", device: "d2")
        let r = try t.run()
        #expect(r.id("a10") != nil)
        #expect(r.id("a11") == nil)
        #expect(r.id("b1") != nil)
        #expect(r.acc.requestsLimitExceeded == 1)
    }

    @Test("DOMAIN §1: the limits are scenario parameters (header limits perApp / perDevice)")
    func headerLimits() throws {
        var t = Trace(limits: #"{"perApp":1,"perDevice":2}"#)
        t.request(0, "a1")
        t.request(0, "a2")  // per app
        t.request(0, "n1", app: NEWS)
        t.request(0, "m1", app: "com.example.maps")  // per device
        let r = try t.run()
        #expect(r.id("a1") != nil && r.id("n1") != nil)
        #expect(r.id("a2") == nil && r.id("m1") == nil)
        #expect(r.acc.requestsLimitExceeded == 2)
    }

    // §2 The push: sizes and headers

    @Test("DOMAIN §2: a token push payload may be 4096 bytes, not 4097 (counted in UTF-8 bytes)")
    func tokenPayloadSize() throws {
        var t = Trace()
        t.request(0, "a1")
        t.send(1000, "a1", padded(update(1), to: 4096))
        t.send(2000, "a1", padded(update(2), to: 4097))
        t.send(3000, "a1", padded(update(3), to: 4097, unit: "é"))  // ~2050 characters, 4097 bytes
        t.send(4000, "a1", padded(update(4), to: 5000))
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == 1)
        #expect(r.timestamp("a1") == Int64(E + 1))
        #expect(r.acc[RejectReason.payloadTooLarge] == 3)
    }

    @Test("DOMAIN §2: a broadcast payload may be 5120 bytes, not 5121")
    func broadcastPayloadSize() throws {
        var t = Trace()
        t.request(0, "a1", channel: "ch")
        t.broadcast(1000, "ch", padded(update(1), to: 5120))
        t.broadcast(2000, "ch", padded(update(2), to: 5121))
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == 1)
        #expect(r.acc[RejectReason.payloadTooLarge] == 1)
    }

    @Test(
        "DOMAIN §2: valid headers pass — priority 5/10 (broadcast 1), apns-id UUID, collapse-id ≤ 64 bytes, expiration")
    func validHeadersAccepted() throws {
        var t = Trace()
        t.request(0, "a1", channel: "ch")
        let a1 = Target.token(tok("a1"))
        t.push(1000, a1, update(1), priority: 5)
        t.push(2000, a1, update(2), priority: 10)
        t.push(3000, a1, update(3), collapseId: String(repeating: "c", count: 64))
        t.push(4000, a1, update(4), collapseId: "")
        t.push(5000, a1, update(5), apnsId: "123e4567-e89b-12d3-a456-426614174000")
        t.push(6000, a1, update(6), apnsId: "123E4567-E89B-12D3-A456-426614174000")
        t.push(7000, a1, update(7), expiration: E + 3600)
        t.broadcast(8000, "ch", update(8), priority: 1)
        let r = try t.run()
        #expect(r.acc.rejectedTotal == 0)
        #expect(r.outcome(.applied, "a1") == 8)
    }

    // §3.2 validate: each reject reason

    @Test("DOMAIN §3.2: payload over the limit → 413 PayloadTooLarge, reaching no device")
    func rejectPayloadTooLarge() throws {
        var t = Trace()
        t.request(0, "a1")
        t.send(1000, "a1", padded(update(1, ["home": 9, "away": 9]), to: 4097))
        let r = try t.run()
        #expect(r.acc[RejectReason.payloadTooLarge] == 1)
        #expect(RejectReason.payloadTooLarge.status == 413 && RejectReason.payloadTooLarge.name == "PayloadTooLarge")
        #expect(r.content("a1") == #"{"home": 0, "away": 0}"#)
        #expect(r.acc.routed == 0 && r.acc.deliveries == 0)
    }

    @Test("DOMAIN §3.2: empty payload → 400 PayloadEmpty")
    func rejectPayloadEmpty() throws {
        var t = Trace()
        t.request(0, "a1")
        t.send(1000, "a1", "")
        let r = try t.run()
        #expect(r.acc[RejectReason.payloadEmpty] == 1)
        #expect(RejectReason.payloadEmpty.status == 400)
    }

    @Test("DOMAIN §3.2: wrong push type → 400 InvalidPushType")
    func rejectInvalidPushType() throws {
        var t = Trace()
        t.request(0, "a1")
        let types: [Any] = ["alert", "LiveActivity", "liveactivity ", null, 5]
        for (k, type) in types.enumerated() {
            t.push(1000 * (k + 1), .token(tok("a1")), update(k + 1), pushType: type)
        }
        let r = try t.run()
        #expect(r.acc[RejectReason.invalidPushType] == 5)
        #expect(r.outcome(.applied, "a1") == 0)
    }

    @Test("DOMAIN §3.2: topic without the .push-type.liveactivity suffix → 400 TopicDisallowed")
    func rejectTopicDisallowed() throws {
        var t = Trace()
        t.request(0, "a1")
        let topics: [Any] = [APP, APP + ".push-type.liveactivityx", "push-type.liveactivity", null, 7]
        for (k, topic) in topics.enumerated() { t.push(1000 * (k + 1), .token(tok("a1")), update(k + 1), topic: topic) }
        let r = try t.run()
        #expect(r.acc[RejectReason.topicDisallowed] == 5)
    }

    @Test("DOMAIN §3.2: topic for another app → 400 BadTopic")
    func rejectBadTopic() throws {
        var t = Trace()
        t.request(0, "a1")
        t.push(1000, .token(tok("a1")), update(1), topic: NEWS + ".push-type.liveactivity")
        t.push(2000, .token(tok("a1")), update(2), topic: "com.example.score.push-type.liveactivity")
        let r = try t.run()
        #expect(r.acc[RejectReason.badTopic] == 2)
        #expect(r.outcome(.applied, "a1") == 0)
    }

    @Test("DOMAIN §3.2: priority not allowed → 400 BadPriority")
    func rejectBadPriority() throws {
        var t = Trace()
        t.request(0, "a1")
        let priorities: [Any] = [1, 7, 0, "10", null, Raw("10.5"), true]
        for (k, p) in priorities.enumerated() { t.push(1000 * (k + 1), .token(tok("a1")), update(k + 1), priority: p) }
        let r = try t.run()
        #expect(r.acc[RejectReason.badPriority] == priorities.count)
    }

    @Test("DOMAIN §3.2: collapse id over 64 bytes → 400 BadCollapseId")
    func rejectBadCollapseId() throws {
        var t = Trace()
        t.request(0, "a1")
        let ids: [Any] = [String(repeating: "c", count: 65), String(repeating: "é", count: 33), 5]
        for (k, c) in ids.enumerated() { t.push(1000 * (k + 1), .token(tok("a1")), update(k + 1), collapseId: c) }
        let r = try t.run()
        #expect(r.acc[RejectReason.badCollapseId] == 3)
    }

    @Test("DOMAIN §3.2: malformed apns-id → 400 BadMessageId")
    func rejectBadMessageId() throws {
        var t = Trace()
        t.request(0, "a1")
        let ids: [Any] = [
            "123e4567e89b12d3a456426614174000", "{123e4567-e89b-12d3-a456-426614174000}",
            "123e4567-e89b-12d3-a456-42661417400", "123e4567-e89b-12d3-a456-42661417400g",
            "123e4567-e89b-12d3-a4564-26614174000", "", 5,
        ]
        for (k, id) in ids.enumerated() { t.push(1000 * (k + 1), .token(tok("a1")), update(k + 1), apnsId: id) }
        let r = try t.run()
        #expect(r.acc[RejectReason.badMessageId] == ids.count)
    }

    @Test("DOMAIN §3.2: negative expiration, or non-zero on a channel storing no messages → 400 BadExpirationDate")
    func rejectBadExpirationDate() throws {
        var t = Trace()
        t.request(0, "a1", channel: "ch")
        t.push(1000, .token(tok("a1")), update(1), expiration: -1)
        t.push(2000, .channel("ch"), update(2), expiration: E + 60)
        t.push(3000, .channel("ch"), update(3), expiration: 1)
        let r = try t.run()
        #expect(r.acc[RejectReason.badExpirationDate] == 3)
        #expect(r.outcome(.applied, "a1") == 0)
    }

    @Test("DOMAIN §3.2: missing or malformed aps, event or timestamp → 400 BadRequestPayload")
    func rejectBadRequestPayload() throws {
        var t = Trace()
        t.request(0, "a1")
        let payloads = [
            #"{"foo":{}}"#, #"{"aps":{"timestamp":1700000001,"content-state":{"home":1,"away":0}}}"#,
            #"{"aps":{"event":"update","content-state":{"home":1,"away":0}}}"#, "{\"aps\":", "null",
        ]
        for (k, p) in payloads.enumerated() { t.send(1000 * (k + 1), "a1", p) }
        let r = try t.run()
        #expect(r.acc[RejectReason.badRequestPayload] == payloads.count)
        #expect(r.acc.routed == 0)
    }

    // §3.3 route: each verdict

    @Test("DOMAIN §3.3: an issued token routes to its activity — one delivery")
    func routeToken() throws {
        var t = Trace()
        t.request(0, "a1")
        t.request(0, "a2")
        t.send(1000, "a1", update(1, ["home": 3, "away": 1]))
        let r = try t.run()
        #expect(r.acc.routed == 1 && r.acc.deliveries == 1)
        #expect(r.content("a1") == #"{"home": 3, "away": 1}"#)
        #expect(r.content("a2") == #"{"home": 0, "away": 0}"#)
    }

    @Test("DOMAIN §3.3: a channel routes to every activity subscribed to it")
    func routeChannel() throws {
        var t = Trace()
        t.request(0, "a1", channel: "ch")
        t.request(0, "b1", device: "d2", channel: "ch")
        t.request(0, "a2")
        t.subscribe(0, "a2", "ch")
        t.request(0, "a3")
        t.broadcast(1000, "ch", update(1))
        let r = try t.run()
        #expect(r.acc.routed == 1 && r.acc.deliveries == 3)
        #expect(r.outcome(.applied, "a1") == 1 && r.outcome(.applied, "b1") == 1 && r.outcome(.applied, "a2") == 1)
        #expect(r.outcome(.applied, "a3") == 0)
    }

    @Test("DOMAIN §3.3: a token never issued → 410 Unregistered")
    func routeNeverIssued() throws {
        var t = Trace()
        t.request(0, "a1")
        t.push(1000, .token("abcdef0123"), update(1))
        let r = try t.run()
        #expect(r.acc[UnroutableReason.unregistered] == 1)
        #expect(UnroutableReason.unregistered.status == 410)
        #expect(r.acc.routed == 0)
    }

    @Test("DOMAIN §3.3: a token rotated away → Unregistered; the new one routes")
    func routeRotatedAway() throws {
        var t = Trace()
        t.request(0, "a1")
        t.rotate(500, "a1", "beef")
        t.send(1000, "a1", update(1))
        t.push(2000, .token("beef"), update(2))
        let r = try t.run()
        #expect(r.acc[UnroutableReason.unregistered] == 1)
        #expect(r.outcome(.applied, "a1") == 1 && r.timestamp("a1") == Int64(E + 2))
    }

    @Test("DOMAIN §3.3: rotations to tokens of the same length: every old one → Unregistered; none is kept")
    func routeRotatedAwaySameLength() throws {
        var t = Trace()
        t.request(0, "a1", token: "aa11")
        t.rotate(100, "a1", "bb22")
        t.rotate(200, "a1", "cc33")
        t.push(1000, .token("aa11"), update(1))
        t.push(1001, .token("bb22"), update(2))
        t.push(1002, .token("cc33"), update(3))
        t.rotate(1100, "a1", "aa11")  // a forgotten token may be issued again
        t.push(1200, .token("cc33"), update(4))
        t.push(1201, .token("aa11"), update(5))
        let r = try t.run()
        #expect(r.acc[UnroutableReason.unregistered] == 3)
        #expect(r.outcome(.applied, "a1") == 2 && r.timestamp("a1") == Int64(E + 5))
        #expect(r.pipeline!.router.updateTokens.count == 1, "rotated-away tokens are forgotten")
    }

    @Test("DOMAIN §3.3: a token never well-formed → 400 BadDeviceToken; long hex tokens are fine")
    func routeBadDeviceToken() throws {
        let long = String(repeating: "ab", count: 100)  // 100 bytes, longer than 32
        var t = Trace()
        t.request(0, "a1", token: long)
        for (k, bad) in ["xyz1", "abc", "", "ab cd", "0x12"].enumerated() {
            t.push(1000 * (k + 1), .token(bad), update(k + 1))
        }
        t.push(9000, .token(long), update(9))
        let r = try t.run()
        #expect(r.acc[UnroutableReason.badDeviceToken] == 5)
        #expect(UnroutableReason.badDeviceToken.status == 400)
        #expect(r.outcome(.applied, "a1") == 1)
    }

    @Test("DOMAIN §3.3: an unknown channel → 400 ChannelNotRegistered")
    func routeChannelNotRegistered() throws {
        var t = Trace()
        t.request(0, "a1", channel: "ch")
        t.broadcast(1000, "other", update(1))
        t.broadcast(2000, "CH", update(2))
        let r = try t.run()
        #expect(r.acc[UnroutableReason.channelNotRegistered] == 2)
        #expect(r.outcome(.applied, "a1") == 0)
    }

    @Test("DOMAIN §3.3 / TRACE: replay delivers at once — a passed apns-expiration never gives expired")
    func replayNeverExpires() throws {
        var t = Trace()
        t.request(0, "a1")
        t.push(HOUR, .token(tok("a1")), update(3600), expiration: 1)
        t.push(HOUR + 1, .token(tok("a1")), update(3601), expiration: E)
        let r = try t.run()
        #expect(r.acc[Outcome.expired] == 0)
        #expect(r.outcome(.applied, "a1") == 2)
    }

    @Test("DOMAIN §3.3 / TRACE: replay never coalesces — updates at one instant each get their own outcome")
    func replayNeverCoalesces() throws {
        var t = Trace()
        t.request(0, "a1")
        t.send(1000, "a1", update(1))
        t.send(1000, "a1", update(2, ["home": 2, "away": 0]))
        let r = try t.run()
        #expect(r.acc[Outcome.coalesced] == 0)
        #expect(r.outcome(.applied, "a1") == 2)
        #expect(r.content("a1") == #"{"home": 2, "away": 0}"#)
    }

    // §3.4 apply

    @Test("DOMAIN §3.4: a start to the app's push-to-start token creates the activity")
    func applyStartCreates() throws {
        var t = Trace()
        t.startToken(0, "5501")
        t.start(1000, "5501", "s1", startPayload(1))
        let r = try t.run()
        #expect(r.state(of: "s1") == .active)
        #expect(r.outcome(.applied, "s1") == 1)
        #expect(r.lock("d1") == ["s1"])
    }

    @Test("DOMAIN §3.4: a start fails with limitExceeded when a per-app or per-device limit is reached")
    func applyStartLimit() throws {
        var t = Trace(limits: #"{"perApp":1,"perDevice":2}"#)
        t.startToken(0, "5501")
        t.startToken(0, "5502", app: NEWS)
        t.startToken(0, "5503", app: "com.example.maps")
        t.request(0, "a1")
        t.start(1000, "5501", "s1", startPayload(1))  // per app
        t.start(2000, "5502", "s2", startPayload(2), topic: NEWS + ".push-type.liveactivity")
        t.start(3000, "5503", "s3", startPayload(3), topic: "com.example.maps.push-type.liveactivity")  // per device
        let r = try t.run()
        #expect(r.id("s1") == nil && r.id("s3") == nil)
        #expect(r.id("s2") != nil)
        #expect(r.acc[Outcome.limitExceeded] == 2)
    }

    @Test("DOMAIN §3.4 item 1: ended or dismissed → ignoredEnded (checked before the timestamp)")
    func applyIgnoredEnded() throws {
        var t = Trace()
        t.request(0, "a1")
        t.request(0, "a2")
        t.send(1000, "a1", end(10))
        t.send(2000, "a1", update(20))  // newer timestamp: still ignored
        t.send(3000, "a1", update(5))  // older timestamp: ended wins over stale timestamp
        t.dismiss(4000, "a2")
        t.send(5000, "a2", update(30))
        let r = try t.run()
        #expect(r.outcome(.ignoredEnded, "a1") == 2 && r.outcome(.ignoredStaleTimestamp, "a1") == 0)
        #expect(r.outcome(.ignoredEnded, "a2") == 1)
        #expect(r.timestamp("a1") == Int64(E + 10) && r.content("a1") == #"{"home": 0, "away": 0}"#)
    }

    @Test("DOMAIN §3.4 item 2: timestamp not greater than the last applied → ignoredStaleTimestamp (equal too)")
    func applyIgnoredStaleTimestamp() throws {
        var t = Trace()
        t.request(0, "a1")
        t.send(1000, "a1", update(10, ["home": 1, "away": 0]))
        t.send(2000, "a1", update(10, ["home": 2, "away": 0]))
        t.send(3000, "a1", update(9, ["home": 3, "away": 0]))
        t.send(4000, "a1", update(11, ["home": 4, "away": 0]))
        let r = try t.run()
        #expect(r.outcome(.ignoredStaleTimestamp, "a1") == 2)
        #expect(r.outcome(.applied, "a1") == 2)
        #expect(r.content("a1") == #"{"home": 4, "away": 0}"#)
    }

    @Test("DOMAIN §3.4 items 2→3: a stale timestamp is ignored before the budget is consulted")
    func applyStaleBeforeThrottle() throws {
        var t = Trace(budget: 1)
        t.request(0, "a1")
        t.send(1000, "a1", update(10))
        t.send(2000, "a1", update(10))
        let r = try t.run()
        #expect(r.outcome(.ignoredStaleTimestamp, "a1") == 1)
        #expect(r.outcome(.throttled, "a1") == 0)
    }

    @Test("DOMAIN §3.4 item 3: priority-10 budget exhausted → throttled; priority 5 never counts")
    func applyThrottled() throws {
        var t = Trace(budget: 2)
        t.request(0, "a1")
        for k in 1...3 { t.send(k * 1000, "a1", update(k), priority: 5) }
        for k in 4...6 { t.send(k * 1000, "a1", update(k), priority: 10) }
        t.send(7000, "a1", update(7), priority: 5)
        let r = try t.run()
        #expect(r.outcome(.applied, "a1") == 6)
        #expect(r.outcome(.throttled, "a1") == 1)
        #expect(r.timestamp("a1") == Int64(E + 7))

        var zero = Trace(budget: 0)
        zero.request(0, "a1")
        zero.send(1000, "a1", update(1), priority: 10)
        zero.send(2000, "a1", update(2), priority: 5)
        let z = try zero.run()
        #expect(z.outcome(.throttled, "a1") == 1 && z.outcome(.applied, "a1") == 1)
    }

    @Test("DOMAIN §3.4 items 3→4: a throttled push is not decoded (throttled, not decodeFailed)")
    func applyThrottleBeforeDecode() throws {
        var t = Trace(budget: 1)
        t.request(0, "a1")
        t.send(1000, "a1", update(1))
        t.send(2000, "a1", update(2, ["home": "bad"]))
        let r = try t.run()
        #expect(r.outcome(.throttled, "a1") == 1)
        #expect(r.outcome(.decodeFailed, "a1") == 0)
    }

    @Test("DOMAIN §3.4 item 4: content-state that does not decode → decodeFailed, nothing changes")
    func applyDecodeFailed() throws {
        var t = Trace()
        t.request(0, "a1", relevance: 5)
        t.send(1000, "a1", update(1, ["home": 1]))  // missing non-optional key
        t.send(2000, "a1", update(2, ["home": "1", "away": 0]))  // wrong type
        t.send(3000, "a1", update(3, ["home": 1, "away": 0, "extra": [1, 2]]))  // unknown key ignored
        let r = try t.run()
        #expect(r.outcome(.decodeFailed, "a1") == 2)
        #expect(r.outcome(.applied, "a1") == 1)
        #expect(r.timestamp("a1") == Int64(E + 3))

        var f = Trace()
        f.request(0, "a1", relevance: 5)
        f.send(1000, "a1", update(1, ["home": true, "away": 0], ["relevance-score": 9]))
        let g = try f.run()
        #expect(g.timestamp("a1") == nil && g.relevance("a1") == 5 && g.content("a1") == #"{"home": 0, "away": 0}"#)
    }

    @Test("DOMAIN §3.4 item 5: applied replaces content-state, stale-date (absent → none), relevance (absent → 0)")
    func applyReplaces() throws {
        var t = Trace()
        t.request(0, "a1", staleDate: E + 500, relevance: 40)
        t.send(1000, "a1", update(1, ["home": 2, "away": 1], ["stale-date": E + 900, "relevance-score": 50]))
        let r1 = try t.run()
        #expect(r1.content("a1") == #"{"home": 2, "away": 1}"#)
        #expect(r1.staleDate("a1") == Double(E + 900) && r1.relevance("a1") == 50)
        t.send(2000, "a1", update(2, ["home": 3, "away": 1]))
        let r2 = try t.run()
        #expect(r2.content("a1") == #"{"home": 3, "away": 1}"#)
        #expect(r2.staleDate("a1") == nil && r2.relevance("a1") == 0)
        #expect(r2.timestamp("a1") == Int64(E + 2))
    }

    @Test("DOMAIN §3.4 item 5: an applied end moves the activity to ended")
    func applyEnd() throws {
        var t = Trace()
        t.request(0, "a1")
        t.send(1000, "a1", end(1, ["content-state": ["home": 5, "away": 4]]))
        let r = try t.run()
        #expect(r.state(of: "a1") == .ended)
        #expect(r.outcome(.applied, "a1") == 1)
        #expect(r.content("a1") == #"{"home": 5, "away": 4}"#)
    }
}
