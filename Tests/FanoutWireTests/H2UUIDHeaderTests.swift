import FanoutWire
import Foundation
import Testing

@Suite("H2UUIDHeader")
struct H2UUIDHeaderTests {
    @Test("the value is the lowercase UUID text Foundation gives the same 16 bytes (high word first), for 1,000 pairs")
    func formatsAsUUID() {
        var generator = SystemRandomNumberGenerator()
        let pairs = [(UInt64(0), UInt64(0)), (UInt64.max, UInt64.max), (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210)]
            + (0..<1000).map { _ in (generator.next() as UInt64, generator.next() as UInt64) }
        for (high, low) in pairs {
            let header = H2UUIDHeader(name: .apnsId, high: high, low: low)
            var bytes = [UInt8](repeating: 0, count: 16)
            for i in 0..<8 {
                bytes[i] = UInt8(truncatingIfNeeded: high >> UInt64(56 - 8 * i))
                bytes[8 + i] = UInt8(truncatingIfNeeded: low >> UInt64(56 - 8 * i))
            }
            let uuid = UUID(uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
            #expect(String(decoding: header.value, as: UTF8.self) == uuid.uuidString.lowercased())
        }
    }
}
