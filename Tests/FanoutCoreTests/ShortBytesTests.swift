import FanoutCore
import Testing

@Suite("ShortBytes")
struct ShortBytesTests {
    static let texts: [StaticString] = [
        "abcd", ":path", ":method", "apns-id", ":authority", "apns-topic", "apns-priority", "authorization",
        "apns-push-type", "apns-request-id", "apns-collapse-id",
    ]

    @Test("each text equals its own bytes; every byte changed, and every other text of its length, do not")
    func equality() {
        for text in Self.texts {
            let n = text.utf8CodeUnitCount
            var bytes = Array(UnsafeBufferPointer(start: text.utf8Start, count: n))
            bytes.withUnsafeBytes { #expect(ShortBytes.equal($0.baseAddress!, text), "\(text)") }
            for i in 0..<n {
                let kept = bytes[i]
                for delta: UInt8 in [1, 0x20, 0x80] {
                    bytes[i] = kept ^ delta
                    bytes.withUnsafeBytes { #expect(!ShortBytes.equal($0.baseAddress!, text), "\(text) byte \(i)") }
                }
                bytes[i] = kept
            }
            for other in Self.texts where other.utf8CodeUnitCount == n && "\(other)" != "\(text)" {
                bytes.withUnsafeBytes { #expect(!ShortBytes.equal($0.baseAddress!, other), "\(text) vs \(other)") }
            }
        }
    }
}
