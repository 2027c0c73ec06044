import FanoutCore
import FanoutTrace
import Foundation
import Testing

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
