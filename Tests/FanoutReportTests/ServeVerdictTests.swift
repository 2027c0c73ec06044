import FanoutMetrics
import Testing

@testable import FanoutReport

/// `fanout serve` judges its own run: the defaults of `--expect-events`, `--register` and `--trigger` fail closed,
/// `--threshold` adds, replaces or turns them off, and a run fanout itself held up is not judged.
@Suite struct ServeVerdictTests {
    static func info() -> ServeResults.Info {
        ServeResults.Info(
            scenario: "smoke", seed: 1, listen: "127.0.0.1:0", transport: "h2c", auth: "none", startedAt: "now",
            gitRevision: "abc")
    }

    static func events(expected: Int, missing: Int, skipped: Int = 0) -> ServeEventsReport {
        var e = ServeEventsReport()
        e.expected = expected
        e.missing = missing
        e.delivered = expected - missing
        e.skipped = skipped
        e.superseded = skipped
        e.freshness.record(3_000_000_000)
        return e
    }

    static let latency = LatencyRecorder(metricCount: ServeMetric.allCases.count)

    static func objectives(_ texts: String...) throws -> [ServeObjective] {
        try texts.map { try ServeObjective(parsing: $0) }
    }

    @Test("no objective: no verdict to fail, exit 0")
    func none() {
        let v = ServeVerdict.judge(Self.info(), latency: Self.latency, thresholds: [])
        #expect(v.status == .none && v.exitStatus == 0 && v.results.isEmpty)
    }

    @Test("--expect-events: a missing pair fails the run (exit 2) and the line names it; missing=off drops it")
    func missingFails() throws {
        var info = Self.info()
        info.events = Self.events(expected: 25_088, missing: 22_261)
        let v = ServeVerdict.judge(info, latency: Self.latency, thresholds: [])
        #expect(v.status == .failed && v.exitStatus == 2)
        #expect(v.line.hasPrefix("FAILED: missing=0 broken (measured 22261 of 25088"), "\(v.line)")
        #expect(v.markdown.hasPrefix("**Verdict: FAILED"))
        let off = ServeVerdict.judge(
            info, latency: Self.latency,
            thresholds: try Self.objectives("missing=off", "wrongContent=off", "wrongKind=off"))
        #expect(off.status == .none && off.exitStatus == 0)
        #expect(
            ServeVerdict.judge(info, latency: Self.latency, thresholds: try Self.objectives("missing=off"))
                .results.map(\.objective) == ["wrongContent=0", "wrongKind=0"], "the wrong deliveries stay judged")
        let share = ServeVerdict.judge(info, latency: Self.latency, thresholds: try Self.objectives("missing=90%"))
        #expect(share.status == .passed && share.results.map(\.objective).contains("missing=90%"), "replaces the default")
        #expect(!share.results.map(\.objective).contains("missing=0"))
        info.events = Self.events(expected: 100, missing: 0)
        #expect(ServeVerdict.judge(info, latency: Self.latency, thresholds: []).status == .passed)
    }

    @Test("skipped and freshness thresholds judge the judge's counts and histogram")
    func skippedAndFreshness() throws {
        var info = Self.info()
        info.events = Self.events(expected: 1000, missing: 0, skipped: 90)
        let t = try Self.objectives("skipped=0", "freshness.p99=500ms")
        let v = ServeVerdict.judge(info, latency: Self.latency, thresholds: t)
        #expect(v.status == .failed)
        #expect(
            v.results.map(\.met) == [true, true, true, false, false],
            "missing=0, wrongContent=0, wrongKind=0 met; skipped and freshness broken")
        let loose = ServeVerdict.judge(
            info, latency: Self.latency, thresholds: try Self.objectives("skipped=10%", "freshness.p99=5s"))
        #expect(loose.status == .passed)
    }

    @Test("no backend: registration with nothing registered fails, trigger failures fail")
    func backendDown() {
        var info = Self.info()
        var g = RegisterResults()
        g.activities = 1165
        g.failed = 1165
        info.registration = g
        var t = TriggerResults()
        t.sent = 40
        t.errors = ["Couldn't connect to server": 40]
        info.trigger = t
        let v = ServeVerdict.judge(info, latency: Self.latency, thresholds: [])
        #expect(v.status == .failed && v.exitStatus == 2)
        #expect(v.line.contains("unregistered=0 broken (measured 1165 of 1165"))
        #expect(v.line.contains("trigger.failures=0 broken (measured 40 of 40"))
    }

    @Test("a trigger that fell behind: not judged (exit 3), naming fanout's side, whatever the objectives say")
    func triggerBehind() {
        var info = Self.info()
        info.events = Self.events(expected: 10, missing: 5)
        var t = TriggerResults()
        t.sent = 10
        t.byStatus = [200: 10]
        t.unsentAtShutdown = 4
        t.concurrency = 256
        info.trigger = t
        let v = ServeVerdict.judge(info, latency: Self.latency, thresholds: [])
        #expect(v.status == .notJudged && v.exitStatus == 3)
        #expect(v.line.hasPrefix("NOT JUDGED: fanout held the run up or could not judge it — the trigger left 4 due events unsent"))
    }

    @Test("--settle reaching back to the events' start: nothing was due, so the run is not judged, never passed")
    func nothingDue() {
        var info = Self.info()
        var events = Self.events(expected: 10, missing: 0)
        events.events = 40
        events.settleNanos = 8_000_000_000
        info.events = events  // horizonNanos 0: --settle 8 on a 5-second serve (a backend sending nothing passed)
        let v = ServeVerdict.judge(info, latency: Self.latency, thresholds: [])
        #expect(v.status == .notJudged && v.exitStatus == 3, "\(v.line)")
        #expect(v.line.contains("no event was due by time: --settle (8.00 s)"), "\(v.line)")
        events.horizonNanos = 1
        info.events = events
        #expect(ServeVerdict.judge(info, latency: Self.latency, thresholds: []).status == .passed)
    }

    @Test("objectives the run does not measure fail closed; bad ones are refused with the known names")
    func failClosedAndParsing() throws {
        let v = ServeVerdict.judge(Self.info(), latency: Self.latency, thresholds: try Self.objectives("skipped=0"))
        #expect(v.status == .failed && v.results[0].measured.contains("needs --expect-events"))
        #expect(try ServeObjective(parsing: "unregistered=0").needs == "--register")
        #expect(try ServeObjective(parsing: "service.p99=5ms").needs == nil)
        #expect(throws: ComparisonError.self) { try ServeObjective(parsing: "lost=0") }
        #expect(throws: ComparisonError.self) { try ServeObjective(parsing: "missing=-1") }
        #expect(throws: ComparisonError.self) { try ServeObjective(parsing: "freshness.p42=1s") }
        #expect(throws: ComparisonError.self) { try ServeObjective(parsing: "freshness.p99=soon") }
    }
}
