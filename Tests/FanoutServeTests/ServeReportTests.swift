import FanoutCore
import FanoutMetrics
@testable import FanoutAPNs
@testable import FanoutReport
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
        c[.accepted] = 2
        c[.closed] = 2
        c[.peakOpen] = 2
        c.endReasons = ["closed by the client (GOAWAY)": 2]
        c[.responsesSubmitted] = 4
        c[.answersDropped] = 1
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
        c[.requestsRefused] = 16_200
        c[.requestTimeouts] = 5_000
        var html = ServeHTML.render(info, s, latency, a, c, (1234, 567), 12.5, seconds: [])
        #expect(html.contains("16200 requests refused (over --max-unsent-bytes), 5000 requests timed out"))
        #expect(html.contains("Answers: 5 produced = 4 submitted to nghttp2 + 1 dropped (stream already gone): holds."))
        c[.answersDropped] = 0
        html = ServeHTML.render(info, s, latency, a, c, (1234, 567), 12.5, seconds: [])
        #expect(html.contains("dropped (stream already gone): BROKEN."))
    }

    /// A backend run's page opens with what the backend did: missing and stale deliveries, endToEnd and whether it
    /// grew, the events it accepted, the activities it registered; each sentence from this run's counts.
    @Test("report.html: the backend's verdict — missing, stale, endToEnd growing, triggers refused, registration")
    func htmlBackendVerdict() {
        let (fixed, s, fixedLatency, a, c) = Self.fixture()
        var info = fixed
        var latency = fixedLatency
        for v: UInt64 in [2_000_000, 3_000_000, 90_000_000] {
            latency.record(metricIndex: ServeMetric.endToEnd.rawValue, nanos: v)
        }
        var events = ServeEventsReport()
        events.expected = 1_000
        events.delivered = 900
        events.superseded = 50
        events.missing = 50
        events.eventsWithMissing = 4
        events.staleAtEnd = 7
        events.settleNanos = 2_000_000_000
        info.events = events
        var trigger = TriggerResults()
        trigger.url = "http://127.0.0.1:8080/trigger"
        trigger.sent = 100
        trigger.byStatus = [202: 95, 503: 3]
        trigger.timeouts = 1
        trigger.cancelledAtShutdown = 1
        trigger.waitedForSlot = 12
        trigger.scheduleLagNanos.record(40_000_000)
        info.trigger = trigger
        var registration = RegisterResults()
        registration.url = "http://127.0.0.1:8080/register"
        registration.activities = 10
        registration.registered = 8
        registration.failed = 2
        info.registration = registration
        // endToEnd p99 per second: 5 ms for four seconds, then 400 ms for four (a backlog).
        let rows = (0..<8).map { k in
            var row = ServeHTML.SecondRow(index: k, requests: 10, serviceP50: 1, serviceP99: 2, deliveryP99: 3)
            row.endToEndCount = 10
            row.endToEndP99 = k < 4 ? 5_000_000 : 400_000_000
            return row
        }
        var html = ServeHTML.render(info, s, latency, a, c, (1, 1), 8, seconds: rows)
        #expect(html.contains("50 of 1,000 expected deliveries missing</b> (5.00%, in 4 events)"), "\(html)")
        #expect(html.contains("7 followers stale at the end"))
        #expect(html.contains("endToEnd grew during the run</b>: the median of each second's endToEnd p99 was 5"))
        #expect(html.contains(
            "The backend accepted 95 of 100 events</b> (3 answered other than 2xx, 1 timed out); 1 still in flight at shutdown;"))
        #expect(html.contains("12 events waited for a free slot"))
        #expect(html.contains("2 of 10 activities not registered</b> (2 failed, 0 at the deadline)"))
        #expect(html.contains("<h2>Trigger</h2>") && html.contains("<h2>Registration</h2>"))
        #expect(html.contains("endToEnd p99 (dashed)"))
        // A healthy run says so, in the same places.
        events.missing = 0
        events.staleAtEnd = 0
        events.delivered = 950
        info.events = events
        trigger.byStatus = [202: 100]
        trigger.timeouts = 0
        trigger.cancelledAtShutdown = 0
        trigger.waitedForSlot = 0
        info.trigger = trigger
        registration.registered = 10
        registration.failed = 0
        info.registration = registration
        let steady = rows.map { r in
            var row = r
            row.endToEndP99 = 5_000_000
            return row
        }
        html = ServeHTML.render(info, s, latency, a, c, (1, 1), 8, seconds: steady)
        #expect(html.contains("No expected delivery missing</b>: all 1,000"))
        #expect(html.contains("endToEnd held steady"))
        #expect(html.contains("The backend accepted every event it answered: 100 of 100 triggers answered 2xx"))
        #expect(html.contains("Every activity registered (10)."))
        #expect(!html.contains("class=\"bad\""))
        #expect(html.contains("<b>Verdict: passed: missing=0 (0 of 1000), wrongContent=0 (0 of 1000), wrongKind=0 (0 of 1000), "
                + "unregistered=0 (0 of 10), trigger.failures=0"))
        // No backend flags: no verdict.
        html = ServeHTML.render(fixed, s, fixedLatency, a, c, (1, 1), 8, seconds: [])
        #expect(!html.contains("Through your backend"))
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
        short[.answersDropped] = 0
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
