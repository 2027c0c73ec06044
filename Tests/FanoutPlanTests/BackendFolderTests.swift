import FanoutMetrics
import FanoutReport
import FanoutSim
import Foundation
import Testing

@testable import FanoutPlan

/// A backend plan's step judged from its serve run folder, read through FanoutReport's `ServeFolder`.
@Suite("A backend plan step judged from a serve folder")
struct BackendFolderTests {
    /// A serve folder of `--trigger --expect-events`, as `ServeReport` writes it: 3 events, 6 expected pairs, 5
    /// delivered, 1 missing; endToEnd 100 ms in the warm-up second and 1 ms after it; a trigger answered 503 once.
    static func folder() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("backend-folder-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var info = ServeResults.Info(
            scenario: "steady", seed: 1, listen: "127.0.0.1:2197", transport: "h2c", auth: "none",
            startedAt: "2026-11-28T10:00:00Z", gitRevision: "0123456789ab")
        info.state = .none
        info.startedAtSeconds = 1_700_000_000
        var e = ServeEventsReport()
        e.t0Nanos = 1_000
        (e.events, e.dueEvents, e.expected, e.delivered, e.missing, e.correlated, e.staleAtEnd) = (3, 3, 6, 5, 1, 5, 1)
        e.missingByReason = [ServeEventsReport.neverPushed: 1]
        e.perEvent.due = [true, true, true]
        e.perEvent.delivered = [2, 2, 1]
        e.perEvent.missing = [0, 0, 1]
        for k in [\ServeEventsReport.PerEvent.superseded, \.duplicate, \.reordered, \.notApplied, \.skipped, \.wrongKind, \.wrongContent] {
            e.perEvent[keyPath: k] = [0, 0, 0]
        }
        e.perEvent.lastApplyNanos = [1_000 + 1_200_000_000, 1_000 + 1_700_000_000, 1_000 + 2_400_000_000]
        e.completion.record(.fanoutCompletion, nanos: 3_000_000)
        // Every expected pair once, the missing one censored.
        e.freshness.record(1_000_000, count: 6)
        e.freshnessCensored = 1
        info.events = e
        var t = TriggerResults()
        t.url = "http://127.0.0.1:9000/events"
        t.sent = 3
        t.byStatus = [200: 2, 503: 1]
        t.scheduleLagNanos.record(4_000_000, count: 3)
        t.responseNanos.record(2_000_000, count: 3)
        info.trigger = t
        var latency = LatencyRecorder.serve()
        var intervals: [LoggedInterval] = []
        for second in 0..<3 {
            var h = LatencyHistogram()
            h.record(second == 0 ? 100_000_000 : 1_000_000, count: 2)
            latency.add(metricIndex: ServeMetric.endToEnd.rawValue, h)
            intervals.append(
                LoggedInterval(
                    index: second, metricIndex: ServeMetric.endToEnd.rawValue,
                    startNanos: UInt64(second) * 1_000_000_000, lengthNanos: 1_000_000_000, histogram: h))
        }
        var s = ServeStats()
        for _ in 0..<5 { s.answered(200, nil) }
        s.acceptedPushes = 5
        var c = ConnectionStats()
        c[.responsesSubmitted] = 5
        var r = ServeResults(
            info: info, stats: s, accounting: .init(), latency: latency, intervals: intervals, connections: c,
            bytes: (0, 0), elapsedSeconds: 4)
        (r.accounting.pushes, r.accounting.routed, r.accounting.deliveries) = (5, 5, 5)
        r.accounting.outcomes[0] = 5
        var files = try ServeReport.files(r)
        files["events.jsonl"] = (0..<3).map { "{\"event\": \($0), \"offsetNanos\": \($0 * 500_000_000)}\n" }.joined()
        for (name, text) in files { try Data(text.utf8).write(to: dir.appendingPathComponent(name)) }
        return dir.path
    }

    static func remove(_ path: String, in folder: String) throws {
        let file = folder + "/summary.json"
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file)))
        func removed(_ value: Any, _ keys: ArraySlice<Substring>) -> Any {
            guard var o = value as? [String: Any], let key = keys.first.map(String.init) else { return value }
            o[key] = keys.count == 1 ? nil : o[key].map { removed($0, keys.dropFirst()) }
            return o
        }
        try JSONSerialization.data(withJSONObject: removed(object, path.split(separator: ".")[...]))
            .write(to: URL(fileURLWithPath: file))
    }

    static func judge(_ folder: String) throws -> Step {
        let scenario = try Scenario.parse(Array(KneeTests.scenario.utf8), file: "known-capacity.json")
        var criteria = PlanCriteria(slos: [try SLO(parsing: "endToEnd.p99<=5ms")], maxScheduleLagNanos: 10_000_000)
        criteria.counts = [try CountObjective(parsing: "missing==0")]
        return try Step.judgeFolder(
            folder, status: 0, serveLog: nil, scenario: scenario, factor: 1, warmupSeconds: 1, criteria: criteria)
    }

    @Test("the judge's counts, the trigger's, and endToEnd over the measured seconds of latency.hlog")
    func judged() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let step = try Self.judge(folder)
        let b = try #require(step.backend)
        #expect(b.expected == 6)
        #expect(b.delivered == 5)
        #expect(b[.missing] == 1)
        #expect(b[.staleAtEnd] == 1)
        #expect(b.triggerSent == 3)
        #expect(b.triggerRefusedByStatus == ["503": 1])
        #expect(b.eventsIdentitiesHold)
        #expect(step.events == 3)
        #expect(step.deliveries == 5)
        // The warm-up second's 100 ms samples are left out: 4 samples of 1 ms.
        #expect(step.endToEnd.count == 4)
        #expect(step.endToEnd.max < 2_000_000)
        #expect(step.scheduleLag.count == 3)
        #expect(step.failures.contains("missing 1 > 0"))
        #expect(step.failures.contains { $0.hasPrefix("backend refused events: 1 of 3") })
    }

    @Test(
        "a key removed from the step's summary.json is an error naming it (plan), as in fanout compare",
        arguments: ["trigger.scheduleLag", "events.fanoutCompletion.fanoutCompletion", "events.staleAtEnd",
                    "trigger.byStatus", "requests.total"])
    func missingKey(key: String) throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Self.remove(key, in: folder)
        #expect {
            try Self.judge(folder)
        } throws: { error in
            "\(error)".contains("summary.json") && "\(error)".contains("field \(key)")
        }
        if key != "requests.total" {
            #expect {
                try AnySummaryFile.read(folder)
            } throws: { error in
                "\(error)".contains("field \(key)")
            }
        }
    }
}
