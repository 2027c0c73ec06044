import Testing

@testable import FanoutCore

/// The one pass compares a content-state key with the schema's compact key whole (`memoryEqual`: words, the last
/// one overlapping, or bytes): on keys of every length from 1 to 26 letters, sharing long prefixes, with every byte
/// replaced, the one pass accepts only what the general way accepts and reads it alike.
@Suite("PayloadOnePass: keys of every length compared whole")
struct PayloadOnePassKeyTests {
    /// `z`, `kz`, `kkz`, … : names of 1 to 26 letters, each a prefix of the next but for its last letter.
    static let schema = ContentSchema(
        name: "Keys",
        fields: (1...26).map { n in
            .init(
                name: String(repeating: "k", count: n - 1) + "z", type: n % 2 == 0 ? .int : .bool,
                optional: n % 3 == 0)
        })

    static func record(_ seed: Int) -> [UInt8] {
        var record: [UInt8] = []
        for n in 1...26 {
            if n % 3 == 0 && (n + seed) % 4 == 0 {
                ContentRecord.appendAbsent(to: &record)
            } else if n % 2 == 0 {
                ContentRecord.appendInt(Int64(n * (seed + 1)), to: &record)
            } else {
                ContentRecord.appendBool((n + seed) % 2 == 0, to: &record)
            }
        }
        return record
    }

    static func general(_ payload: UnsafeRawBufferPointer) -> [UInt8]? {
        var validator = PayloadValidator()
        guard validator.validateJudged(priority: 10, payload: payload, target: .token) == nil else { return nil }
        let aps = validator.aps
        guard aps.contentState >= 0 else { return nil }
        let tape = validator.tape.reading(payload)
        var out = ByteBuffer(capacity: 64)
        guard schema.decodeRecord(tape: tape, object: Int(aps.contentState), into: &out) else { return nil }
        return Array(out.bytes)
    }

    static func onePass(_ payload: UnsafeRawBufferPointer) -> [UInt8]? {
        var record = ByteBuffer(capacity: 8)
        guard PayloadOnePass.parse(payload, layout: schema.layout, into: &record) != nil else { return nil }
        return Array(record.bytes)
    }

    @Test("with any byte of a content-state replaced, the one pass reads what the general way reads, or leaves it")
    func mutatedKeys() {
        var encoder = PayloadEncoder()
        var accepted = 0
        var total = 0
        for seed in 0..<4 {
            let record = Self.record(seed)
            _ = record.withUnsafeBytes {
                encoder.encode(event: .update, timestamp: 1_700_000_000, content: $0, schema: Self.schema)
            }
            let base = encoder.bytes
            base.withUnsafeBytes { #expect(Self.onePass($0) == record) }
            for i in base.indices {
                for b in Array(#"kzxy",:19"#.utf8) where b != base[i] {
                    var payload = base
                    payload[i] = b
                    total += 1
                    payload.withUnsafeBytes { bytes in
                        guard let fast = Self.onePass(bytes) else { return }
                        accepted += 1
                        #expect(fast == Self.general(bytes), "\(String(decoding: payload, as: UTF8.self))")
                    }
                }
            }
        }
        #expect(total > 5000 && accepted > 100 && accepted < total / 4, "\(accepted) of \(total)")
    }
}

/// The pipeline reads a schema's layout through `SchemaSet.layoutView` (plain pointers, no reference counted): the
/// view is the layout of the schema the set holds now, also after a schema of the same name replaces it.
@Suite("SchemaSet.layoutView: the layout of the schema held now")
struct LayoutViewTests {
    static func same(_ view: LayoutView, _ layout: ContentLayout) -> Bool {
        view.count == layout.count && view.kinds == layout.kinds && view.compactKeys == layout.compactKeys
            && view.compactKeyOffsets == layout.compactKeyOffsets
    }

    @Test("added and replaced schemas: each view is its schema's layout")
    func views() {
        var set = SchemaSet()
        let first = set.add(PayloadOnePassTests.schema)
        let second = set.add(PayloadOnePassKeyTests.schema)
        #expect(Self.same(set.layoutView(first), set[first].layout))
        #expect(Self.same(set.layoutView(second), set[second].layout))
        let replacement = ContentSchema(name: PayloadOnePassTests.schema.name, fields: [.init(name: "x", type: .int)])
        #expect(set.add(replacement) == first)
        #expect(set.layoutView(first).count == 1)
        #expect(Self.same(set.layoutView(first), set[first].layout))
        #expect(Self.same(set.layoutView(second), set[second].layout))
    }
}
