import Testing

@testable import FanoutCore

@Suite("JSONWriter")
struct JSONWriterTests {
    func python(_ value: Double) -> String {
        var out: [UInt8] = []
        JSONWriter.appendPythonFloat(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    func shortest(_ value: Double) -> String {
        var out: [UInt8] = []
        JSONWriter.appendDouble(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test(
        "Python repr: fixed notation from 1e-4 up to below 1e16, exponent outside",
        arguments: [
            (50.0, "50.0"), (0.0, "0.0"), (-0.0, "-0.0"), (0.61, "0.61"), (1.0, "1.0"), (-1.5, "-1.5"),
            (1e16, "1e+16"), (1.5e16, "1.5e+16"), (1e15, "1000000000000000.0"), (0.0001, "0.0001"),
            (0.00001, "1e-05"), (1.25e-7, "1.25e-07"), (123456789.125, "123456789.125"),
            (Double.leastNonzeroMagnitude, "5e-324"),
            (1700000900.5, "1700000900.5"), (1e300, "1e+300"), (100.0, "100.0"),
            (1234567890123456.0, "1234567890123456.0"), (0.1, "0.1"), (2.5, "2.5"),
        ])
    func pythonRepr(value: Double, expected: String) {
        #expect(python(value) == expected)
    }

    @Test("shortest round-trip doubles read back to the same value")
    func roundTrip() {
        var generator = SplitMix64(seed: 7)
        for _ in 0..<20_000 {
            let value =
                Double(bitPattern: generator.next() & 0x7FEF_FFFF_FFFF_FFFF) * (generator.next() & 1 == 0 ? 1 : -1)
            let text = shortest(value)
            #expect(Double(text) == value, "\(value) -> \(text)")
            let py = python(value)
            #expect(Double(py) == value, "\(value) -> \(py)")
        }
    }

    @Test("integers, including the Int64 extremes")
    func integers() {
        for value: Int64 in [0, 7, -7, 10, 1_700_000_000, Int64.max, Int64.min] {
            var out: [UInt8] = []
            JSONWriter.appendInt(value, to: &out)
            #expect(String(decoding: out, as: UTF8.self) == String(value))
        }
    }

    @Test("string escaping: payload style uses \\u00XX, dump style Python's short forms")
    func escaping() {
        let input = "q\"b\\n\n\t\u{01}\u{1F}é😀"
        var payload: [UInt8] = []
        JSONWriter.appendString(input, to: &payload, escaping: .unicodeControls)
        #expect(String(decoding: payload, as: UTF8.self) == "\"q\\\"b\\\\n\\u000a\\u0009\\u0001\\u001fé😀\"")
        var dump: [UInt8] = []
        JSONWriter.appendString(input, to: &dump, escaping: .pythonStyle)
        #expect(String(decoding: dump, as: UTF8.self) == "\"q\\\"b\\\\n\\n\\t\\u0001\\u001fé😀\"")
    }
}

/// A small deterministic generator for tests.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
