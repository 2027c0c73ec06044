import Foundation
import Testing

@testable import FanoutAPNs
@testable import FanoutServe

@Suite("Trigger intendedAt (RFC 3339, UTC, milliseconds)")
struct TriggerTimeTests {
    /// Foundation's ISO 8601 formatter, the reference.
    static func reference(_ millis: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: Double(millis) / 1000))
    }

    @Test("the same text as Foundation's ISO8601DateFormatter: edges, leap days, before 1970, 20,000 random instants")
    func matchesFoundation() {
        var cases: [Int64] = [
            0, 1, 999, 1000, -1, -999, -1000, -1001, 86_399_999, 86_400_000,
            951_782_400_000,  // 2000-02-29
            951_868_799_999,  // 2000-02-29T23:59:59.999
            4_107_542_400_000,  // 2100-03-01 (2100 is not a leap year)
            1_795_675_860_123,  // 2026-11-26T06:51:00.123Z
            -2_208_988_800_000,  // 1900-01-01
            253_402_300_799_999,  // 9999-12-31T23:59:59.999
        ]
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        for _ in 0..<20_000 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            // 1900 … 9999
            cases.append(Int64(state % 255_611_289_600_000) - 2_208_988_800_000)
        }
        var mismatches: [String] = []
        for millis in cases {
            let ours = TriggerSender.rfc3339(millis: millis)
            let theirs = TriggerTimeTests.reference(millis)
            if ours != theirs { mismatches.append("\(millis): \(ours) vs \(theirs)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
        #expect(TriggerSender.rfc3339(millis: 1_795_675_860_123) == "2026-11-26T06:51:00.123Z")
    }
}
