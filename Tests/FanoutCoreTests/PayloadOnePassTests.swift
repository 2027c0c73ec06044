import Testing

@testable import FanoutCore

/// The one-pass judgement of a token push (`PayloadOnePass`) against the general way (`JSONTape`,
/// `PayloadValidator`, `ContentSchema.decodeRecord`): whatever it accepts, the general way accepts with the
/// same members and decodes to the same record; on mutated payloads (bytes dropped, replaced, inserted).
@Suite("PayloadOnePass: accepts only what the general way accepts, decoded alike")
struct PayloadOnePassTests {
    static let schema = ContentSchema(
        name: "Game",
        fields: [
            .init(name: "home", type: .int), .init(name: "away", type: .int), .init(name: "clock", type: .string),
            .init(name: "period", type: .string, optional: true), .init(name: "win", type: .double),
            .init(name: "final", type: .bool), .init(name: "note", type: .string, optional: true),
        ])

    /// What a validation and a device decode read from a payload: the verdict, then the decode.
    struct Reading: Equatable {
        var event: PushEvent
        var timestamp: Int64
        var staleDate: Int64?
        var dismissalDate: Int64?
        var relevanceBits: UInt64
        var record: [UInt8]
    }

    /// The general way: nil when rejected or when the content does not decode (or is absent).
    static func general(_ payload: UnsafeRawBufferPointer) -> Reading? {
        var validator = PayloadValidator()
        guard validator.validateJudged(priority: 10, payload: payload, target: .token) == nil else { return nil }
        let aps = validator.aps
        let tape = validator.tape.reading(payload)
        func date(_ index: Int32) -> Int64?? {
            if index < 0 || tape[Int(index)].kind == .null { return .some(nil) }
            guard let value = tape.int64(Int(index)) else { return nil }
            return .some(value)
        }
        guard let stale = date(aps.staleDate), let dismissal = date(aps.dismissalDate) else { return nil }
        var relevance = 0.0
        if aps.relevanceScore >= 0 && tape[Int(aps.relevanceScore)].kind != .null {
            guard let value = tape.double(Int(aps.relevanceScore)) else { return nil }
            relevance = value
        }
        guard aps.contentState >= 0 else { return nil }
        var out = ByteBuffer(capacity: 64)
        guard schema.decodeRecord(tape: tape, object: Int(aps.contentState), into: &out) else { return nil }
        return Reading(
            event: aps.event, timestamp: aps.timestamp, staleDate: stale, dismissalDate: dismissal,
            relevanceBits: relevance.bitPattern, record: Array(out.bytes))
    }

    static func onePass(_ payload: UnsafeRawBufferPointer) -> Reading? {
        var record = ByteBuffer(capacity: 8)
        guard let read = PayloadOnePass.parse(payload, layout: schema.layout, into: &record) else { return nil }
        return Reading(
            event: read.event, timestamp: read.timestamp, staleDate: read.staleDate, dismissalDate: read.dismissalDate,
            relevanceBits: read.relevance.bitPattern, record: Array(record.bytes))
    }

    /// Payloads of the form the one pass reads, and a few near it.
    static func bases() -> [[UInt8]] {
        var encoder = PayloadEncoder()
        var payloads: [[UInt8]] = []
        let records = [
            onePassRecord(home: 2, away: 1, clock: "05:12", period: "1st", win: 0.61, final: false, note: "Goal!"),
            onePassRecord(home: 0, away: 13, clock: "é😀中", period: nil, win: -0.5, final: true, note: nil),
            onePassRecord(home: -7, away: 0, clock: "", period: "", win: 1e-7, final: false, note: "x"),
        ]
        for (k, record) in records.enumerated() {
            _ = record.withUnsafeBytes {
                encoder.encode(
                    event: k == 1 ? .end : .update, timestamp: 1_700_000_000 + Int64(k), content: $0, schema: schema,
                    staleDate: k == 0 ? 1_700_003_600 : nil, dismissalDate: k == 2 ? 17 : nil,
                    relevanceScore: k == 2 ? nil : 50)
            }
            payloads.append(encoder.bytes)
        }
        let texts = [
            #"{"aps":{"event":"update","content-state":{"home":1,"away":2,"clock":"c","win":3,"final":true},"#
                + #""timestamp":9}}"#,
            #"{"aps":{"timestamp":0,"event":"end","content-state":{"home":10,"away":-0,"clock":"x","#
                + #""period":null,"win":0.0,"final":false,"note":null},"stale-date":null,"dismissal-date":-3,"#
                + #""relevance-score":-12.25}}"#,
            #"{"aps":{"timestamp":123456789012345678,"event":"update","content-state":{"home":1,"away":2,"#
                + #""clock":"c","win":123456789.123456789,"final":true},"relevance-score":null}}"#,
            #"{"aps":{"timestamp":1,"event":"update","content-state":{"home":1,"away":2,"clock":"\u0063","#
                + #""win":3,"final":true}}}"#,
            #"{"aps":{"timestamp":1,"event":"update","content-state":{"home":1,"away":2,"clock":"c","win":3,"#
                + #""final":true},"alert":{}}}"#,
            #"{"aps":{"timestamp":1,"event":"start","content-state":{"home":1,"away":2,"clock":"c","win":3,"#
                + #""final":true}}}"#,
        ]
        payloads += texts.map { Array($0.utf8) }
        return payloads
    }

    /// `base` with one byte dropped, replaced or inserted at every offset (replacements and insertions from a
    /// set of bytes that matter to JSON and UTF-8), and cut short at every offset.
    static func mutations(of base: [UInt8]) -> [[UInt8]] {
        let bytes: [UInt8] = Array(#"" \{}[],:0159-.+eEnulltrfa"#.utf8) + [0x01, 0x7F, 0xC3, 0xA9, 0xED, 0xF4, 0xFF]
        var out: [[UInt8]] = [base]
        for i in base.indices {
            var dropped = base
            dropped.remove(at: i)
            out.append(dropped)
            out.append(Array(base[..<i]))
            for b in bytes {
                var replaced = base
                replaced[i] = b
                out.append(replaced)
                var inserted = base
                inserted.insert(b, at: i)
                out.append(inserted)
            }
        }
        return out
    }

    @Test("the words compared whole are the bytes they stand for")
    func words() {
        func word(_ text: String) -> UInt64 { Array(text.utf8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) } }
        #expect(PayloadOnePass.apsPrefix == word(#"{"aps":{"#))
        #expect(PayloadOnePass.updateWord == word(#""update""#))
    }

    @Test("the encoder's payloads are read in one pass, as the general way reads them")
    func encoderPayloads() {
        let bases = Self.bases()
        for payload in bases[0..<6] {
            payload.withUnsafeBytes { bytes in
                let fast = Self.onePass(bytes)
                #expect(fast != nil, "\(String(decoding: payload, as: UTF8.self))")
                #expect(fast == Self.general(bytes))
            }
        }
        // An escape, a member it does not read, a start: the general way judges them.
        for payload in bases[6...] { payload.withUnsafeBytes { #expect(Self.onePass($0) == nil) } }
    }

    @Test("on mutated payloads, what the one pass accepts the general way accepts, with the same reading")
    func mutated() {
        var accepted = 0
        var total = 0
        for base in Self.bases() {
            for payload in Self.mutations(of: base) {
                total += 1
                payload.withUnsafeBytes { bytes in
                    guard let fast = Self.onePass(bytes) else { return }
                    accepted += 1
                    let general = Self.general(bytes)
                    #expect(fast == general, "\(String(decoding: payload, as: UTF8.self))")
                }
            }
        }
        // Both sides of the comparison are exercised: many mutations are read in one pass, most are not.
        #expect(accepted > 500 && accepted < total / 2, "\(accepted) of \(total)")
    }
}

/// A content record for `PayloadOnePassTests.schema`: `gameSchema`'s fields, then the optional note.
private func onePassRecord(
    home: Int64, away: Int64, clock: String, period: String?, win: Double, final: Bool, note: String?
) -> [UInt8] {
    var record = gameRecord(home: home, away: away, clock: clock, period: period, win: win, final: final)
    if let note {
        Array(note.utf8).withUnsafeBytes { ContentRecord.appendString($0, to: &record) }
    } else {
        ContentRecord.appendAbsent(to: &record)
    }
    return record
}

/// The whole path with and without the one pass: the same verdicts, outcomes and stored state, for a delivery
/// that takes the one pass's decode and for a second delivery of the same push that decodes again.
@Suite("PayloadOnePass in the pipeline: the same verdicts and stored state as the general way")
struct PayloadOnePassPipelineTests {
    static let tokens = [Array("aa01".utf8), Array("aa02".utf8)]
    static let bundle = Array("com.example.game".utf8)
    static let nowMillis: Int64 = 1_700_000_000_000

    struct Observed: Equatable {
        var verdict: PushVerdict
        var outcomes: [Outcome] = []
        var contents: [[UInt8]] = []
        var stale: [Double?] = []
        var relevance: [Double] = []
        var ends: [Int64] = []
        var hash: UInt64 = 0
    }

    static func pipeline(onePass: Bool) -> Pipeline {
        var schemas = SchemaSet()
        schemas.add(PayloadOnePassTests.schema)
        let p = Pipeline(schemas: schemas, rules: DeviceRules())
        p.onePass = onePass
        let record = onePassRecord(home: 0, away: 0, clock: "", period: nil, win: 0, final: false, note: nil)
        for (k, token) in tokens.enumerated() {
            let created = requestActivity(
                p, id: "act-\(k)", device: "dev-\(k)", bundle: bundle, token: token, record: record,
                nowMillis: nowMillis - 60_000)
            precondition(created == Int32(k))
        }
        return p
    }

    static func observe(_ payload: [UInt8], onePass: Bool) -> Observed {
        let p = pipeline(onePass: onePass)
        var flight = tokens[0].withUnsafeBytes { p.begin(kind: .token, target: $0) }
        let rejected = payload.withUnsafeBytes { bytes in
            withHeaders(topic: "com.example.game.push-type.liveactivity") {
                p.validate(&flight, headers: $0, payload: bytes)
            }
        }
        if let rejected { return Observed(verdict: .rejected(rejected)) }
        var observed = Observed(verdict: p.route(&flight))
        for a: Int32 in [0, 1] {
            if a == 1 { _ = p.route(&flight) }  // a new delivery of the same push: decoded again
            let outcome = payload.withUnsafeBytes { p.deliver(flight, payload: $0, to: a, nowMillis: nowMillis) }
            observed.outcomes.append(outcome)
            if outcome == .applied { observed.hash ^= p.appliedContentHash() &* UInt64(a + 1) }
            observed.contents.append(p.store.withContent(a) { Array($0) })
            observed.stale.append(p.store.staleDateSeconds(a))
            observed.relevance.append(p.store.relevance[Int(a)])
            observed.ends.append(p.store.endMillis[Int(a)])
            observed.ends.append(p.store.dismissMillis[Int(a)])
        }
        return observed
    }

    @Test("pushed through the pipeline, mutated payloads give the same verdicts, outcomes and stored state")
    func sameState() {
        var applied = 0
        var total = 0
        let bases = PayloadOnePassTests.bases()
        for base in [bases[0], bases[1], bases[4]] {
            for payload in PayloadOnePassTests.mutations(of: base) {
                total += 1
                let fast = Self.observe(payload, onePass: true)
                let general = Self.observe(payload, onePass: false)
                #expect(fast == general, "\(String(decoding: payload, as: UTF8.self))")
                if fast.outcomes.first == .applied { applied += 1 }
            }
        }
        #expect(applied > 100, "\(applied) of \(total) applied")
    }
}

@Suite("PayloadOnePass.eightDigits: eight ASCII digits in one word")
struct PayloadOnePassDigitsTests {
    static func word(_ text: String) -> UInt64 {
        Array(text.utf8).withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
    }

    @Test("every value of eight digits reads as the digit loop reads it; a byte next to the digits is refused")
    func digits() {
        var texts = ["00000000", "12345678", "99999999", "10000000", "00000001", "17000036"]
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<2000 {
            x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let value = (x >> 20) % 100_000_000
            let text = String(value)
            texts.append(String(repeating: "0", count: 8 - text.count) + text)
        }
        for text in texts {
            #expect(PayloadOnePass.eightDigits(Self.word(text)) == UInt64(text)!, "\(text)")
            // A byte that is not a digit anywhere: refused (the bytes around '0'...'9' and others).
            for position in 0..<8 {
                for bad in ["/", ":", " ", "a", "\u{7F}", "."] {
                    var bytes = Array(text.utf8)
                    bytes[position] = Array(bad.utf8)[0]
                    #expect(PayloadOnePass.eightDigits(Self.word(String(decoding: bytes, as: UTF8.self))) == nil)
                }
            }
        }
        for high in [0xB0, 0xB9, 0xF0, 0x80] {
            var bytes = Array("12345678".utf8)
            bytes[3] = UInt8(high)
            let w = bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
            #expect(PayloadOnePass.eightDigits(w) == nil)
        }
    }
}

/// `PayloadOnePass.plainDouble` sums the digits as it scans them: bit for bit what `JSONNumber.parseDouble` (the
/// general way) reads from the same token, on both sides of its 15-digit path.
struct PayloadOnePassDoubleTests {
    static func tokens() -> [String] {
        var texts = [
            "0", "-0", "0.0", "-0.0", "0.5", "50.0", "0.61", "0.1", "0.3", "1", "-1", "0.000000000000001",
            "123456789012345", "1234567890123456", "12345678901234.5", "1234567890123.45", "0.123456789012345",
            "0.1234567890123456", "9007199254740993", "900719925474099.3", "999999999999999", "9999999999999999",
            "0.00000000000000000001", "-12.75", "4503599627370497.5", "1.7976931348623157", "100000000000000000000000",
            "0.30000000000000004", "2.2250738585072014",
        ]
        var x: UInt64 = 0x2545_F491_4F6C_DD1D
        for _ in 0..<4000 {
            x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let digitCount = Int((x >> 33) % 22) + 1
            var digits = ""
            var y = x
            for d in 0..<digitCount {
                y = y &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                digits.append(Character(String(d == 0 ? (y >> 40) % 9 + 1 : (y >> 40) % 10)))
            }
            let point = Int((x >> 13) % UInt64(digitCount + 1))  // digits before the point; 0: "0." first
            var text: String
            if point == digitCount {
                text = digits
            } else if point == 0 {
                text = "0." + digits
            } else {
                text = String(digits.prefix(point)) + "." + String(digits.dropFirst(point))
            }
            if x & 1 == 1 { text = "-" + text }
            if text.utf8.count <= 24 { texts.append(text) }
        }
        return texts
    }

    @Test("plain decimals read bit for bit as parseDouble reads them, the index moved past the token")
    func matchesParseDouble() {
        var fast = 0
        for text in Self.tokens() {
            let bytes = Array((text + ",").utf8)
            bytes.withUnsafeBufferPointer { buffer in
                let p = buffer.baseAddress!
                let limit = buffer.count
                var i = 0
                let value = PayloadOnePass.plainDouble(p, &i, limit)
                let expected = JSONNumber.parseDouble(p, limit - 1)
                #expect(value?.bitPattern == expected.bitPattern, "\(text)")
                #expect(i == limit - 1, "\(text)")
                if text.filter(\.isNumber).count <= 15 { fast += 1 }
            }
        }
        #expect(fast > 1000)
    }
}
