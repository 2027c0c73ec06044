import FanoutCore
import FanoutTrace
import Foundation
import Testing

// One named test per rule of docs/DOMAIN.md and docs/TRACE.md. Each test replays a small trace built
// below and asserts the specific outcome the rule requires. DOMAIN rules are in this file; TRACE's
// "Exact rules" and the unreadable-line kinds are in RuleTests+Validation.swift.

// MARK: - Building traces

/// Trace epoch, UNIX seconds. `at` is milliseconds since it; payload times are `E + seconds`.
let E = 1_700_000_000
let HOUR = 3_600_000
let APP = "com.example.scores"
let NEWS = "com.example.news"
let TOPIC = APP + ".push-type.liveactivity"
let SCHEMAS =
    #"{"Score":{"home":"int","away":"int","clock":"string?","prob":"double?","final":"bool?"},"#
    + #""Typed":{"i":"int","d":"double","s":"string","b":"bool","o":"int?"}}"#
var SCORE: [String: Any] { ["home": 1, "away": 0] }

/// JSON text written verbatim (`3.0`, `1e400`, `null`).
struct Raw {
    let text: String
    init(_ text: String) { self.text = text }
}
let null = Raw("null")

func q(_ s: String) -> String {
    var out = "\""
    for u in s.unicodeScalars {
        switch u {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case _ where u.value < 0x20: out += String(format: "\\u%04x", u.value)
        default: out.unicodeScalars.append(u)
        }
    }
    return out + "\""
}

/// Compact JSON, keys sorted (no rule here depends on key order except where `Raw` text is used).
func js(_ v: Any) -> String {
    switch v {
    case let r as Raw: return r.text
    case let b as Bool: return b ? "true" : "false"
    case let s as String: return q(s)
    case let i as Int: return String(i)
    case let d as Double: return "\(d)"
    case let a as [Any]: return "[" + a.map(js).joined(separator: ",") + "]"
    case let o as [String: Any]:
        return "{" + o.keys.sorted().map { q($0) + ":" + js(o[$0]!) }.joined(separator: ",") + "}"
    default: fatalError("js: unsupported \(type(of: v))")
    }
}

/// The update token of activity `a` in these tests: the hex of its id's bytes.
func tok(_ a: String) -> String { a.utf8.map { String(format: "%02x", $0) }.joined() }

/// `{"aps": {...}}` with `event`, `timestamp` = E + `t`, and more `aps` members.
func aps(_ event: String, _ t: Int, _ more: [String: Any] = [:]) -> String {
    var a = more
    a["event"] = event
    a["timestamp"] = E + t
    return js(["aps": a])
}
func update(_ t: Int, _ cs: [String: Any] = SCORE, _ more: [String: Any] = [:]) -> String {
    var m: [String: Any] = ["content-state": cs]
    for (k, v) in more { m[k] = v }
    return aps("update", t, m)
}
func end(_ t: Int, _ more: [String: Any] = [:]) -> String { aps("end", t, more) }
func startPayload(_ t: Int, _ more: [String: Any] = [:], drop: String? = nil) -> String {
    var m: [String: Any] = [
        "content-state": SCORE, "attributes-type": "Score", "attributes": ["team": "x"],
        "alert": ["title": "Go", "body": "Kick-off"],
    ]
    for (k, v) in more { m[k] = v }
    if let drop { m[drop] = nil }
    return aps("start", t, m)
}
/// `payload` grown with a top-level `pad` member to exactly `bytes` UTF-8 bytes, using `unit`.
func padded(_ payload: String, to bytes: Int, unit: String = "x") -> String {
    let head = String(payload.dropLast()) + #","pad":""#
    var fill = bytes - head.utf8.count - 2
    var pad = ""
    while fill >= unit.utf8.count {
        pad += unit
        fill -= unit.utf8.count
    }
    pad += String(repeating: "x", count: fill)
    let result = head + pad + "\"}"
    precondition(result.utf8.count == bytes)
    return result
}

enum Target {
    case token(String)
    case channel(String)
    case start(String)
}

struct Trace {
    var lines: [String]

    init(limits: String? = nil, budget: Int? = nil) {
        var header = #"{"trace":1,"epoch":\#(E),"schemas":\#(SCHEMAS)"#
        if let limits { header += #","limits":\#(limits)"# }
        lines = [header + #","budgetPerHour":\#(budget.map { String($0) } ?? "null")}"#]
    }
    init(header: String) { lines = [header] }

    var text: String { lines.joined(separator: "\n") }
    func run() throws -> TraceReplay { try TraceReplay.replay(text: text) }
    /// Replays with one more `advance` line at `at`, so the state is read at that instant.
    func run(until at: Int) throws -> TraceReplay {
        var t = self
        t.advance(at)
        return try t.run()
    }
    func state(_ a: String, at: Int) throws -> ActivityState? { try run(until: at).state(of: a) }

    mutating func op(_ at: Int, _ op: String, _ fields: [String: Any] = [:]) {
        var f = fields
        f["at"] = at
        f["op"] = op
        lines.append(js(f))
    }
    static func requestFields(
        _ activity: String, device: String = "d1", app: String = APP,
        state: [String: Any] = ["home": 0, "away": 0], staleDate: Any = null, relevance: Any = 0,
        token: String? = nil, channel: Any = null, type: String = "Score"
    ) -> [String: Any] {
        [
            "device": device, "app": app, "activity": activity, "type": type, "attributes": ["k": "v"],
            "state": state, "staleDate": staleDate, "relevance": relevance, "token": token ?? tok(activity),
            "channel": channel,
        ]
    }
    mutating func request(
        _ at: Int, _ activity: String, device: String = "d1", app: String = APP,
        state: [String: Any] = ["home": 0, "away": 0], staleDate: Any = null, relevance: Any = 0,
        token: String? = nil, channel: Any = null, type: String = "Score"
    ) {
        op(
            at, "request",
            Trace.requestFields(
                activity, device: device, app: app, state: state, staleDate: staleDate,
                relevance: relevance, token: token, channel: channel, type: type))
    }
    static func pushFields(
        _ target: Target, _ payload: String, pushType: Any = "liveactivity", topic: Any = TOPIC,
        priority: Any = 10, expiration: Any = 0, collapseId: Any = null, apnsId: Any = null,
        newActivity: String? = nil
    ) -> [String: Any] {
        var f: [String: Any] = [
            "pushType": pushType, "topic": topic, "priority": priority, "expiration": expiration,
            "collapseId": collapseId, "apnsId": apnsId, "payload": payload,
        ]
        switch target {
        case .token(let t): f["token"] = t
        case .channel(let c): f["channel"] = c
        case .start(let s): f["startToken"] = s
        }
        if let newActivity {
            f["newActivity"] = newActivity
            f["newToken"] = tok(newActivity)
        }
        return f
    }
    mutating func push(
        _ at: Int, _ target: Target, _ payload: String, pushType: Any = "liveactivity",
        topic: Any = TOPIC, priority: Any = 10, expiration: Any = 0, collapseId: Any = null,
        apnsId: Any = null, newActivity: String? = nil
    ) {
        op(
            at, "push",
            Trace.pushFields(
                target, payload, pushType: pushType, topic: topic, priority: priority,
                expiration: expiration, collapseId: collapseId, apnsId: apnsId,
                newActivity: newActivity))
    }
    /// An update or end to activity `a` through its original token.
    mutating func send(_ at: Int, _ a: String, _ payload: String, priority: Any = 10) {
        push(at, .token(tok(a)), payload, priority: priority)
    }
    /// A push-to-start through start token `token`, creating `newActivity` (token `tok(newActivity)`).
    mutating func start(_ at: Int, _ token: String, _ newActivity: String, _ payload: String, topic: Any = TOPIC) {
        push(at, .start(token), payload, topic: topic, newActivity: newActivity)
    }
    mutating func startToken(_ at: Int, _ token: String, device: String = "d1", app: String = APP) {
        op(at, "startToken", ["device": device, "app": app, "token": token])
    }
    mutating func broadcast(_ at: Int, _ channel: String, _ payload: String, priority: Any = 10, topic: Any = TOPIC) {
        push(at, .channel(channel), payload, topic: topic, priority: priority)
    }
    mutating func advance(_ at: Int) { op(at, "advance") }
    mutating func rotate(_ at: Int, _ a: String, _ token: String) { op(at, "rotate", ["activity": a, "token": token]) }
    mutating func subscribe(_ at: Int, _ a: String, _ channel: String) {
        op(at, "subscribe", ["activity": a, "channel": channel])
    }
    mutating func dismiss(_ at: Int, _ a: String) { op(at, "dismiss", ["activity": a]) }
}

// MARK: - Reading the result

extension TraceReplay {
    var acc: Accounting { pipeline!.accounting }
    var store: ActivityStore { pipeline!.store }
    func id(_ a: String) -> Int32? { store.activityIds.lookup(a) }
    func state(of a: String) -> ActivityState? { id(a).map { store.state($0, nowMillis: nowMillis) } }
    func outcome(_ o: Outcome, _ a: String) -> Int { store.outcomeCount(o, for: id(a)!) }
    func names(_ ids: [Int32]) -> [String] { ids.map { store.activityIds.string($0) } }
    func lock(_ d: String) -> [String] {
        names(store.lockScreen(device: store.deviceIds.lookup(d)!, nowMillis: nowMillis))
    }
    func island(_ d: String) -> [String] {
        names(store.island(device: store.deviceIds.lookup(d)!, nowMillis: nowMillis))
    }
    func relevance(_ a: String) -> Double { store.relevance[Int(id(a)!)] }
    func staleDate(_ a: String) -> Double? { store.staleDateSeconds(id(a)!) }
    func timestamp(_ a: String) -> Int64? { store.hasTimestamp[Int(id(a)!)] ? store.timestamp[Int(id(a)!)] : nil }
    var dump: [String] {
        String(decoding: StateDump.render(pipeline!, nowMillis: nowMillis), as: UTF8.self)
            .split(separator: "\n").map(String.init)
    }
    func line(_ a: String) -> String? { dump.first { $0.hasPrefix("{\"activity\": \(q(a)), ") } }
    /// The `content` object of the activity's dump line, as written.
    func content(_ a: String) -> String? {
        guard let l = line(a), let s = l.range(of: "\"content\": "), let e = l.range(of: ", \"staleDate\": ") else {
            return nil
        }
        return String(l[s.upperBound..<e.lowerBound])
    }
    var totals: [String: Any] {
        let object = try! JSONSerialization.jsonObject(with: Data(dump.last!.utf8)) as! [String: Any]
        return object["totals"] as! [String: Any]
    }
}

func int(_ v: Any?) -> Int { (v as? Int) ?? (v as? NSNumber)?.intValue ?? -1 }
func sum(_ v: Any?) -> Int { (v as? [String: Any])?.values.reduce(0) { $0 + int($1) } ?? -1 }

/// The line at which replay stops, or nil when the trace replays.
func errorLine(_ text: String) -> Int? {
    do {
        _ = try TraceReplay.replay(text: text)
        return nil
    } catch let error as TraceError {
        return error.line
    } catch {
        return -1
    }
}

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
