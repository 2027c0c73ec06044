import FanoutMetrics
import FanoutPush
import FanoutReport
import Foundation
import Testing

/// report.html of `fanout push` from results made here (deterministic): byte for byte against the golden file, its
/// sections and charts, self-contained, and a verdict that follows the run (saturated, threshold broken, fine).
@Suite("PushHTML: report.html of a push folder")
struct PushReportHTMLTests {
    /// Six seconds: latencies rising in the last two, scheduleLag small, one failure, two reasons.
    static func results() -> PushResults {
        var r = PushResults()
        r.scenario = "smoke"
        r.seed = 42
        r.target = "http://127.0.0.1:2197"
        r.connections = 2
        r.streams = 100
        r.configHash = "00ff00ff00ff00ff"
        r.events = 300
        r.tokenPushes = 590
        r.broadcasts = 10
        r.maxScheduleLagNanos = 10_000_000
        r.scheduleSeconds = 5
        r.elapsedSeconds = 5.5
        r.startedAtSeconds = 1_800_000_000.25
        r.peakQueued = 3
        r.connectionEnds = ["closed by the client": 2]
        for k in 0..<6 {
            var latency = LatencyHistogram()
            var lag = LatencyHistogram()
            for i in 0..<100 {
                let slow: UInt64 = k >= 4 ? 20 : 1
                latency.record(slow * UInt64(500_000 + i * 9_000))
                lag.record(UInt64(20_000 + i * 700))
            }
            r.latency.add(latency)
            r.answeredLatency.add(latency)
            r.scheduleLag.add(lag)
            r.dispatchLag.add(lag)
            for (tag, h) in [("latency", latency), ("scheduleLag", lag)] {
                r.intervals.append(PushInterval(
                    tag: tag, startSeconds: Double(k), lengthSeconds: 1, compressed: h.encodedCompressed(),
                    maxValue: h.max))
            }
        }
        r.sent = 601
        r.submitted = 601
        r.byStatus = [200: 588, 400: 7, 413: 5]
        r.byReason = ["BadRequestPayload": 7, "PayloadTooLarge": 5]
        r.failures = ["stream reset by the server (REFUSED_STREAM)": 1]
        return r
    }

    static func thresholds(_ texts: [String]) throws -> [PushThreshold] {
        try texts.map { try PushThreshold(parsing: $0) }
    }

    static func html(_ r: PushResults, _ thresholds: [PushThreshold]) throws -> String {
        try PushHTML.render(r, gitRevision: "0123456789ab", gate: PushGate(thresholds, r))
    }

    @Test("the page is the golden file's, byte for byte, and the folder carries it")
    func golden() throws {
        let gates = try Self.thresholds(["latency.p99=50ms", "scheduleLag.p99=1ms", "failures=0", "non200=5%"])
        let html = try Self.html(Self.results(), gates)
        #expect(try Self.html(Self.results(), gates) == html, "the same results render to the same bytes")
        let files = try PushReport.files(Self.results(), gitRevision: "0123456789ab", thresholds: gates)
        #expect(files["report.html"] == html)
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Golden/push-report.html")
        if ProcessInfo.processInfo.environment["FANOUT_UPDATE_GOLDEN"] == "1" {
            try Data(html.utf8).write(to: url, options: .atomic)
        }
        let golden = try String(contentsOf: url, encoding: .utf8)
        let expected = golden.split(separator: "\n", omittingEmptySubsequences: false)
        let actual = html.split(separator: "\n", omittingEmptySubsequences: false)
        let first =
            zip(expected, actual).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            ?? min(expected.count, actual.count)
        #expect(
            golden == html,
            Comment(
                rawValue: """
                    report.html differs from Golden/push-report.html at line \(first + 1) \
                    (FANOUT_UPDATE_GOLDEN=1 swift test rewrites it):
                    expected: \(first < expected.count ? String(expected[first].prefix(200)) : "<end>")
                    actual:   \(first < actual.count ? String(actual[first].prefix(200)) : "<end>")
                    """))
    }

    @Test("its sections and charts, in order; nothing loaded, no script")
    func structure() throws {
        let html = try Self.html(Self.results(), try Self.thresholds(["latency.p99=20ms"]))
        let landmarks = [
            "<h1>fanout push: smoke → http://127.0.0.1:2197</h1>", "2 connections × 100 streams",
            "threshold broken: latency.p99=20ms", "dispatchLag p99", "streamWait p99",
            "<h2>Latency percentile spectrum</h2>",
            "Request latency and schedule lag percentile spectrum", "<h2>Over time</h2>", "Throughput over time",
            "Request latency over time", "Schedule lag over time", "<h2>Answers</h2>", "Answers by reason",
            "<h2>Connections</h2>", "<h2>Percentiles</h2>", "</html>",
        ]
        var at = html.startIndex
        for mark in landmarks {
            let found = html.range(of: mark, range: at..<html.endIndex)
            #expect(found != nil, "\(mark) missing or out of order")
            if let found { at = found.upperBound }
        }
        #expect(html.components(separatedBy: "<svg ").count - 1 == 4, "a spectrum and three charts over time")
        for forbidden in ["<script", "src=", "href=", "@import", "url("] {
            #expect(!html.contains(forbidden), "\(forbidden)")
        }
        // Six seconds of answers: one bar each, the slow seconds' p99 drawn (20 × ~1.39 ms ≈ 27.8 ms).
        #expect(html.contains("0–1: 100/s (100 values)") && html.contains("5–6: 100/s (100 values)"))
        #expect(html.contains("latency p99"))
    }

    @Test("the verdict: saturated and why (thresholds not judged), or held with every threshold met")
    func verdicts() throws {
        var saturated = Self.results()
        saturated.maxScheduleLagNanos = 1_000
        saturated.queuedAtEnd = 4
        let gates = try Self.thresholds(["latency.p99=50ms", "latency.p50=1ns"])
        let s = try Self.html(saturated, gates)
        #expect(s.contains("✗ generator saturated"))
        #expect(s.contains("<b class=\"bad\">above</b> the bound 1.00 µs"))
        #expect(s.contains("4 still queued at the end") && s.contains("exit status 3"))
        #expect(s.contains("not judged") && !s.contains("BROKEN</b></td>"))
        let fine = try Self.html(Self.results(), try Self.thresholds(["latency.p99.9=1s", "failures=1"]))
        #expect(fine.contains("✓ the generator held the schedule; every threshold met"))
        #expect(fine.contains("exit status 0"))
        #expect(!fine.contains("identities broken"))
        let broken = try Self.html(Self.results(), gates)
        #expect(broken.contains("✗ threshold broken: latency.p50=1ns") && broken.contains("exit status 2"))
        #expect(!broken.contains("latency.p99=50ms,"), "only the broken ones are named")
        // Held up by the server (requests waited for its streams), not by the generator: said so, and judged.
        var held = Self.results()
        held.streamWait.record(50_000_000)
        let limited = try Self.html(held, gates)
        #expect(limited.contains("server-limited") && !limited.contains("generator saturated"))
        #expect(limited.contains("✗ threshold broken: latency.p50=1ns") && limited.contains("exit status 2"))
        let limitedMet = try Self.html(held, try Self.thresholds(["latency.p99.9=1s"]))
        #expect(limitedMet.contains("server-limited: the server held the schedule up"))
        #expect(limitedMet.contains("exit status 0"))
    }

    @Test("a merged folder's page (fanout merge): the shards added, each second's answers, the largest start skew")
    func merged() throws {
        var a = PushMergeTests.shard(0, of: 2, latencies: [1_000_000, 2_000_000])
        var b = PushMergeTests.shard(1, of: 2, latencies: [3_000_000, 4_000_000, 5_000_000])
        a.requestedStartSeconds = 1_800_000_000
        b.requestedStartSeconds = 1_800_000_000
        a.startSkewNanos = 120_000
        b.startSkewNanos = -2_500_000
        let m = try PushMerge.merge([("a", a), ("b", b)])
        let html = try #require(try PushReport.files(m, gitRevision: nil)["report.html"])
        #expect(html.contains("merged from 2 shards"))
        #expect(html.contains("start skew -2.500 ms, the largest of the shards'"))
        // Seconds 0 and 1 hold a value of each shard, second 2 one of b's: 2, 2 and 1 answers per second.
        #expect(html.contains("0–1: 2/s (2 values)") && html.contains("1–2: 2/s (2 values)"))
        #expect(html.contains("2–3: 1/s (1 values)"))
    }
}
