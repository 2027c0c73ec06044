import Foundation
import Testing

@testable import FanoutCore

@Suite("JSONTape: strict RFC 8259 scanning")
struct JSONTapeTests {
    func scan(_ bytes: [UInt8]) -> Bool {
        var tape = JSONTape()
        return bytes.withUnsafeBytes { tape.scan($0) == nil }
    }

    func scan(_ text: String) -> Bool { scan(Array(text.utf8)) }

    @Test(
        "accepts strict JSON",
        arguments: [
            #"{}"#, #"[]"#, #" {"a": [1, -2.5e3, 0, true, false, null, "x"]} "#, #""\u00e9\ud83d\ude00""#,
            #"{"a":{"b":{"c":[[]]}}}"#, "0", "-0", "1E+2", "1e-400", #""\/\b\f\n\r\t\\\"""#, "\t\n\r 7 ",
            "\"é😀中\"",
        ])
    func accepts(text: String) {
        #expect(scan(text), "\(text)")
    }

    @Test(
        "rejects what is not strict JSON",
        arguments: [
            "", " ", "NaN", "Infinity", "-Infinity", "{\"a\":NaN}", "01", "1.", ".5", "-", "+1", "1e", "1e+",
            "0x10", "{\"a\":1}x", "{\"a\":1} {}", "{\"a\":1,}", "[1,]", "{,}", "{\"a\"}", "{\"a\" 1}", "{a:1}",
            "'a'", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\x\"", "\"\\u12\"", "\"a\u{01}\"", "\"a",
            "[", "{", "]", "tru", "nul", "True", "1e400", "-1e400", "[1 2]",
        ])
    func rejects(text: String) {
        #expect(!scan(text), "\(text)")
    }

    @Test("rejects a byte-order mark and invalid UTF-8")
    func rejectsBadBytes() {
        #expect(!scan([0xEF, 0xBB, 0xBF] + Array("{}".utf8)))
        for bad: [UInt8] in [
            [0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
            [0x80], [0xC3], [0xFF],
        ] {
            #expect(!scan([0x22] + bad + [0x22]), "\(bad)")
        }
        #expect(scan([0x22, 0xC3, 0xA9, 0x22]))
    }

    // Found by Fuzz/FuzzPayload (heap-buffer-overflow under ASan): a document that ends right after the
    // colon of an object's first key read the byte after its end as the start of the value.
    @Test(
        "a document cut after its first key's colon fails at its end, reading nothing past it",
        arguments: [#"{"a":"#, #"{"a\\":"#, "{ \"a\" :\t", #"[{"k":"#])
    func cutAfterFirstColon(document: String) {
        var tape = JSONTape()
        let count = document.utf8.count
        for follower in ["{", "[", "\"x\"", "1", "null"] {
            // The document is a prefix of a longer buffer whose next bytes would start a value.
            let buffer = Array((document + follower + "}").utf8)
            let stop = buffer.withUnsafeBytes { tape.scan(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            #expect(stop == count, "\(document) + \(follower)")
        }
    }

    @Test("members: duplicate keys, the last one wins; escaped keys name the same member")
    func members() {
        var tape = JSONTape()
        let text = Array(#"{"a":1,"b":{"c":2},"a":3,"\u0064":4}"#.utf8)
        text.withUnsafeBytes { bytes in
            #expect(tape.scan(bytes) == nil)
            let tape = tape.reading(bytes)
            #expect(tape.int64(tape.member(0, "a")) == 3)
            #expect(tape.int64(tape.member(0, "d")) == 4)
            let b = tape.member(0, "b")
            #expect(tape.int64(tape.member(b, "c")) == 2)
            #expect(tape.member(0, "c") == -1)
        }
    }

    @Test("unescaping: escapes and surrogate pairs become UTF-8")
    func unescape() {
        var tape = JSONTape()
        let text = Array(#""a\"\\\/\n\u00e9\ud83d\ude00""#.utf8)
        text.withUnsafeBytes { bytes in
            #expect(tape.scan(bytes) == nil)
            let tape = tape.reading(bytes)
            var out: [UInt8] = []
            tape.appendUnescaped(0, to: &out)
            #expect(String(decoding: out, as: UTF8.self) == "a\"\\/\né😀")
            #expect(tape.unescapedCount(0) == out.count)
        }
    }
}

@Suite("JSONNumber: exact integral and double values")
struct JSONNumberTests {
    func value(_ text: String) -> (Int64?, Double?) {
        var tape = JSONTape()
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { buffer in
            guard tape.scan(buffer) == nil else { return (nil, nil) }
            let document = tape.reading(buffer)
            return (document.int64(0), document.double(0))
        }
    }

    @Test(
        "integral numbers in Int64 range",
        arguments: [
            ("3", Int64(3)), ("3.0", 3), ("-7", -7), ("1e3", 1000), ("1700000000.0", 1_700_000_000), ("0", 0),
            ("-0", 0), ("9223372036854775807", Int64.max), ("-9223372036854775808", Int64.min), ("2.5e1", 25),
        ])
    func integral(text: String, expected: Int64) {
        #expect(value(text).0 == expected)
    }

    @Test(
        "not integral or out of range",
        arguments: [
            "3.5", "1.5", "9223372036854775808", "-9223372036854775809", "1e19", "9223372036854775807.0", "0.1",
        ])
    func notIntegral(text: String) {
        #expect(value(text).0 == nil)
    }

    @Test("doubles parse exactly as Swift's own parser does")
    func doubles() {
        var generator = SplitMix64(seed: 11)
        var samples = [
            "0.61", "1e-5", "123456789012345678901234567890", "4.9e-324", "1.7976931348623157e308",
            "2.2250738585072014e-308", "0.1", "-0.0", "1e22", "1e23", "9007199254740993",
            // Around the short path (at most 15 digits, no exponent): 15, 16 and 17 digits, leading zeros.
            "999999999999999", "9999999999999999", "99999999999999999", "-123456789012345.6", "0.00000000000001",
            "0.000000000000001", "1234567890123456", "12345678901234567", "0.0",
            "-0.000", "50.0", "0.49", "0.411", "100000000000000.1",
        ]
        for k in 1...17 {
            var digits = ""
            for j in 0..<k { digits.append(String((j &* 7 &+ k) % 10)) }
            samples += ["1" + digits, "0." + digits, "1." + digits]
            if k > 1 { samples.append("-" + String(digits.prefix(1)) + "." + String(digits.dropFirst())) }
        }
        for _ in 0..<5000 {
            let d = Double(bitPattern: generator.next() & 0x7FEF_FFFF_FFFF_FFFF)
            samples.append("\(d)")
            samples.append(String(Double.random(in: -1e6...1e6, using: &generator)))
            samples.append(String(format: "%.3f", Double.random(in: 0..<1, using: &generator)))
        }
        for text in samples {
            #expect(value(text).1 == Double(text), "\(text)")
        }
    }
}
