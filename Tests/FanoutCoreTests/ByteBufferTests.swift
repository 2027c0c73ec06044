import Testing

@testable import FanoutCore

/// The payload encoder writes through `ByteBuffer`'s fast path; it must give exactly the bytes of
/// `JSONWriter` (the reference the dump and the earlier encoder use).
@Suite("ByteBuffer JSON writing")
struct ByteBufferTests {
    static func doubles() -> [Double] {
        var values: [Double] = [
            0, -0.0, 1, -1, 0.1, 0.61, 2.5, 1e-17, 9.9e-18, 1e-5, 1e16, 9.007199254740992e15, 9.007199254740991e15,
            1_700_000_000, 123456789.123, Double.leastNonzeroMagnitude, 1.7976931348623157e308, 8.673617379884035e-19,
            9.2e18, 1e300,
            Double.ulpOfOne, 0.30000000000000004, 100, 81,
        ]
        var g = SplitMix64(seed: 7)
        for _ in 0..<20_000 {
            let bits = g.next()
            let d = Double(bitPattern: bits)
            if d.isFinite { values.append(d) }
            values.append(Double(bits % 1_000_000) / 1000)
            values.append(Double(Int64(bitPattern: bits) >> Int(bits % 60)) / 1e6)
        }
        return values
    }

    @Test func doublesMatchJSONWriter() {
        var buffer = ByteBuffer(capacity: 8)
        for value in Self.doubles() {
            var expected: [UInt8] = []
            JSONWriter.appendDouble(value, to: &expected)
            buffer.removeAll()
            buffer.appendJSONDouble(value)
            #expect(Array(buffer.bytes) == expected, "\(value)")
        }
    }

    @Test func intsMatchJSONWriter() {
        var values: [Int64] = [
            0, 1, -1, 9, 10, -10, 99, 100, Int64.max, Int64.min, Int64.min + 1, 1_000_000_000_000_000_000,
        ]
        var g = SplitMix64(seed: 3)
        for _ in 0..<20_000 { values.append(Int64(bitPattern: g.next()) >> Int(g.next() % 64)) }
        for k in 0..<19 {
            var p: Int64 = 1
            for _ in 0..<k { p *= 10 }
            values += [p, p - 1, -p, 1 - p]
        }
        var buffer = ByteBuffer(capacity: 1)
        for value in values {
            var expected: [UInt8] = []
            JSONWriter.appendInt(value, to: &expected)
            buffer.removeAll()
            buffer.appendJSONInt(value)
            #expect(Array(buffer.bytes) == expected, "\(value)")
        }
    }

    @Test func stringsMatchJSONWriter() {
        var samples: [[UInt8]] = [
            [], Array("plain".utf8), Array("a\"b\\c".utf8), Array("tab\there\nnew".utf8),
            Array("Reale Arena, Donostia-San Sebastián — ⚽️ \u{7F}".utf8), [0, 1, 0x1F, 0x20, 0x22, 0x5C],
            Array(repeating: UInt8(ascii: "x"), count: 5000),
        ]
        var g = SplitMix64(seed: 11)
        for length in 0..<80 {
            for _ in 0..<20 {
                var s: [UInt8] = []
                for _ in 0..<length {
                    let r = g.next()
                    // Mostly letters, sometimes quotes, backslashes, controls, and bytes ≥ 0x80.
                    switch r % 16 {
                    case 0: s.append(UInt8(ascii: "\""))
                    case 1: s.append(UInt8(ascii: "\\"))
                    case 2: s.append(UInt8(truncatingIfNeeded: r >> 8) & 0x1F)
                    case 3: s.append(0x80 | UInt8(truncatingIfNeeded: r >> 8) & 0x7F)
                    default: s.append(UInt8(ascii: "a") + UInt8(r >> 8 % 26) % 26)
                    }
                }
                samples.append(s)
            }
        }
        var buffer = ByteBuffer(capacity: 4)
        for s in samples {
            var expected: [UInt8] = []
            s.withUnsafeBytes { JSONWriter.appendString($0, to: &expected) }
            buffer.removeAll()
            s.withUnsafeBytes { buffer.appendJSONString($0) }
            #expect(Array(buffer.bytes) == expected)
        }
    }

    /// The one-pass copy of a plain string: every length around the word size, after contents already written,
    /// with one byte to escape (or non-ASCII, passed through) at every position, or none.
    @Test func stringsOneSpecialByteEveryPosition() {
        var buffer = ByteBuffer(capacity: 4)
        for length in 1..<42 {
            for position in -1..<length {
                for special: UInt8 in [0x22, 0x5C, 0x00, 0x1F, 0x7F, 0xC3] {
                    var s = (0..<length).map { UInt8(ascii: "a") &+ UInt8($0 % 26) }
                    if position >= 0 { s[position] = special }
                    var expected = Array(#"{"k":"#.utf8)
                    s.withUnsafeBytes { JSONWriter.appendString($0, to: &expected) }
                    expected.append(UInt8(ascii: "}"))
                    buffer.removeAll()
                    buffer.append(#"{"k":"#)
                    s.withUnsafeBytes { buffer.appendJSONString($0) }
                    buffer.append(UInt8(ascii: "}"))
                    #expect(Array(buffer.bytes) == expected, "length \(length), \(special) at \(position)")
                }
            }
        }
    }

    @Test func compactRecordMatchesAppendJSON() {
        let schema = ContentSchema(
            name: "T",
            fields: [
                .init(name: "i", type: .int), .init(name: "q\"uote", type: .string),
                .init(name: "o", type: .double, optional: true), .init(name: "b", type: .bool),
                .init(name: "d", type: .double), .init(name: "né", type: .string, optional: true),
            ])
        var g = SplitMix64(seed: 5)
        let doubles = Self.doubles()
        for k in 0..<2000 {
            var record: [UInt8] = []
            ContentRecord.appendInt(Int64(bitPattern: g.next()), to: &record)
            Array("s\(k)\n\"".utf8).withUnsafeBytes { ContentRecord.appendString($0, to: &record) }
            if k % 3 == 0 {
                ContentRecord.appendAbsent(to: &record)
            } else {
                ContentRecord.appendDouble(doubles[k % doubles.count], to: &record)
            }
            ContentRecord.appendBool(k % 2 == 0, to: &record)
            ContentRecord.appendDouble(doubles[(k * 7) % doubles.count], to: &record)
            if k % 5 == 0 {
                ContentRecord.appendAbsent(to: &record)
            } else {
                Array("ü\(k)".utf8).withUnsafeBytes { ContentRecord.appendString($0, to: &record) }
            }
            var expected: [UInt8] = []
            record.withUnsafeBytes { schema.appendJSON(record: $0, style: .compact, to: &expected) }
            var buffer = ByteBuffer(capacity: 16)
            record.withUnsafeBytes { schema.appendCompactJSON(record: $0, to: &buffer) }
            #expect(Array(buffer.bytes) == expected)
        }
    }

    /// `append(_:count:)` copies short runs in words (overlapping), longer ones with memcpy: every length, after
    /// every offset, gives exactly the bytes, and writes nothing past them.
    @Test func appendEveryLengthAfterEveryOffset() {
        let source = (0..<64).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 7) }
        source.withUnsafeBytes { src in
            for offset in 0..<9 {
                for length in 0...48 {
                    var buffer = ByteBuffer(capacity: 1)
                    for k in 0..<offset { buffer.append(UInt8(k)) }
                    buffer.append(src.baseAddress! + 3, count: length)
                    buffer.append(UInt8(0xEE))
                    let expected = Array(0..<UInt8(offset)) + Array(source[3..<3 + length]) + [0xEE]
                    #expect(Array(buffer.bytes) == expected, "offset \(offset), length \(length)")
                }
            }
        }
    }

    @Test func copiesDoNotShareWrites() {
        var a = ByteBuffer(capacity: 16)
        a.append("first")
        let b = a
        a.removeAll()
        a.append("second")
        #expect(Array(b.bytes) == Array("first".utf8))
        #expect(Array(a.bytes) == Array("second".utf8))
        var c = a
        c.removeAll()
        c.append("other and more, past the capacity of sixteen bytes")
        #expect(Array(a.bytes) == Array("second".utf8))
        #expect(String(decoding: c.bytes, as: UTF8.self) == "other and more, past the capacity of sixteen bytes")
        var encoder = PayloadEncoder()
        encoder.encode(event: .update, timestamp: 1, content: nil, schema: gameSchema)
        let copy = encoder
        encoder.encode(event: .end, timestamp: 2, content: nil, schema: gameSchema)
        #expect(String(decoding: copy.bytes, as: UTF8.self) == #"{"aps":{"timestamp":1,"event":"update"}}"#)
        #expect(String(decoding: encoder.bytes, as: UTF8.self) == #"{"aps":{"timestamp":2,"event":"end"}}"#)
    }

    @Test func decodeRecordMatchesDecode() {
        let schema = ContentSchema(
            name: "T",
            fields: [
                .init(name: "i", type: .int), .init(name: "s", type: .string),
                .init(name: "d", type: .double, optional: true), .init(name: "b", type: .bool),
                .init(name: "os", type: .string, optional: true), .init(name: "é", type: .int),
            ])
        let keys = [#""i""#, #""s""#, #""d""#, #""b""#, #""os""#, #""é""#, #""\u00e9""#, #""\u0069""#, #""x""#]
        let values = [
            "1", "-7", "3.0", "3.5", "1e3", "1e30", "-9223372036854775808", "9223372036854775808", "0.61", "true",
            "false", "null", #""text""#, #""t\u00e9\n\"x""#, #""""#, "{}", "[1,2]", #"{"a":[]}"#,
        ]
        var g = SplitMix64(seed: 9)
        var tape = JSONTape()
        var outcomes = (ok: 0, failed: 0)
        for _ in 0..<20_000 {
            var members: [String] = []
            for _ in 0..<Int(g.next() % 9) {
                let key = keys[Int(g.next() % UInt64(keys.count))]
                members.append(key + ":" + values[Int(g.next() % UInt64(values.count))])
            }
            // A well-typed object half of the time, so that successful decodes are exercised too; members in
            // schema order a third of the time (the in-order walk), some absent, some of the wrong type.
            if g.next() % 3 == 0 {
                let inOrder = [
                    [#""i":4"#, #""i":"x""#], [#""s":"v""#, #""s":null"#], [#""d":0.5"#, #""d":null"#, #""d":"x""#],
                    [#""b":true"#], [#""os":"w""#, #""os":null"#], [#""é":-2"#, #""é":3"#, #""é":1.5"#],
                ]
                members = []
                for choices in inOrder where g.next() % 5 != 0 {
                    members.append(choices[Int(g.next() % UInt64(choices.count))])
                }
                if g.next() % 4 == 0 { members.append(members.first ?? #""x":1"#) }  // a repeat: out of order
            } else if g.next() % 2 == 0 {
                let typed = [#""i":4"#, #""s":"v\u0041""#, #""b":false"#, #""é":-2"#]
                members = typed + members.filter { _ in g.next() % 4 == 0 }
            }
            let document = Array(("{" + members.joined(separator: ",") + "}").utf8)
            document.withUnsafeBytes { bytes in
                #expect(tape.scan(bytes) == nil)
                let tape = tape.reading(bytes)
                var expected: [UInt8] = [0xAB]
                var slots: [Int32] = []
                let ok = schema.decode(tape: tape, object: 0, into: &expected, slots: &slots)
                var buffer = ByteBuffer(capacity: 2)
                buffer.append(0xAB)
                let fastOK = schema.decodeRecord(tape: tape, object: 0, into: &buffer)
                #expect(ok == fastOK, "\(String(decoding: document, as: UTF8.self))")
                if ok {
                    #expect(Array(buffer.bytes) == expected)
                    outcomes.ok += 1
                } else {
                    outcomes.failed += 1
                }
            }
        }
        #expect(outcomes.ok > 1000 && outcomes.failed > 1000)
    }
}

@Suite("Router token table")
struct RouterTokenTableTests {
    @Test func tableMatchesHexDigit() {
        let table = Router.hexTable
        #expect(table.utf8CodeUnitCount == 256)
        for c in 0..<256 {
            let byte = UInt8(c)
            let entry = table.utf8Start[c]
            if let digit = JSONTape.hexDigit(byte) {
                let upper = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F")
                #expect(entry == (upper ? 0x10 | digit : digit), "\(c)")
            } else {
                #expect(entry == 0x20, "\(c)")
            }
        }
    }

    /// `lookupToken` reads canonical characters eight at a time: for every length and a changed character
    /// (uppercase, not hex, a byte ≥ 0x80) at every position, it finds what `withTokenKey` interned, or says
    /// malformed exactly when the token is not (TRACE rule 8).
    @Test func lookupMatchesTheKeyEveryLengthEveryPosition() {
        var g = SplitMix64(seed: 8)
        let hex = Array("0123456789abcdef".utf8)
        let changes: [UInt8] = Array("AF/:@G`g Zz".utf8) + [0x00, 0x80, 0xB0, 0xE6, 0xFF]
        for length in 0..<72 {
            var tokens: [[UInt8]] = [(0..<length).map { _ in hex[Int(g.next() % 16)] }]
            for at in 0..<length {
                var changed = tokens[0]
                changed[at] = changes[Int(g.next() % UInt64(changes.count))]
                tokens.append(changed)
            }
            var interner = ByteInterner()
            var ids: [Int32] = []
            for token in tokens {
                ids.append(token.withUnsafeBytes { t in Router.withTokenKey(t) { interner.intern($0).id } })
            }
            for (token, id) in zip(tokens, ids) {
                let wellFormed = token.withUnsafeBytes { PayloadValidator.isWellFormedToken($0) }
                let found = token.withUnsafeBytes { Router.lookupToken($0, in: interner) }
                #expect(found == (wellFormed ? id : -2), "\(String(decoding: token, as: UTF8.self))")
            }
        }
    }
}

@Suite("memoryEqual")
struct MemoryEqualTests {
    @Test func everyLengthEveryPosition() {
        for length in 0..<40 {
            let a = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            a.withUnsafeBytes { pa in
                var b = a
                #expect(
                    b.withUnsafeBytes {
                        memoryEqual(
                            pa.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!,
                            $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, length)
                    })
                for k in 0..<length {
                    b[k] ^= 0x40
                    let equal = b.withUnsafeBytes { memoryEqual(pa.baseAddress!, $0.baseAddress!, length) }
                    #expect(!equal, "\(length) \(k)")
                    b[k] ^= 0x40
                }
            }
        }
    }
}
