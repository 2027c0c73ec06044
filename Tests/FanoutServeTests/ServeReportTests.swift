import FanoutCore
import FanoutMetrics
@testable import FanoutServe
import Foundation
import Testing

/// summary.md of `fanout serve` against a golden file, from fixed measurements (the format is what users and
/// tools read; a change to it must be deliberate: regenerate with FANOUT_UPDATE_GOLDEN=1).
@Suite("ServeReport: summary.md format (golden)")
struct ServeReportTests {
    static func fixture() -> (ServeReport.Info, ServeStats, LatencyRecorder, Accounting, ConnectionStats) {
        var info = ServeReport.Info(
            scenario: "smoke", seed: 7, listen: "127.0.0.1:2197", transport: "h2c", auth: "none",
            startedAt: "2026-11-24T10:00:00Z", gitRevision: "0123456789ab")
        info.workers = 2
        info.startedAtSeconds = 1_795_946_400.25
        var s = ServeStats()
        let answers: [(Int, APNsReason?)] = [
            (200, nil), (200, nil), (200, nil), (410, .unregistered), (400, .badDeviceToken),
        ]
        for (status, reason) in answers {
            s.answered(status, reason)
        }
        s.acceptedPushes = 3
        var latency = LatencyRecorder.serve()
        for v: UInt64 in [3_000, 4_000, 5_000, 9_000, 120_000] {
            latency.record(metricIndex: ServeMetric.service.rawValue, nanos: v)
        }
        for v: UInt64 in [20_000, 30_000, 40_000] {
            latency.record(metricIndex: ServeMetric.delivery.rawValue, nanos: v)
        }
        latency.record(metricIndex: ServeMetric.validate.rawValue, nanos: 1_500)
        latency.record(metricIndex: ServeMetric.route.rawValue, nanos: 300)
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
        return (info, s, latency, a, c)
    }

    @Test("summary.md matches the golden file")
    func summaryMarkdown() throws {
        let (info, s, latency, a, c) = Self.fixture()
        let text = ServeReport.summaryMarkdown(info, s, latency, a, c, (1234, 567), 12.5)
        #expect(try Self.golden("serve-summary.md", text))
    }

    @Test("report.html: the bounds hit and the wire identity as summary.md says them, BROKEN when it breaks")
    func htmlBoundsAndIdentity() {
        let (info, s, latency, a, fixed) = Self.fixture()
        var c = fixed
        c.requestsRefused = 16_200
        c.requestTimeouts = 5_000
        var html = ServeHTML.render(info, s, latency, a, c, (1234, 567), 12.5, seconds: [])
        #expect(html.contains("16200 requests refused (over --max-unsent-bytes), 5000 requests timed out"))
        #expect(html.contains("Answers: 5 produced = 4 submitted to nghttp2 + 1 dropped (stream already gone): holds."))
        c.answersDropped = 0
        html = ServeHTML.render(info, s, latency, a, c, (1234, 567), 12.5, seconds: [])
        #expect(html.contains("dropped (stream already gone): BROKEN."))
    }

    /// Compares `text` with a golden file (FANOUT_UPDATE_GOLDEN=1 rewrites it first).
    static func golden(_ name: String, _ text: String) throws -> Bool {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden/\(name)")
        if ProcessInfo.processInfo.environment["FANOUT_UPDATE_GOLDEN"] == "1" {
            try text.write(to: url, atomically: true, encoding: .utf8)
        }
        return try text == String(contentsOf: url, encoding: .utf8)
    }

    /// Two loops' intervals, handed over out of step: loop 1 a little late each second, loop 0 done first.
    static func measuredFixture() throws -> ServeReport.Measured {
        let m = ServeMeasurements(loops: 2, startNanos: 5_000_000_000)
        func interval(_ pairs: [(ServeMetric, UInt64)]) -> LatencyRecorder {
            var r = LatencyRecorder.serve()
            for (metric, v) in pairs { r.record(metricIndex: metric.rawValue, nanos: v) }
            return r
        }
        let s: UInt64 = 1_000_000_000
        let ms: UInt64 = 1_000_000
        let first = interval([(.service, 3_000), (.delivery, 20_000)])
        m.add(source: 0, startNanos: 5 * s, endNanos: 6 * s, first, last: false)
        m.add(source: 1, startNanos: 5 * s + 2 * ms, endNanos: 6 * s + 3 * ms, interval([(.service, 4_000)]), last: false)
        m.add(source: 0, startNanos: 6 * s, endNanos: 7 * s, interval([]), last: false)
        m.add(source: 0, startNanos: 7 * s, endNanos: 7 * s + 400 * ms, interval([(.service, 9_000)]), last: true)
        m.add(source: 1, startNanos: 6 * s + 3 * ms, endNanos: 7 * s + ms, interval([(.service, 5_000)]), last: false)
        m.add(
            source: 1, startNanos: 7 * s + ms, endNanos: 7 * s + 450 * ms,
            interval([(.service, 120_000), (.fanout, 70_000)]), last: true)
        return try m.finish()
    }

    @Test("latency.hlog: StartTime when serving began, the loops' intervals merged with real starts and lengths")
    func histogramLog() throws {
        let (info, _, _, _, _) = Self.fixture()
        let measured = try Self.measuredFixture()
        // Every sample once: the totals are the sum of the intervals.
        #expect(measured.totals[serve: .service].totalCount == 5 && measured.totals[serve: .delivery].totalCount == 1)
        #expect(measured.intervals.map(\.index) == [0, 0, 1, 2, 2])
        // Second 1: loop 0's (no sample) from 1.0 s, loop 1's to 2.001 s; the last one partial (0.45 s from 2.0).
        #expect(measured.intervals[2].startNanos == 1_000_000_000 && measured.intervals[2].lengthNanos == 1_001_000_000)
        #expect(measured.intervals[3].startNanos == 2_000_000_000 && measured.intervals[3].lengthNanos == 450_000_000)
        let text = ServeReport.histogramLog(info, measured.intervals)
        #expect(text.contains("#[StartTime: 1795946400.250 (seconds since epoch)"))
        #expect(try Self.golden("serve-latency.hlog", text))
        let rows = ServeReport.overTime(measured.intervals)
        #expect(rows.map(\.requests) == [2, 1, 2] && rows[2].serviceP99 == 120_063 && rows[0].deliveryP99 == 20_015)
    }

    @Test("summary.json carries the same counts, the identities and every finding with its examples")
    func summaryJSON() throws {
        let (info, s, recorded, a, c) = Self.fixture()
        let text = try ServeReport.summaryJSON(info, s, recorded, a, c, (1234, 567), 12.5)
        let json = try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
        let requests = json["requests"] as! [String: Any]
        #expect(requests["total"] as? Int == 5 && requests["identitiesHold"] as? Bool == true)
        // 5 answers = 4 submitted + 1 dropped; one answer unaccounted for breaks the wire identity.
        #expect(requests["wireIdentityHolds"] as? Bool == true)
        var short = c
        short.answersDropped = 0
        let broken = try JSONSerialization.jsonObject(
            with: Data(try ServeReport.summaryJSON(info, s, recorded, a, short, (1234, 567), 12.5).utf8)) as! [String: Any]
        #expect((broken["requests"] as! [String: Any])["wireIdentityHolds"] as? Bool == false)
        #expect(requests["byReason"] as? [String: Int] == ["Unregistered": 1, "BadDeviceToken": 1])
        let findings = json["findings"] as! [String: [String: Any]]
        #expect(findings["rotatedToken"]?["count"] as? Int == 1)
        #expect((findings["staleTimestamp"]?["examples"] as? [String])?.count == 1)
        let latency = json["latency"] as! [String: [String: Any]]
        #expect(latency["service"]?["count"] as? Int == 5 && latency["service"]?["maxNanos"] as? Int == 120_063)
        #expect(latency["service"]?["p9999Nanos"] as? Int == 120_063)
        #expect((json["measurement"] as? [String: Any])?["clampedSamples"] as? Int == 0)
        #expect(json["workers"] as? Int == 2)
    }
}
