import FanoutCore
import FanoutTrace

// libFuzzer target: arbitrary bytes as one push, through the whole path a device takes:
// validate (headers + payload) → route → apply/decode into an activity (or start one).
//
// Input: byte 0 picks the target and the clock, byte 1 the headers (mostly valid ones, so that the
// payload checks are reached), the rest is the payload. The population is built once; every input
// runs on a copy of it (copy-on-write), so inputs do not depend on each other.
//
// Beyond "no crash", it checks: the accounting identities; an accepted payload is valid UTF-8; the
// same token push delivered twice is never applied twice; each activity's content reads back through
// both JSON styles (compact payload and state dump) to the same record; the state dump is strict JSON.

private let epochMillis: Int64 = 1_700_000_000_000

/// Bytes kept alive (and reachable, for LeakSanitizer) for the whole process.
nonisolated(unsafe) private var keptAlive: [UnsafeMutableRawBufferPointer] = []

private func persistent(_ text: String) -> UnsafeRawBufferPointer {
    let bytes = Array(text.utf8)
    let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
    memory.copyBytes(from: bytes)
    keptAlive.append(memory)
    return UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(memory)[0..<bytes.count])
}

private struct Constants {
    let liveactivity = persistent("liveactivity")
    let alert = persistent("alert")
    let topic = persistent("com.example.scores.push-type.liveactivity")
    let newsTopic = persistent("com.example.news.push-type.liveactivity")
    let bareTopic = persistent("com.example.scores")
    let collapseOK = persistent("score")
    let collapseLong = persistent(String(repeating: "c", count: 65))
    let uuid = persistent("0a1B2c3D-4e5F-6a7b-8C9d-0e1f2a3b4c5d")
    let badUUID = persistent("0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5")
    let newActivity = persistent("n1")
    let newToken = persistent("cc01")
    /// Targets selected by the low three bits of byte 0.
    let targets: [(TargetKind, UnsafeRawBufferPointer)] = [
        (.token, persistent("aa01")), (.token, persistent("aa02")), (.token, persistent("AA04")),
        (.channel, persistent("ch1")), (.startToken, persistent("5501")), (.startToken, persistent("5502")),
        (.token, persistent("bb")), (.token, persistent("x")),
    ]
}

nonisolated(unsafe) private let constants = Constants()

/// The population every input starts from: two devices, two apps, four activities, one channel,
/// two start tokens; one of the activities already ended.
nonisolated(unsafe) private let template: Pipeline = {
    var schemas = SchemaSet()
    schemas.add(ContentSchema(name: "Score", fields: [
        .init(name: "home", type: .int), .init(name: "away", type: .int),
        .init(name: "clock", type: .string, optional: true), .init(name: "prob", type: .double, optional: true),
        .init(name: "final", type: .bool, optional: true),
    ]))
    schemas.add(ContentSchema(name: "Typed", fields: [
        .init(name: "i", type: .int), .init(name: "d", type: .double), .init(name: "s", type: .string),
        .init(name: "b", type: .bool), .init(name: "o", type: .int, optional: true),
    ]))
    let p = Pipeline(schemas: schemas, rules: DeviceRules(perAppLimit: 2, perDeviceLimit: 3))
    func request(_ id: String, device: String, app: String, schema: String, state: String, token: String,
                 channel: String?) {
        let s = schemas.id(named: schema)!
        var record: [UInt8] = []
        var slots: [Int32] = []
        var tape = JSONTape()
        let text = Array(state.utf8)
        text.withUnsafeBytes { bytes in
            precondition(tape.scan(bytes) == nil)
            precondition(schemas[s].decode(tape: tape.reading(bytes), object: 0, into: &record, slots: &slots))
        }
        let a = record.withUnsafeBytes { content in
            p.request(
                id: persistent(id), device: persistent(device), app: persistent(app), schema: s,
                content: content, staleDate: nil, relevance: 0, token: persistent(token),
                channel: channel.map(persistent), nowMillis: epochMillis)
        }
        precondition(a != nil)
    }
    request("a1", device: "d1", app: "com.example.scores", schema: "Score", state: #"{"home":1,"away":0}"#,
            token: "aa01", channel: "ch1")
    request("a2", device: "d1", app: "com.example.scores", schema: "Typed",
            state: #"{"i":1,"d":0.5,"s":"x\u00e9","b":true}"#, token: "aa02", channel: "ch1")
    request("a3", device: "d1", app: "com.example.news", schema: "Score", state: #"{"home":0,"away":0}"#,
            token: "aa03", channel: nil)
    request("a4", device: "d2", app: "com.example.scores", schema: "Typed",
            state: #"{"i":-1,"d":1e300,"s":"","b":false,"o":7}"#, token: "AA04", channel: "ch1")
    p.dismiss(p.store.activityIds.lookup(persistent("a3"))!, nowMillis: epochMillis)
    p.setStartToken(device: persistent("d1"), app: persistent("com.example.scores"), token: persistent("5501"))
    p.setStartToken(device: persistent("d2"), app: persistent("com.example.news"), token: persistent("5502"))
    return p
}()

/// Headers: values 0..<0xC0 are valid (priority 10 or 5, with or without collapse and message ids);
/// the rest break one header each.
private func headers(_ selector: UInt8, channel: Bool) -> PushHeaders {
    let c = constants
    var h = PushHeaders(
        pushType: .string(c.liveactivity), topic: .string(c.topic), priority: .integer(selector & 1 == 0 ? 10 : 5),
        expiration: .integer(0))
    if selector & 2 != 0 { h.collapseId = .string(c.collapseOK) }
    if selector & 4 != 0 { h.apnsId = .string(c.uuid) }
    if selector & 8 != 0 && !channel { h.expiration = .integer(3600) }
    if selector & 16 != 0 && channel { h.priority = .integer(1) }
    guard selector >= 0xC0 else { return h }
    switch selector & 0x0F {
    case 0: h.pushType = .string(c.alert)
    case 1: h.pushType = .null
    case 2: h.topic = .string(c.bareTopic)
    case 3: h.topic = .string(c.newsTopic)
    case 4: h.topic = .integer(7)
    case 5: h.priority = .integer(1)
    case 6: h.priority = .integer(7)
    case 7: h.priority = .other
    case 8: h.collapseId = .string(c.collapseLong)
    case 9: h.collapseId = .integer(1)
    case 10: h.apnsId = .string(c.badUUID)
    case 11: h.apnsId = .other
    case 12: h.expiration = .integer(-1)
    case 13: h.expiration = .integer(3600)
    case 14: h.expiration = .other
    default: h.expiration = .null
    }
    return h
}

/// Clock offsets selected by bits 3–4 of byte 0: at the start, an hour later, past the 8-hour end,
/// past the dismissal.
private let clockOffsets: [Int64] = [0, 3_600_000, 8 * 3_600_000 + 1, 12 * 3_600_000]

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("fuzz invariant: \(message())") }
}

/// compact and python JSON of each activity's content decode back to the same record.
private func checkContentRoundTrip(_ p: Pipeline) {
    var tape = JSONTape()
    var text: [UInt8] = []
    var again: [UInt8] = []
    var slots: [Int32] = []
    for a in 0..<Int32(p.store.activityCount) {
        let schema = p.schemas[p.store.schema[Int(a)]]
        p.store.withContent(a) { record in
            for style in [JSONStyle.compact, .python] {
                text.removeAll(keepingCapacity: true)
                again.removeAll(keepingCapacity: true)
                schema.appendJSON(record: record, style: style, to: &text)
                let json = String(decoding: text, as: UTF8.self)
                text.withUnsafeBytes { bytes in
                    check(tape.scan(bytes) == nil, "content JSON does not scan: \(json)")
                    check(schema.decode(tape: tape.reading(bytes), object: 0, into: &again, slots: &slots),
                          "content JSON does not decode: \(json)")
                }
                check(again.elementsEqual(record), "content does not read back: \(json)")
            }
        }
    }
}

/// Every line of the state dump is strict JSON.
private func checkDump(_ p: Pipeline, nowMillis: Int64) {
    let dump = StateDump.render(p, nowMillis: nowMillis)
    var tape = JSONTape()
    for line in dump.split(separator: UInt8(ascii: "\n")) {
        Array(line).withUnsafeBytes { bytes in
            check(tape.scan(bytes) == nil, "dump line is not JSON: \(String(decoding: line, as: UTF8.self))")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPayload(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size >= 2 else { return 0 }
    let input = UnsafeRawBufferPointer(start: data, count: size)
    let (kind, target) = constants.targets[Int(input[0] & 7)]
    let now = epochMillis + clockOffsets[Int(input[0] >> 3 & 3)]
    let rules = DeviceRules(perAppLimit: 2, perDeviceLimit: 3, budgetPerHour: input[0] & 0x20 != 0 ? 1 : nil)
    let h = headers(input[1], channel: kind == .channel)
    let payload = UnsafeRawBufferPointer(rebasing: input[2...])

    let p = Pipeline(schemas: template.schemas, rules: rules)
    p.store = template.store
    p.router = template.router

    let verdict = p.push(
        kind: kind, target: target, headers: h, payload: payload, nowMillis: now,
        newActivity: constants.newActivity, newToken: constants.newToken)
    check(p.accounting.identitiesHold, "identities after one push")
    if case .rejected = verdict {
    } else {
        check(JSONTape.isValidUTF8(payload), "accepted a payload that is not UTF-8")
    }
    if case .routed = verdict, kind == .token {
        let applied = p.accounting[.applied]
        p.push(kind: kind, target: target, headers: h, payload: payload, nowMillis: now)
        check(p.accounting[.applied] == applied, "the same push was applied twice")
        check(p.accounting.identitiesHold, "identities after the same push twice")
    }
    if case .routed = verdict {
        checkContentRoundTrip(p)
        checkDump(p, nowMillis: now)
    }
    return 0
}
