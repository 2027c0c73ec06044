import Foundation
import Testing

@testable import FanoutCore

let gameSchema = ContentSchema(
    name: "GameAttributes",
    fields: [
        .init(name: "home", type: .int), .init(name: "away", type: .int), .init(name: "clock", type: .string),
        .init(name: "period", type: .string, optional: true), .init(name: "winProbability", type: .double),
        .init(name: "final", type: .bool),
    ])

/// A content record for `gameSchema`.
func gameRecord(home: Int64, away: Int64, clock: String, period: String?, win: Double, final: Bool) -> [UInt8] {
    var record: [UInt8] = []
    ContentRecord.appendInt(home, to: &record)
    ContentRecord.appendInt(away, to: &record)
    Array(clock.utf8).withUnsafeBytes { ContentRecord.appendString($0, to: &record) }
    if let period {
        Array(period.utf8).withUnsafeBytes { ContentRecord.appendString($0, to: &record) }
    } else {
        ContentRecord.appendAbsent(to: &record)
    }
    ContentRecord.appendDouble(win, to: &record)
    ContentRecord.appendBool(final, to: &record)
    return record
}

@Suite("PayloadEncoder")
struct PayloadEncoderTests {
    /// Strings with quotes, backslashes, every control character, emoji, CJK, combining marks.
    static func randomString(_ g: inout SplitMix64) -> String {
        let pool: [Unicode.Scalar] = [
            "\"", "\\", "/", "a", "Z", " ", "é", "中", "文", "😀", "🏈", "\u{301}",
            "\u{2028}", "\u{7F}",
        ]
        var s = String.UnicodeScalarView()
        for _ in 0..<Int(g.next() % 12) {
            if g.next() % 4 == 0 {
                s.append(Unicode.Scalar(UInt8(g.next() % 32)))
            } else {
                s.append(pool[Int(g.next() % UInt64(pool.count))])
            }
        }
        return String(s)
    }

    /// The number text after `"key":` in `json`, parsed by the standard library's correctly rounded
    /// `Double(_:)`. (Foundation's JSONSerialization on Linux rounds some 17-digit numbers wrongly, e.g.
    /// 2.7173259552496815e8, so it cannot judge doubles.)
    static func number(after key: String, in json: String) -> Double? {
        guard let range = json.range(of: "\"\(key)\":") else { return nil }
        let text = json[range.upperBound...].prefix { "0123456789+-.eE".contains($0) }
        return Double(text)
    }

    @Test("round trip through an independent JSON parser (Foundation) for random content")
    func roundTrip() throws {
        var g = SplitMix64(seed: 2026)
        var encoder = PayloadEncoder()
        for _ in 0..<2000 {
            let clock = Self.randomString(&g)
            let period: String? = g.next() % 2 == 0 ? Self.randomString(&g) : nil
            let home = Int64(bitPattern: g.next()) >> Int64(g.next() % 64)
            let win =
                g.next() % 3 == 0
                ? Double.random(in: 0..<1, using: &g)
                : Double(bitPattern: g.next() & 0x7FEF_FFFF_FFFF_FFFF)
            let relevance = Double.random(in: -1e9...1e9, using: &g)
            let record = gameRecord(home: home, away: 3, clock: clock, period: period, win: win, final: true)
            _ = record.withUnsafeBytes {
                encoder.encode(
                    event: .update, timestamp: 1_700_000_000, content: $0, schema: gameSchema,
                    staleDate: 1_700_000_900, relevanceScore: relevance,
                    alert: .init(title: clock, body: "Goal \"x\"", sound: "default"))
            }
            let object = try #require(try JSONSerialization.jsonObject(with: Data(encoder.bytes)) as? [String: Any])
            let aps = try #require(object["aps"] as? [String: Any])
            let content = try #require(aps["content-state"] as? [String: Any])
            #expect((content["home"] as? NSNumber)?.int64Value == home)
            #expect(content["clock"] as? String == clock)
            #expect(content["period"] as? String == period)
            let text = String(decoding: encoder.bytes, as: UTF8.self)
            #expect(content["winProbability"] is NSNumber)
            #expect(Self.number(after: "winProbability", in: text) == win, "\(text)")
            #expect(Self.number(after: "relevance-score", in: text) == relevance, "\(text)")
            #expect((aps["alert"] as? [String: Any])?["title"] as? String == clock)
            #expect(aps["stale-date"] as? Int == 1_700_000_900)
        }
    }

    @Test("stable key order and compact output")
    func keyOrder() {
        var encoder = PayloadEncoder()
        let record = gameRecord(home: 2, away: 1, clock: "05:12", period: nil, win: 0.61, final: false)
        var attributes: [UInt8] = []
        ContentRecord.appendInt(7, to: &attributes)
        let attributesSchema = ContentSchema(name: "A", fields: [.init(name: "match", type: .int)])
        _ = record.withUnsafeBytes { content in
            attributes.withUnsafeBytes { attrs in
                encoder.encode(
                    event: .start, timestamp: 1_700_000_123, content: content, schema: gameSchema, staleDate: 1,
                    dismissalDate: 2, relevanceScore: 50, alert: .init(title: "T", body: "B"),
                    start: .init(
                        attributesType: "GameAttributes", attributes: attrs, attributesSchema: attributesSchema,
                        inputPushChannel: "ch"))
            }
        }
        #expect(
            String(decoding: encoder.bytes, as: UTF8.self) == #"""
                {"aps":{"timestamp":1700000123,"event":"start","content-state":{"home":2,"away":1,"clock":"05:12","winProbability":0.61,"final":false},"stale-date":1,"dismissal-date":2,"relevance-score":50.0,"alert":{"title":"T","body":"B"},"attributes-type":"GameAttributes","attributes":{"match":7},"input-push-token":1,"input-push-channel":"ch"}}
                """#)
    }

    @Test("what the encoder writes, the validator accepts and the device decodes back")
    func encodeValidateDecode() {
        var encoder = PayloadEncoder()
        var validator = PayloadValidator()
        let record = gameRecord(
            home: 2, away: 1, clock: "a\u{1}\"é😀\u{FEFF}中", period: "2nd", win: 0.1 + 0.2, final: true)
        _ = record.withUnsafeBytes {
            encoder.encode(event: .update, timestamp: 42, content: $0, schema: gameSchema)
        }
        encoder.bytes.withUnsafeBytes { payload in
            withHeaders(topic: "com.x.push-type.liveactivity") { headers in
                #expect(
                    validator.validate(headers: headers, payload: payload, target: .token, targetBundle: nil) == nil)
            }
            #expect(validator.aps.timestamp == 42)
            var decoded: [UInt8] = []
            var slots: [Int32] = []
            #expect(
                gameSchema.decode(
                    tape: validator.tape.reading(payload), object: Int(validator.aps.contentState), into: &decoded,
                    slots: &slots))
            #expect(decoded == record)
        }
    }
}

/// Runs `body` with valid token-push headers, overriding the topic.
func withHeaders<R>(
    pushType: String = "liveactivity", topic: String, priority: HeaderValue = .integer(10),
    expiration: HeaderValue = .integer(0), collapseId: String? = nil, apnsId: String? = nil,
    _ body: (PushHeaders) -> R
) -> R {
    let strings = [pushType, topic, collapseId ?? "", apnsId ?? ""].map { Array($0.utf8) }
    return strings[0].withUnsafeBytes { p in
        strings[1].withUnsafeBytes { t in
            strings[2].withUnsafeBytes { c in
                strings[3].withUnsafeBytes { a in
                    body(
                        PushHeaders(
                            pushType: .string(p), topic: .string(t), priority: priority,
                            expiration: expiration, collapseId: collapseId == nil ? .null : .string(c),
                            apnsId: apnsId == nil ? .null : .string(a)))
                }
            }
        }
    }
}
