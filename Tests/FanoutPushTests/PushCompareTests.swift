import FanoutMetrics
import FanoutPush
import FanoutReport
import Foundation
import Testing

/// `fanout compare` of two push folders: summary.json as `PushReport` writes it, read back by FanoutReport, judged.
@Suite("fanout compare of push runs")
struct PushCompareTests {
    /// A push folder's summary.json: `PushThresholdTests`' results, latencies `scale` times slower, with `more`
    /// failures of `kind` and `reason` answers (in place of 200s: the identity still holds).
    static func write(
        scale: UInt64 = 1, more: Int = 0, kind: String = "reset", reason: String? = nil, saturated: Bool = false,
        seed: UInt64 = 7
    ) throws -> String {
        var r = PushThresholdTests.results(latencies: [])
        r.scenario = "smoke"
        r.seed = seed
        r.target = "http://127.0.0.1:1"
        r.configHash = "c0"
        for v: UInt64 in [1_000_000, 1_100_000, 1_200_000, 1_300_000, 9_000_000] {
            r.latency.record(v * scale)
            r.scheduleLag.record(v / 100)
        }
        if saturated { r.dispatchLag.record(r.maxScheduleLagNanos * 2) }
        r.failures[kind, default: 0] += more
        r.byStatus[200, default: 0] -= more
        if let reason {
            r.byReason[reason, default: 0] += 1
            r.byStatus[200, default: 0] -= 1
            r.byStatus[503, default: 0] += 1
        }
        #expect(r.identityHolds)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-push-cmp-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let files = try PushReport.files(r, gitRevision: "abc")
        try files["summary.json"]!.write(
            to: directory.appendingPathComponent("summary.json"), atomically: true, encoding: .utf8)
        return directory.path
    }

    static func read(_ path: String) throws -> PushSummaryFile {
        guard case .push(let s) = try AnySummaryFile.read(path) else {
            throw ReportReadError(file: path, "not read as a push summary")
        }
        return s
    }

    static func compare(_ b: String, _ c: String, _ extra: [String] = []) throws -> Comparison {
        let thresholds = try Comparison.defaultThresholds + extra.map { try Comparison.Threshold(parsing: $0) }
        return Comparison(baseline: try Self.read(b), current: try Self.read(c), thresholds: thresholds)
    }

    @Test("read back: counts by status, reason and failure kind; latency and scheduleLag; not saturated")
    func readBack() throws {
        let s = try Self.read(try Self.write())
        #expect(s.counts["requests.sent"] == 200 && s.counts["requests.byStatus.200"] == 190)
        #expect(s.counts["requests.byReason.InternalServerError"] == 1 && s.counts["requests.failures.reset"] == 2)
        #expect(s.latency["latency"]?.count == 5 && s.latency["scheduleLag"]?.count == 5)
        #expect(s.saturation == nil && s.identityHolds)
        let saturated = try Self.read(try Self.write(saturated: true))
        #expect(saturated.saturation?.contains("dispatchLag p99") == true, "\(saturated.saturation ?? "nil")")
    }

    @Test("the same run twice: exit 0, every percentile unchanged, counts equal and judged ok")
    func same() throws {
        let c = try Self.compare(try Self.write(), try Self.write())
        #expect(c.exitCode == 0)
        #expect(Set(c.rows.map(\.metricName)) == ["latency", "scheduleLag"])
        #expect(c.rows.allSatisfy { $0.deltaPercent == 0 })
        #expect(c.counts.contains { $0.name == "requests.failed" && $0.verdict == .ok })
        #expect(c.counts.contains { $0.name == "requests.byReason.BadRequestPayload" && $0.verdict == .ok })
    }

    @Test("slower latency beyond the thresholds: exit 2; the reverse: improvements only, exit 4")
    func slower() throws {
        let a = try Self.write()
        let b = try Self.write(scale: 2)
        let c = try Self.compare(a, b)
        #expect(c.exitCode == 2)
        #expect(c.rows.contains { $0.metricName == "latency" && $0.percentile == .p50 && $0.verdict == .regression })
        #expect(c.rows.allSatisfy { $0.metricName != "scheduleLag" || $0.verdict != .regression })
        #expect(try Self.compare(b, a).exitCode == 4)
        // A named threshold replaces the default: latency.p50 allowed +150%, p90 ... off.
        let loose = try Self.compare(
            a, b, ["latency.p50=+150%", "latency.p90=off", "latency.p99=off", "latency.p99.9=off"])
        #expect(loose.exitCode == 0)
    }

    @Test("more failures, a new failure kind or a new answer reason: a regression whatever the latency")
    func failures() throws {
        let a = try Self.write()
        let more = try Self.compare(a, try Self.write(more: 1))
        #expect(more.exitCode == 2)
        #expect(more.counts.contains { $0.name == "requests.failed" && $0.verdict == .regression })
        let kind = try Self.compare(a, try Self.write(more: 1, kind: "GOAWAY"))
        #expect(kind.counts.contains { $0.name == "requests.failures.GOAWAY" && $0.verdict == .regression })
        let reason = try Self.compare(a, try Self.write(reason: "ServiceUnavailable", seed: 8))
        #expect(reason.exitCode == 2)
        #expect(
            reason.counts.contains { $0.name == "requests.byReason.ServiceUnavailable" && $0.verdict == .regression })
        // Fewer failures than the baseline: fine.
        #expect(try Self.compare(try Self.write(more: 1), a).exitCode == 0)
    }
}
