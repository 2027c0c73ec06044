import Testing

@testable import FanoutCore

/// The string scanner skips eight plain bytes at a time; every special byte must still be seen
/// wherever it falls relative to the word boundaries, and errors report the same offsets.
@Suite("JSONTape: word-at-a-time string scanning")
struct JSONTapeWordScanTests {
    static func scan(_ bytes: [UInt8]) -> (Int?, [JSONTape.Entry]) {
        var tape = JSONTape()
        let result = bytes.withUnsafeBytes { tape.scan($0) }
        return (result, tape.entries)
    }

    @Test func specialBytesAtEveryPosition() {
        let good: [[UInt8]] = [
            Array("\\\"".utf8), Array("\\\\".utf8), Array("\\n".utf8), Array("\\u00e9".utf8),
            Array("\\ud83d\\ude00".utf8), [0xC3, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98, 0x80], [0x7F],
        ]
        let bad: [[UInt8]] = [
            [0x00], [0x1F], [0x0A], [0xFF], [0xC3], [0xC0, 0x80], [0xED, 0xA0, 0x80], Array("\\x".utf8),
            Array("\\ud83d".utf8), Array("\\ude00".utf8),
        ]
        for length in 0..<26 {
            for k in 0...length {
                for special in good + bad {
                    let body =
                        Array(repeating: UInt8(ascii: "a"), count: k) + special
                        + Array(repeating: UInt8(ascii: "b"), count: length - k)
                    let document = Array("{\"key\":\"".utf8) + body + Array("\",\"x\":1}".utf8)
                    let (result, entries) = Self.scan(document)
                    if good.contains(special) {
                        #expect(result == nil, "\(document)")
                        #expect(entries.count == 5)
                        #expect(entries[2].kind == .string && entries[2].flag == (special.first == UInt8(ascii: "\\")))
                        #expect(Int(entries[2].end) == 8 + body.count)
                    } else {
                        #expect(result == 7, "\(document)")
                    }
                    // As a key, too.
                    let asKey = Array("{\"".utf8) + body + Array("\":true}".utf8)
                    #expect((Self.scan(asKey).0 == nil) == good.contains(special), "\(asKey)")
                }
            }
        }
    }

    @Test func unterminatedAndNested() {
        #expect(Self.scan(Array("{\"a\":".utf8)).0 == 5)
        #expect(Self.scan(Array("\"abcdefghijklmnop".utf8)).0 == 0)
        let (result, entries) = Self.scan(Array(#"{"a":[1,{"b":[]},"c"],"d":{}}"#.utf8))
        #expect(result == nil)
        #expect(entries.map { Int($0.next) } == [10, 2, 8, 4, 7, 6, 7, 8, 9, 10])
    }

    @Test func copiesKeepTheirDocument() {
        var tape = JSONTape()
        let first = Array(#"{"a":1}"#.utf8)
        let second = Array(#"[true,false,null,"x"]"#.utf8)
        first.withUnsafeBytes { _ = tape.scan($0) }
        let copy = tape
        second.withUnsafeBytes { _ = tape.scan($0) }
        #expect(copy.count == 3 && copy[2].kind == .number)
        #expect(tape.count == 5 && tape[1].kind == .bool)
    }
}
