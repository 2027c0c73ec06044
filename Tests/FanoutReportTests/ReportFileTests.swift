import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import FanoutSim
import Foundation
import Testing

@testable import FanoutReport

@Suite("Run folder files")
struct ReportFileTests {
    @Test("summary.md matches its golden file")
    func summaryMarkdownGolden() throws {
        let text = SummaryMarkdown.text(Fixture.report())
        #expect(try Fixture.matchesGolden(text, "summary.md"), "summary.md differs from Golden/summary.md:\n\(text)")
    }

    @Test(".hgrm (HdrHistogram's percentile distribution in µs) matches its golden file")
    func hgrmGolden() throws {
        let text = RunFiles.percentileDistribution(Fixture.report(), .endToEnd)
        #expect(try Fixture.matchesGolden(text, "endToEnd.hgrm"), "endToEnd.hgrm differs:\n\(text)")
        #expect(text.contains("       Value     Percentile TotalCount 1/(1-Percentile)"))
        #expect(text.contains("#[Mean    ="))
        #expect(text.contains("#[Buckets ="))
    }

    @Test("summary.json matches its golden file and reads back to the same report")
    func summaryJSONRoundTrip() throws {
        let report = Fixture.report()
        let text = SummaryJSON.text(report)
        #expect(try Fixture.matchesGolden(text, "summary.json"), "summary.json differs:\n\(text)")
        let dir = try Fixture.temporaryDirectory()
        let path = dir.appendingPathComponent("summary.json").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let back = try SummaryFile.read(path)
        #expect(back.info == report.info)
        #expect(back.accounting == report.accounting)
        #expect(back.activities == report.activities && back.events == report.events)
        for metric in Metric.allCases {
            let l = LatencySummary(report[metric])
            #expect(back.latency[metric]?.p99 == l.p99 && back.latency[metric]?.count == l.count, "\(metric.name)")
        }
    }

    @Test("a run folder written and read back holds the same counts, histograms and intervals")
    func folderRoundTrip() throws {
        let report = Fixture.report()
        let dir = try Fixture.temporaryDirectory().appendingPathComponent("run")
        try RunFiles.write(folder: dir.path, files: RunFiles.all(report))
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        #expect(names.isSuperset(of: ["summary.json", "summary.md", "latency.hlog", "endToEnd.hgrm"]))
        #expect(!names.contains(CompletionFile.name), "only a shard writes completion.tsv")
        let back = try RunFolderReader.read(dir.path)
        #expect(back.accounting == report.accounting)
        for metric in Metric.allCases {
            #expect(back[metric] == report[metric], "\(metric.name)")
        }
        #expect(back.intervals.map(\.index) == report.intervals.map(\.index))
        #expect(back.intervals.map(\.metric) == report.intervals.map(\.metric))
        #expect(back.intervalNanos == report.intervalNanos)
    }

    @Test("bad summary.json: the file and the field are named")
    func badSummary() throws {
        let dir = try Fixture.temporaryDirectory()
        let path = dir.appendingPathComponent("summary.json").path
        var text = SummaryJSON.text(Fixture.report())
        text = text.replacingOccurrences(of: "\"deliveries\": 5000", with: "\"deliveries\": \"many\"")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: ReportReadError(file: path, "field counts.deliveries: expected a whole number")) {
            try SummaryFile.read(path)
        }
        try "{\"schema\": 1,".write(toFile: path, atomically: true, encoding: .utf8)
        do {
            _ = try SummaryFile.read(path)
            Issue.record("truncated JSON was accepted")
        } catch {
            #expect(error.file == path && error.message.hasPrefix("not valid JSON"))
        }
        #expect(throws: ReportReadError(file: dir.appendingPathComponent("none").path, "no such file or folder")) {
            try SummaryFile.read(dir.appendingPathComponent("none").path)
        }
    }

    @Test("a latency.hlog that disagrees with summary.json is refused")
    func inconsistentFolder() throws {
        let report = Fixture.report()
        let dir = try Fixture.temporaryDirectory().appendingPathComponent("run")
        var files = RunFiles.all(report)
        let lines = files["latency.hlog"]!.split(separator: "\n").filter { !$0.hasPrefix("Tag=apply,60") }
        files["latency.hlog"] = lines.joined(separator: "\n") + "\n"
        try RunFiles.write(folder: dir.path, files: files)
        do {
            _ = try RunFolderReader.read(dir.path)
            Issue.record("accepted a log missing an interval")
        } catch {
            #expect(error.message.contains("apply: the intervals hold 500 values, summary.json says 1000"), "\(error)")
        }
    }

    @Test("Units: durations and grouped numbers")
    func units() {
        #expect(Units.duration(812) == "812 ns")
        #expect(Units.duration(3_410) == "3.41 µs")
        #expect(Units.duration(12_500_000) == "12.5 ms")
        #expect(Units.duration(1_200_000_000) == "1.20 s")
        #expect(Units.grouped(1_234_567) == "1,234,567")
        #expect(Units.grouped(999) == "999")
    }
}
