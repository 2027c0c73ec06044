import Testing

@testable import FanoutCore

/// The payload encoder reserves its worst case once and then writes with no capacity check
/// (`PayloadEncoder.fixedBytes`, `ContentSchema.compactJSONBytes`, `ByteBuffer.jsonIntBytes` / `jsonDoubleBytes`):
/// on the longest values (every byte escaped, Int64.min, doubles of every kind) what it writes stays within what it
/// reserved, and is the reference text (`JSONWriter`) byte for byte from the smallest buffer.
@Suite("PayloadEncoder: one reserve, writes within it")
struct EncoderReserveTests {
    static let schema = ContentSchema(
        name: "Worst",
        fields: [
            .init(name: "i", type: .int), .init(name: "s", type: .string), .init(name: "d", type: .double),
            .init(name: "b", type: .bool), .init(name: "o", type: .string, optional: true),
            .init(name: "e\u{1}scaped \"key\"", type: .double),
        ])

    static func records() -> [[UInt8]] {
        let doubles = ByteBufferTests.doubles()
        let strings: [[UInt8]] = [
            [], Array(repeating: 0x01, count: 40), Array(repeating: UInt8(ascii: "\""), count: 9),
            Array("plain text without escapes".utf8), Array("ü\u{1F}\\x".utf8), [0x1F],
        ]
        var out: [[UInt8]] = []
        var g = SplitMix64(seed: 33)
        for k in 0..<3000 {
            var record: [UInt8] = []
            let ints: [Int64] = [Int64.min, Int64.max, -1, 0, Int64(bitPattern: g.next())]
            ContentRecord.appendInt(ints[k % ints.count], to: &record)
            strings[k % strings.count].withUnsafeBytes { ContentRecord.appendString($0, to: &record) }
            ContentRecord.appendDouble(doubles[k % doubles.count], to: &record)
            ContentRecord.appendBool(k % 2 == 0, to: &record)
            if k % 3 == 0 {
                ContentRecord.appendAbsent(to: &record)
            } else {
                strings[(k / 3) % strings.count].withUnsafeBytes { ContentRecord.appendString($0, to: &record) }
            }
            ContentRecord.appendDouble(doubles[(k &* 7919) % doubles.count], to: &record)
            out.append(record)
        }
        return out
    }

    @Test("a content-state object fits the room reserved for its record, and is the reference text")
    func contentWithinReserve() {
        for record in Self.records() {
            var expected: [UInt8] = []
            record.withUnsafeBytes { Self.schema.appendJSON(record: $0, style: .compact, to: &expected) }
            let bound = record.withUnsafeBytes { Self.schema.compactJSONBytes(record: $0) }
            var buffer = ByteBuffer(capacity: 1)
            record.withUnsafeBytes { Self.schema.appendCompactJSON(record: $0, to: &buffer) }
            #expect(Array(buffer.bytes) == expected)
            #expect(expected.count <= bound, "\(expected.count) > \(bound)")
        }
    }

    @Test("the fast paths of integers and doubles stay within their reserve")
    func numbersWithinReserve() {
        var buffer = ByteBuffer(capacity: 1)
        for value in [Int64.min, Int64.max, -1_000_000_000_000_000_000, 0] {
            buffer.removeAll()
            buffer.appendJSONInt(value)
            #expect(buffer.count <= ByteBuffer.jsonIntBytes)
        }
        // The double fast path's longest texts: 17 fraction digits, or 16 integer digits, with a sign.
        for value in [-0.01234567890123456, -9.007199254740991e15, -1e-17, -0.1234567890123456] {
            var slow: [UInt8] = []
            JSONWriter.appendDouble(value, to: &slow)
            buffer.removeAll()
            buffer.appendJSONDouble(value)
            #expect(Array(buffer.bytes) == slow)
            #expect(buffer.count <= ByteBuffer.jsonDoubleBytes, "\(value)")
        }
    }

    @Test("a whole payload stays within the room reserved for it (alert aside), from the smallest buffer")
    func payloadWithinReserve() {
        var encoder = PayloadEncoder(capacity: 1)
        var reference = PayloadEncoder(capacity: 4096)
        for (k, record) in Self.records().enumerated() where k % 7 == 0 {
            let relevance = [-0.01234567890123456, 50, -0.0, 0.61][k % 4]
            record.withUnsafeBytes { content in
                let count = encoder.encode(
                    event: .update, timestamp: Int64.min, content: content, schema: Self.schema, staleDate: Int64.min,
                    dismissalDate: Int64.min, relevanceScore: relevance)
                reference.encode(
                    event: .update, timestamp: Int64.min, content: content, schema: Self.schema, staleDate: Int64.min,
                    dismissalDate: Int64.min, relevanceScore: relevance)
                #expect(encoder.bytes == reference.bytes)
                // "}}" is written after the reserved part.
                #expect(count - 2 <= PayloadEncoder.fixedBytes + Self.schema.compactJSONBytes(record: content))
            }
        }
        var expected: [UInt8] = []
        Self.records()[1].withUnsafeBytes { Self.schema.appendJSON(record: $0, style: .compact, to: &expected) }
        _ = Self.records()[1].withUnsafeBytes {
            encoder.encode(event: .update, timestamp: 7, content: $0, schema: Self.schema)
        }
        let prefix = Array(#"{"aps":{"timestamp":7,"event":"update","content-state":"#.utf8)
        #expect(encoder.bytes == prefix + expected + Array("}}".utf8))
    }
}
