import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import FanoutSim
import Foundation
import Testing

@testable import FanoutReport

@Suite("report.html")
struct HTMLReportTests {
    static let chartTitles = [
        "Stage latency percentile spectrum", "End-to-end latency percentile spectrum",
        "Fan-out completion by size percentile spectrum", "Throughput over time", "End-to-end latency over time",
        "Outcome breakdown", "Push verdicts", "Delivery outcomes", "Stage waterfall", "Percentiles per metric",
    ]

    /// A report made up in the test: deterministic values, `intervals` seconds of interval histograms.
    static func report(
        scenario: String = "synthetic", clock: String = "real", intervals: Int = 5,
        values: Bool = true, durationSeconds: Double = 5
    ) -> RunReport {
        let info = RunInfo(
            tool: "fanout", version: "0.1.0", gitRevision: "0123456789ab", scenario: scenario, seed: 42,
            configHash: "00ff00ff00ff00ff", clock: clock, workers: 2, durationSeconds: durationSeconds,
            wallSeconds: durationSeconds + 0.25, startedAtSeconds: 1_700_000_000.5,
            machine: MachineInfo(cores: 2, cpu: "Test \"CPU\" <x86>", os: "TestOS & friends"),
            timerOverheadNanos: 21.5, stageSampleEvery: 16, shard: nil, shards: 1)
        var accounting = Accounting()
        var recorder = LatencyRecorder()
        var merged: [MergedInterval] = []
        if values {
            accounting.pushes = 1000
            accounting.rejected[RejectReason.payloadTooLarge.rawValue] = 7
            accounting.unroutable[UnroutableReason.unregistered.rawValue] = 13
            accounting.routed = 980
            accounting.deliveries = 5000
            accounting.outcomes[Outcome.applied.rawValue] = 4500
            accounting.outcomes[Outcome.throttled.rawValue] = 499
            accounting.outcomes[Outcome.expired.rawValue] = 1
            accounting.requests = 10
            for n in 1...200 {
                let v = UInt64(n)
                recorder.record(.encode, nanos: 500 + v * 7)
                recorder.record(.validate, nanos: 800 + v * 11)
                recorder.record(.route, nanos: 30 + v % 5)
                recorder.record(.apply, nanos: 100 + v * v)
                recorder.record(.scheduleLag, nanos: 40 + v * v * v)
                recorder.record(.fanoutCompletion, nanos: 10_000 + v * 90_000)
                recorder.record(n % 3 == 0 ? .fanoutCompletion1 : .fanoutCompletion2to100, nanos: 10_000 + v * 90_000)
            }
            for index in 0..<intervals {
                var h = LatencyRecorder.makeHistogram()
                for n in 1...(100 + index * 37) {
                    h.record(UInt64(5_000 + n * n * (index + 1)))
                }
                recorder.add(.endToEnd, h)
                merged.append(MergedInterval(index: index, metric: .endToEnd, histogram: h))
            }
        }
        return RunReport(
            info: info, accounting: accounting, activities: 300, events: 200, recorder: recorder, intervals: merged,
            intervalNanos: clock == "virtual" ? 60_000_000_000 : 1_000_000_000, peakResidentBytes: 40 << 20,
            baselineResidentBytes: 30 << 20, completion: nil)
    }

    /// Elements that close themselves in HTML.
    static let voidElements: Set<String> = ["meta", "br", "hr", "img", "input", "link"]

    /// Every opened element closed, in order (a small check of well-formedness, not a parser).
    static func unbalancedTags(_ html: String) -> [String] {
        var stack: [String] = []
        var problems: [String] = []
        let pattern = try! Regex("<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*?(/?)>")
        for match in html.matches(of: pattern) {
            let closing = match.output[1].substring == "/"
            let name = String(match.output[2].substring ?? "").lowercased()
            let selfClosing = match.output[3].substring == "/"
            if selfClosing || Self.voidElements.contains(name) { continue }
            if closing {
                if stack.last == name {
                    stack.removeLast()
                } else {
                    problems.append("</\(name)> closes <\(stack.last ?? "nothing")>")
                }
            } else {
                stack.append(name)
            }
        }
        return problems + stack.map { "<\($0)> never closed" }
    }

    /// Numbers in SVG geometry attributes that do not parse as finite numbers.
    static func badCoordinates(_ html: String) -> [String] {
        let names = "x|y|x1|y1|x2|y2|cx|cy|r|width|height|d|viewBox|font-size|stroke-width"
        let attribute = try! Regex(#" ("# + names + #")="([^"]*)""#)
        var bad: [String] = []
        for match in html.matches(of: attribute) {
            let value = String(match.output[2].substring ?? "")
            for token in value.split(whereSeparator: { " ,MLZ".contains($0) }) {
                if let v = Double(token), v.isFinite { continue }
                if token == "100%" || token == "auto" { continue }
                bad.append("\(match.output[1].substring ?? "")=\"\(value)\"")
            }
        }
        return bad
    }

    static func expectClean(_ html: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!html.contains("NaN"), sourceLocation: sourceLocation)
        #expect(!html.contains("nan\""), sourceLocation: sourceLocation)
        #expect(!html.lowercased().contains("inf\""), sourceLocation: sourceLocation)
        #expect(!html.contains("Infinity"), sourceLocation: sourceLocation)
        #expect(badCoordinates(html) == [], sourceLocation: sourceLocation)
        #expect(unbalancedTags(html) == [], sourceLocation: sourceLocation)
        #expect(
            html.components(separatedBy: "<svg ").count == html.components(separatedBy: "</svg>").count,
            sourceLocation: sourceLocation)
    }

    @Test("a full report: every chart, balanced tags, finite coordinates, self-contained")
    func structure() {
        let html = HTMLReport.render(Self.report())
        Self.expectClean(html)
        for title in Self.chartTitles { #expect(html.contains(title), "missing \(title)") }
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        #expect(html.components(separatedBy: "<svg ").count - 1 == 6)
        #expect(html.contains("identities hold"))
        #expect(!html.contains("<script"))
        #expect(!html.replacingOccurrences(of: "xmlns=\"http://www.w3.org/2000/svg\"", with: "").contains("http"))
        #expect(!html.contains("<link"))
        #expect(!html.contains("@import"))
        for tick in ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"] { #expect(html.contains(">\(tick)</text>")) }
        #expect(html.contains("seconds of run time"))
    }

    @Test("resources over time: the chart and the soak's verdict, flat and not flat; none without samples")
    func resources() {
        var r = Self.report()
        #expect(!HTMLReport.render(r).contains("Resources over time"))
        let mib = 1_048_576
        r.resources = (0..<30).map {
            ResourceSample(
                elapsedSeconds: Double($0) * 10, residentBytes: ($0 == 0 ? 40 : 56) * mib + $0 * 1024,
                openFileDescriptors: 20)
        }
        var html = HTMLReport.render(r)
        Self.expectClean(html)
        #expect(html.contains("Resident memory over time"))
        #expect(html.contains("Resident memory: flat, 56.0 MiB after warm-up"))
        #expect(html.contains("Open file descriptors: flat, 20 after warm-up, 20 last, 20 max."))
        #expect(html.components(separatedBy: "<svg ").count - 1 == 7)
        r.resources[29].residentBytes = 70 * mib
        r.resources[29].openFileDescriptors = 21
        html = HTMLReport.render(r)
        #expect(html.contains("Resident memory: not flat"))
        #expect(html.contains("70.0 MiB max"))
        #expect(html.contains("Open file descriptors: not flat, 20 after warm-up, 21 last, 21 max."))
    }

    @Test("degenerate reports: no values, no intervals, one interval, virtual time, one value")
    func degenerate() {
        let empty = HTMLReport.render(Self.report(intervals: 0, values: false, durationSeconds: 0))
        Self.expectClean(empty)
        #expect(empty.contains("No interval histograms"))
        #expect(empty.contains("No stage times recorded"))
        Self.expectClean(HTMLReport.render(Self.report(intervals: 0)))
        Self.expectClean(HTMLReport.render(Self.report(intervals: 1, durationSeconds: 1)))
        let virtual = HTMLReport.render(Self.report(clock: "virtual", intervals: 1, durationSeconds: 60))
        Self.expectClean(virtual)
        #expect(virtual.contains("simulated minutes"))
        var one = Self.report(intervals: 1, values: false, durationSeconds: 0.5)
        one.recorder.record(.endToEnd, nanos: 0)
        one.recorder.record(.apply, nanos: LatencyRecorder.highestTrackableNanos)
        one.info.wallSeconds = 0
        Self.expectClean(HTMLReport.render(one))
        var many = Self.report(intervals: 3, durationSeconds: 10_000)
        many.intervals += (3..<1_000).map {
            MergedInterval(
                index: $0, metric: .endToEnd, bytes: many.intervals[0].bytes, summary: many.intervals[0].summary)
        }
        Self.expectClean(HTMLReport.render(many))
    }

    @Test("text from the run is escaped: a scenario named <script> stays text")
    func escaping() {
        let html = HTMLReport.render(Self.report(scenario: "<script>alert('x')</script> & \"co\""))
        #expect(!html.contains("<script"))
        #expect(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;co&quot;"))
        #expect(html.contains("Test &quot;CPU&quot; &lt;x86&gt;"))
        #expect(html.contains("TestOS &amp; friends"))
        Self.expectClean(html)
    }

    @Test("broken identities are shown as such")
    func brokenIdentities() {
        var r = Self.report()
        r.accounting.routed -= 1
        let html = HTMLReport.render(r)
        #expect(html.contains("identities BROKEN"))
        #expect(!html.contains("identities hold"))
    }

    @Test("the same report renders to the same bytes, as the golden file; run folders carry report.html")
    func golden() throws {
        let html = HTMLReport.render(Self.report())
        #expect(HTMLReport.render(Self.report()) == html)
        #expect(RunFiles.all(Self.report())["report.html"] == html)
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Golden/synthetic-report.html")
        if ProcessInfo.processInfo.environment["FANOUT_UPDATE_GOLDEN"] != nil {
            try Data(html.utf8).write(to: source)
        }
        let url = try #require(Bundle.module.resourceURL?.appendingPathComponent("Golden/synthetic-report.html"))
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
                    report.html differs from Golden/synthetic-report.html at line \(first + 1) \
                    (FANOUT_UPDATE_GOLDEN=1 swift test rewrites it):
                    expected: \(first < expected.count ? String(expected[first].prefix(200)) : "<end>")
                    actual:   \(first < actual.count ? String(actual[first].prefix(200)) : "<end>")
                    """))
    }

    @Test("axis helpers: log decades, linear ticks, number formats")
    func helpers() {
        let log = LogScale(covering: 30, 40_000, from: 300, to: 0)
        #expect(log.low == 10 && log.high == 100_000)
        #expect(log(10) == 300 && log(100_000) == 0)
        #expect(log(0) == 300 && log(.nan) == 300 && log(.infinity) == 0)
        let flat = LogScale(covering: 0, 0, from: 100, to: 0)
        #expect(flat.high > flat.low)
        let linear = LinearScale(upTo: 23, from: 0, to: 100, ticks: 5)
        #expect(linear.high == 25 && linear.ticks == [0, 5, 10, 15, 20, 25])
        let exact = LinearScale(upTo: 11, from: 0, to: 100, ticks: 10, exact: true)
        #expect(exact.high == 11 && exact.ticks.last == 10)
        let ticks = LinearScale(upTo: 0, from: 0, to: 100).ticks
        #expect(ticks.allSatisfy { $0.isFinite })
        #expect(HTMLText.coordinate(.nan) == "0" && HTMLText.coordinate(-0.01) == "0.0")
        #expect(HTMLText.tickDuration(2_000) == "2 µs" && HTMLText.tickDuration(500) == "500 ns")
        #expect(HTMLText.tickDuration(2.5e9) == "2.5 s")
        #expect(HTMLText.compact(204_589) == "205k" && HTMLText.compact(999_700) == "1M")
        #expect(HTMLText.percent(1, of: 0) == "–" && HTMLText.percent(1, of: 100_000) == "<0.01%")
    }
}
