import FanoutCore
@testable import FanoutServe
import Foundation
import Testing

/// summary.md of `fanout serve` against a golden file, from fixed measurements (the format is what users and
/// tools read; a change to it must be deliberate: regenerate with FANOUT_UPDATE_GOLDEN=1).
@Suite("ServeReport: summary.md format (golden)")
struct ServeReportTests {
    static func fixture() -> (ServeReport.Info, ServeStats, Accounting, ConnectionStats) {
        var info = ServeReport.Info(
            scenario: "smoke", seed: 7, listen: "127.0.0.1:2197", transport: "h2c", auth: "none",
            startedAt: "2026-11-24T10:00:00Z", gitRevision: "0123456789ab")
        info.workers = 2
        var s = ServeStats()
        for (status, reason) in [(200, nil), (200, nil), (200, nil), (410, APNsReason.unregistered), (400, .badDeviceToken)] {
            s.answered(status, reason)
        }
        s.acceptedPushes = 3
        for v: UInt64 in [3_000, 4_000, 5_000, 9_000, 120_000] { s.serviceNanos.record(v) }
        for v: UInt64 in [20_000, 30_000, 40_000] { s.deliveryNanos.record(v) }
        s.validateNanos.record(1_500)
        s.routeNanos.record(300)
        s.note(.rotatedToken, "token 0123456789abcdef… apns-id 5e8a0b3c-0000-4000-8000-000000000001")
        s.note(.staleTimestamp, "activity device-0000001-a0 apns-id 5e8a0b3c-0000-4000-8000-000000000002")
        var a = Accounting()
        a.pushes = 3
        a.routed = 3
        a.deliveries = 3
        a.outcomes[Outcome.applied.rawValue] = 2
        a.outcomes[Outcome.ignoredStaleTimestamp.rawValue] = 1
        var c = ConnectionStats()
        c.accepted = 2
        c.closed = 2
        c.peakOpen = 2
        c.endReasons = ["closed by the client (GOAWAY)": 2]
        c.responsesSubmitted = 4
        c.answersDropped = 1
        return (info, s, a, c)
    }

    @Test("summary.md matches the golden file")
    func summaryMarkdown() throws {
        let (info, s, a, c) = Self.fixture()
        let text = ServeReport.summaryMarkdown(info, s, a, c, (1234, 567), 12.5)
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden/serve-summary.md")
        if ProcessInfo.processInfo.environment["FANOUT_UPDATE_GOLDEN"] == "1" {
            try text.write(to: url, atomically: true, encoding: .utf8)
        }
        let golden = try String(contentsOf: url, encoding: .utf8)
        #expect(text == golden)
    }

    @Test("summary.json carries the same counts, the identities and every finding with its examples")
    func summaryJSON() throws {
        let (info, s, a, c) = Self.fixture()
        let text = ServeReport.summaryJSON(info, s, a, c, (1234, 567), 12.5)
        let json = try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
        let requests = json["requests"] as! [String: Any]
        #expect(requests["total"] as? Int == 5 && requests["identitiesHold"] as? Bool == true)
        // 5 answers = 4 submitted + 1 dropped; one answer unaccounted for breaks the wire identity.
        #expect(requests["wireIdentityHolds"] as? Bool == true)
        var short = c
        short.answersDropped = 0
        let broken = try JSONSerialization.jsonObject(
            with: Data(ServeReport.summaryJSON(info, s, a, short, (1234, 567), 12.5).utf8)) as! [String: Any]
        #expect((broken["requests"] as! [String: Any])["wireIdentityHolds"] as? Bool == false)
        #expect(requests["byReason"] as? [String: Int] == ["Unregistered": 1, "BadDeviceToken": 1])
        let findings = json["findings"] as! [String: [String: Any]]
        #expect(findings["rotatedToken"]?["count"] as? Int == 1)
        #expect((findings["staleTimestamp"]?["examples"] as? [String])?.count == 1)
        let latency = json["latency"] as! [String: [String: Any]]
        #expect(latency["service"]?["count"] as? Int == 5 && latency["service"]?["maxNanos"] as? Int == 120_063)
        #expect(json["workers"] as? Int == 2)
    }
}
