import FanoutHistogramLog
import Foundation
import Testing

@Suite("fanout run (the executable)")
struct RunCommandTests {
    @Test("a run folder holds summary.json and .md, report.html, latency.hlog, one .hgrm per metric; they agree")
    func runFolder() throws {
        let dir = try CLI.temporaryDirectory().appendingPathComponent("run")
        let result = try CLI.run(["run", "smoke", "--out", dir.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("identities  hold"))
        let files = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        for name in [
            "summary.json", "summary.md", "report.html", "latency.hlog", "endToEnd.hgrm", "apply.hgrm",
            "scheduleLag.hgrm", "fanoutCompletion.hgrm",
        ] {
            #expect(files.contains(name), "\(name) missing from \(files.sorted())")
        }
        #expect(!files.contains { $0.hasPrefix(".") || $0.contains("tmp") }, "leftover temporary files: \(files)")
        let summary =
            try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("summary.json")))
            as! [String: Any]
        let latency = summary["latency"] as! [String: [String: Any]]
        // Both summaries state how long the run folder took to render (summary.md once forgot it).
        let measurement = summary["measurement"] as! [String: Any]
        #expect((measurement["reportSeconds"] as? Double ?? 0) > 0)
        let markdown = try String(contentsOf: dir.appendingPathComponent("summary.md"), encoding: .utf8)
        #expect(markdown.contains("s to render") && !markdown.contains("| 0.000 s to render"))
        let hgrm = try String(contentsOf: dir.appendingPathComponent("endToEnd.hgrm"), encoding: .utf8)
        #expect(hgrm.hasPrefix("#[fanout endToEnd (smoke"))
        #expect(hgrm.contains("values in microseconds"))
        #expect(hgrm.contains("#[Max     ="))
        // The intervals of each metric add up to the run's totals (histograms are added, not averaged).
        let log = try String(contentsOf: dir.appendingPathComponent("latency.hlog"), encoding: .utf8)
        #expect(log.hasPrefix("#[Histogram log format version 1.3]\n#[StartTime: "))
        var totals: [String: UInt64] = [:]
        for interval in try HistogramLogReader.read(log) {
            totals[interval.tag ?? "", default: 0] += try interval.histogram().totalCount
        }
        for metric in ["encode", "validate", "route", "apply", "endToEnd", "fanoutCompletion", "scheduleLag"] {
            let count = latency[metric]?["count"] as? Int ?? -1
            #expect(
                count > 0 && totals[metric] == UInt64(count), "\(metric): log \(totals[metric] ?? 0), summary \(count)")
        }
    }

    @Test("--state: the final state dump is the same bytes from 1 and 3 workers; its totals are the summary's counts")
    func stateDump() throws {
        let dir = try CLI.temporaryDirectory()
        var dumps: [String] = []
        for workers in ["1", "3"] {
            let state = dir.appendingPathComponent("state-\(workers).jsonl")
            let out = dir.appendingPathComponent("run-\(workers)")
            let result = try CLI.run([
                "run", "smoke", "--duration", "20", "--workers", workers, "--out", out.path, "--state", state.path,
            ])
            #expect(result.status == 0, "\(result.stderr)")
            dumps.append(try String(contentsOf: state, encoding: .utf8))
            let summary =
                try JSONSerialization.jsonObject(with: Data(contentsOf: out.appendingPathComponent("summary.json")))
                as! [String: Any]
            let counts = summary["counts"] as! [String: Any]
            let last = try JSONSerialization.jsonObject(with: Data(dumps.last!.split(separator: "\n").last!.utf8))
            let totals = (last as! [String: Any])["totals"] as! [String: Any]
            #expect(totals["pushes"] as? Int == counts["pushes"] as? Int)
            #expect(totals["deliveries"] as? Int == counts["deliveries"] as? Int)
        }
        // One line per activity and device (smoke: 500 devices), sorted, then the totals.
        let lines = dumps[0].split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("{\"device\": ") }.count == 500)
        #expect(lines.filter { $0.hasPrefix("{\"activity\": ") }.count > 500)
        #expect(dumps[0] == dumps[1])
    }

    @Test("a bad scenario file: file, line and field on stderr, exit 1, no run folder")
    func badScenario() throws {
        let dir = try CLI.temporaryDirectory()
        let scenario = dir.appendingPathComponent("bad.json")
        try "{\n  \"name\": \"x\",\n  \"durationSeconds\": -5\n}\n".write(
            to: scenario, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("run")
        let result = try CLI.run(["run", scenario.path, "--out", out.path])
        #expect(result.status == 1)
        #expect(result.stderr.contains("bad.json:3: field durationSeconds: -5.0 is out of range"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }

    @Test("bad flags are usage errors naming the flag")
    func badFlags() throws {
        let workers = try CLI.run(["run", "smoke", "--workers", "-3"])
        #expect(workers.status == 64 && workers.stderr.contains("--workers"), "\(workers.stderr)")
        let clock = try CLI.run(["run", "smoke", "--clock", "wall"])
        #expect(clock.status == 64 && clock.stderr.contains("--clock: expected virtual or real"), "\(clock.stderr)")
        let unknown = try CLI.run(["run", "nonesuch"])
        #expect(unknown.status == 64 && unknown.stderr.contains("no built-in scenario or file named \"nonesuch\""))
    }
}

@Suite("fanout run in virtual time repeats (the executable)")
struct RunRepeatsTests {
    /// summary.json without what follows the wall clock or the machine.
    static func stable(_ dir: URL) throws -> [String: Any] {
        var s =
            try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("summary.json")))
            as! [String: Any]
        var run = s["run"] as! [String: Any]
        for key in ["wallSeconds", "startedAt", "machine", "timerOverheadNanos", "gitRevision"] { run[key] = nil }
        s["run"] = run
        var measurement = s["measurement"] as! [String: Any]
        for key in ["finalMergeSeconds", "reportSeconds"] { measurement[key] = nil }
        s["measurement"] = measurement
        for key in ["throughput", "memory", "resources"] { s[key] = nil }
        return s
    }

    @Test("two runs of smoke: summary.json equal but for wall-clock fields, latency.hlog equal but its start time")
    func twice() throws {
        let a = try CLI.temporaryDirectory().appendingPathComponent("a")
        let b = try CLI.temporaryDirectory().appendingPathComponent("b")
        #expect(try CLI.run(["run", "smoke", "--workers", "2", "--out", a.path]).status == 0)
        #expect(try CLI.run(["run", "smoke", "--workers", "2", "--out", b.path]).status == 0)
        let sa = try Self.stable(a)
        let sb = try Self.stable(b)
        #expect(NSDictionary(dictionary: sa).isEqual(to: sb), "\(sa)\n\(sb)")
        func log(_ dir: URL) throws -> [Substring] {
            try String(contentsOf: dir.appendingPathComponent("latency.hlog"), encoding: .utf8)
                .split(separator: "\n").filter { !$0.hasPrefix("#[StartTime") }
        }
        let la = try log(a)
        let lb = try log(b)
        #expect(la.count > 10 && la == lb)
        for name in ["endToEnd.hgrm", "fanoutCompletion.hgrm", "apply.hgrm"] {
            let x = try String(contentsOf: a.appendingPathComponent(name), encoding: .utf8)
            let y = try String(contentsOf: b.appendingPathComponent(name), encoding: .utf8)
            #expect(x == y, "\(name)")
        }
    }
}
