import Foundation
import Testing

@Suite("fanout compare and fanout merge (the executable)", .serialized)
struct CompareMergeCommandTests {
    /// A copy of a run's summary.json with every latency value multiplied by `factor`.
    func scaled(_ summary: URL, by factor: Double, into dir: URL) throws -> URL {
        var root = try JSONSerialization.jsonObject(with: Data(contentsOf: summary)) as! [String: Any]
        var latency = root["latency"] as! [String: [String: Any]]
        for (metric, var values) in latency {
            for key in ["p50", "p90", "p99", "p999", "p9999", "max"] {
                values[key] = Int((Double(values[key] as! Int) * factor).rounded())
            }
            latency[metric] = values
        }
        root["latency"] = latency
        let url = dir.appendingPathComponent("scaled-\(factor).json")
        try JSONSerialization.data(withJSONObject: root, options: [.sortedKeys]).write(to: url)
        return url
    }

    @Test("compare exit codes: equal 0, worse 2, better 4, unknown metric or percentile 1")
    func exitCodes() throws {
        let dir = try CLI.temporaryDirectory()
        let run = dir.appendingPathComponent("run")
        #expect(try CLI.run(["run", "smoke", "--duration", "20", "--out", run.path]).status == 0)
        let summary = run.appendingPathComponent("summary.json")

        let equal = try CLI.run(["compare", run.path, summary.path])
        #expect(equal.status == 0, "\(equal.stdout)\(equal.stderr)")
        #expect(equal.stdout.contains("result: ok"))
        #expect(equal.stdout.contains("virtual time, same seed and configuration: counts must match exactly"))

        let worse = try CLI.run(["compare", run.path, try scaled(summary, by: 1.5, into: dir).path])
        #expect(worse.status == 2, "\(worse.stdout)")
        #expect(worse.stdout.contains("REGRESSION") && worse.stdout.contains("result: regression"))

        let better = try CLI.run([
            "compare", run.path, try scaled(summary, by: 0.5, into: dir).path, "--format", "json",
        ])
        #expect(better.status == 4, "\(better.stdout)")
        let json = try JSONSerialization.jsonObject(with: Data(better.stdout.utf8)) as! [String: Any]
        #expect(json["result"] as? String == "improvement")

        let loose = try CLI.run([
            "compare", run.path, try scaled(summary, by: 1.5, into: dir).path,
            "--threshold", "*.p50=+60%", "--threshold", "*.p90=+60%", "--threshold", "*.p99=+60%",
            "--threshold", "*.p99.9=+60%", "--format", "markdown",
        ])
        #expect(loose.status == 0, "\(loose.stdout)")
        #expect(loose.stdout.hasPrefix("# fanout compare"))

        let metric = try CLI.run(["compare", run.path, summary.path, "--threshold", "endToEnd2.p99=+5%"])
        #expect(metric.status == 1 && metric.stderr.contains("unknown metric \"endToEnd2\""), "\(metric.stderr)")
        let percentile = try CLI.run(["compare", run.path, summary.path, "--threshold", "endToEnd.p95=+5%"])
        #expect(percentile.status == 1 && percentile.stderr.contains("unknown percentile"), "\(percentile.stderr)")
        // events.COUNT=off is for fanout serve folders: two fanout run folders have no events to ungate.
        let count = try CLI.run(["compare", run.path, summary.path, "--threshold", "events.missing=off"])
        #expect(
            count.status == 1 && count.stderr.contains("events counts are judged in fanout serve runs only"),
            "\(count.stderr)")
        let missing = try CLI.run(["compare", run.path, dir.appendingPathComponent("nothing").path])
        #expect(missing.status == 1 && missing.stderr.contains("nothing: no such file or folder"), "\(missing.stderr)")
    }

    @Test("run --shard K/N twice, merge: the merged folder's counts equal the whole run's (compare exits 0)")
    func shardAndMerge() throws {
        let dir = try CLI.temporaryDirectory()
        let whole = dir.appendingPathComponent("whole")
        let merged = dir.appendingPathComponent("merged")
        #expect(try CLI.run(["run", "smoke", "--duration", "20", "--out", whole.path]).status == 0)
        var shards: [String] = []
        for k in 0..<2 {
            let folder = dir.appendingPathComponent("shard-\(k)")
            let result = try CLI.run(["run", "smoke", "--duration", "20", "--shard", "\(k)/2", "--out", folder.path])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("completion.tsv").path))
            shards.append(folder.path)
        }
        let merge = try CLI.run(["merge"] + shards + ["--out", merged.path])
        #expect(merge.status == 0, "\(merge.stderr)")
        let files = Set(try FileManager.default.contentsOfDirectory(atPath: merged.path))
        #expect(files.isSuperset(of: ["summary.json", "summary.md", "latency.hlog", "endToEnd.hgrm"]))
        let a =
            try JSONSerialization.jsonObject(with: Data(contentsOf: whole.appendingPathComponent("summary.json")))
            as! [String: Any]
        let b =
            try JSONSerialization.jsonObject(with: Data(contentsOf: merged.appendingPathComponent("summary.json")))
            as! [String: Any]
        #expect(
            NSDictionary(dictionary: a["counts"] as! [String: Any])
                == NSDictionary(dictionary: b["counts"] as! [String: Any]))
        let bad = try CLI.run(["merge", shards[0], "--out", dir.appendingPathComponent("bad").path])
        #expect(bad.status == 5 && bad.stderr.contains("missing shard 1/2"), "\(bad.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("bad").path))
        let flag = try CLI.run(["run", "smoke", "--shard", "2/2"])
        #expect(flag.status == 64 && flag.stderr.contains("--shard: K must be from 0 to 1, got 2"), "\(flag.stderr)")
    }
}
