import FanoutCore
import Testing

/// HeaderList keeps its buffers at full length and only counts what is the list's: what an emptied list held
/// must never show through, and a copy must keep its own fields.
@Suite("HeaderList: fields, emptying, growth, copies")
struct HeaderListTests {
    static func pairs(_ list: HeaderList) -> [String] {
        (0..<list.count).map {
            String(decoding: list.name($0), as: UTF8.self) + ": " + String(decoding: list.value($0), as: UTF8.self)
        }
    }

    static func append(_ list: inout HeaderList, _ name: String, _ value: String) {
        list.append(name: Array(name.utf8), value: Array(value.utf8))
    }

    @Test("fields in order; look-ups and duplicates see only the list's fields after it was emptied")
    func emptied() {
        var list = HeaderList()
        Self.append(&list, "apns-topic", "com.example.first")
        Self.append(&list, "apns-push-type", "liveactivity")
        Self.append(&list, "x-a", "1")
        Self.append(&list, "x-a", "2")
        #expect(
            Self.pairs(list) == ["apns-topic: com.example.first", "apns-push-type: liveactivity", "x-a: 1", "x-a: 2"])
        #expect(list.hasDuplicates)
        #expect(list.bytes.count == 10 + 17 + 14 + 12 + 4 + 4, "names and values back to back")
        list.removeAll()
        #expect(list.count == 0 && list.bytes.isEmpty && !list.hasDuplicates)
        #expect(list.value("apns-topic") == nil && list.value("x-a") == nil)
        list.withFields { _, spans in #expect(spans.isEmpty) }
        Self.append(&list, "x-a", "3")
        #expect(Self.pairs(list) == ["x-a: 3"])
        #expect(list.value("x-a").map { Array($0) } == Array("3".utf8))
        #expect(list.value("apns-topic") == nil, "the emptied list's field is not found")
        #expect(!list.hasDuplicates, "the emptied list's second x-a is not counted")
        list.withFields { base, spans in
            #expect(spans.count == 1)
            let s = spans[0]
            let field = UnsafeBufferPointer(start: base! + Int(s.name), count: Int(s.end - s.name))
            #expect(Array(field) == Array("x-a3".utf8))
        }
    }

    @Test("grows past its first buffers (256 bytes, 12 fields), empty names and values included")
    func growth() {
        var list = HeaderList()
        var expected: [String] = []
        for i in 0..<40 {
            let value = String(repeating: Character(UnicodeScalar(UInt8(97 + i % 26))), count: i * 3)
            Self.append(&list, "h\(i)", value)
            expected.append("h\(i): \(value)")
        }
        Self.append(&list, "", "")
        expected.append(": ")
        #expect(Self.pairs(list) == expected)
        #expect(list.count == 41 && list.storageBytes >= list.bytes.count)
        #expect(list.value("h39").map { Array($0) } == Array(String(repeating: "n", count: 117).utf8))
        list.removeAll()
        Self.append(&list, "h0", "again")
        #expect(Self.pairs(list) == ["h0: again"])
    }

    @Test("a copy keeps its fields when the original is emptied and refilled (copy on write)")
    func copies() {
        var list = HeaderList()
        Self.append(&list, "apns-id", "one")
        let copy = list
        list.removeAll()
        Self.append(&list, "apns-id", "two")
        Self.append(&list, "x-b", "more")
        #expect(Self.pairs(copy) == ["apns-id: one"])
        #expect(Self.pairs(list) == ["apns-id: two", "x-b: more"])
        var grown = copy
        for i in 0..<20 { Self.append(&grown, "x-\(i)", String(repeating: "v", count: 20)) }
        #expect(Self.pairs(copy) == ["apns-id: one"] && grown.count == 21)
    }
}
