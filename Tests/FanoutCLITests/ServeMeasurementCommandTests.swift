import Foundation
import Testing

/// `fanout serve`'s measurements end to end: a known number of requests from h2load, latency.hlog read by
/// HdrHistogram's Python reader, `fanout compare` of two runs driven alike, and a measurement failure reported.
@Suite("fanout serve measurements (h2load, HdrHistogram_py, compare)")
struct ServeMeasurementCommandTests {
    /// Per tag, the sum of the log's interval counts; the StartTime; the longest interval (seconds).
    static let hdrhScript = """
        import json, sys
        from hdrh.log import HistogramLogReader
        from hdrh.histogram import HdrHistogram
        reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600 * 10**9, 3))
        counts, longest, spans = {}, 0.0, {}
        while True:
            h = reader.get_next_interval_histogram()
            if h is None:
                break
            counts[h.get_tag()] = counts.get(h.get_tag(), 0) + h.get_total_count()
            longest = max(longest, (h.get_end_time_stamp() - h.get_start_time_stamp()) / 1000.0)
            spans.setdefault(h.get_tag(), []).append((h.get_start_time_stamp(), h.get_end_time_stamp()))
        # Intervals of one tag that start where another of it starts (one recorded twice, or two loops' records
        # not merged into one). Not overlaps: an interval swapped late ends after the next one's nominal start.
        repeats = 0
        for tag, s in spans.items():
            s.sort()
            repeats += sum(1 for a, b in zip(s, s[1:]) if b[0] == a[0])
        print(json.dumps({"counts": counts, "start": reader.get_start_time_sec(), "longest": longest,
                          "repeats": repeats, "intervals": len(spans.get("service", []))}))
        """

    /// One serve run of `n` pushes from h2load (2 connections × 10 streams); its folder and the launch time.
    static func servedRun(_ n: Int) throws -> (serve: ServeProcess, launched: Double) {
        let launched = Date().timeIntervalSince1970
        let serve = try ServeProcess(["--h2c", "--workers", "2", "--devices", "10000"])
        let p = try serve.population().first { ($0["app"] as! String) == "com.example.scores" }!
        let body = serve.directory.appendingPathComponent("payload.json")
        try livePayload(timestamp: 1_900_000_000).write(to: body, atomically: true, encoding: .utf8)
        let result = try Tool.run(
            "h2load",
            [
                "-n", String(n), "-c", "2", "-m", "10", "-d", body.path, "-H", "apns-push-type: liveactivity",
                "-H", "apns-topic: com.example.scores.push-type.liveactivity",
                "http://127.0.0.1:\(serve.port)/3/device/\(p["token"] as! String)",
            ])
        #expect(result.stdout.contains("\(n) succeeded"), "\(result.stdout)")
        #expect(serve.stop() == 0, "\(serve.stderr)")
        return (serve, launched)
    }

    @Test("h2load -n 3000 twice: latency.hlog holds each sample once per tag; compare shows every count equal")
    func eachSampleOnceAndCompare() throws {
        let n = 3000
        let (a, launched) = try Self.servedRun(n)
        let (b, _) = try Self.servedRun(n)
        for run in [a, b] {
            let summary = try run.summary()
            let latency = summary["latency"] as! [String: [String: Any]]
            let log = run.folder.appendingPathComponent("latency.hlog").path
            let read = try Tool.run("python3", ["-c", Self.hdrhScript, log])
            #expect(read.status == 0, "\(read.stderr)")
            let parsed = try JSONSerialization.jsonObject(with: Data(read.stdout.utf8)) as! [String: Any]
            let counts = parsed["counts"] as! [String: Int]
            for name in ["service", "delivery", "fanout", "validate", "route"] {
                #expect(counts[name, default: 0] == latency[name]?["count"] as? Int, "\(name)")
            }
            // One answer per request, one delivery per accepted push: exactly n, not at least.
            #expect(counts["service"] == n && counts["delivery"] == n && counts["validate"] == n)
            #expect((summary["requests"] as! [String: Any])["total"] as? Int == n)
            // Intervals one after another, none of them a second record of another (how long each lasted is the
            // sweep's business: a loaded machine makes them longer, not more).
            #expect((parsed["longest"] as! Double) > 0 && parsed["repeats"] as? Int == 0, "\(parsed)")
            #expect((parsed["intervals"] as! Int) >= 1)
            if run === a {
                // StartTime when serving began: after the population of 10,000 devices was built (about a second
                // in a debug build).
                let built = try #require(
                    a.stderr.range(of: #"built in [0-9.]+ s"#, options: .regularExpression).map {
                        Double(a.stderr[$0].split(separator: " ")[2])!
                    })
                #expect(parsed["start"] as! Double >= launched + built - 0.01, "built in \(built) s")
            }
        }
        let all = ["*.p50=off", "*.p90=off", "*.p99=off", "*.p99.9=off"].flatMap { ["--threshold", $0] }
        let compared = try CLI.run(["compare", a.folder.path, b.folder.path, "--format", "json"] + all)
        #expect(compared.status == 0, "\(compared.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(compared.stdout.utf8)) as! [String: Any]
        let rows = json["counts"] as! [[String: Any]]
        let byName = Dictionary(uniqueKeysWithValues: rows.map { ($0["name"] as! String, $0) })
        #expect(rows.count > 10 && rows.allSatisfy { ($0["baseline"] as! Int) == ($0["current"] as! Int) }, "\(rows)")
        #expect(byName["requests.total"]?["current"] as? Int == n)
        #expect(byName["latency.service.count"]?["current"] as? Int == n)
        #expect(byName["accounting.outcomes.applied"]?["current"] as? Int == 1)
        let latencyRows = json["latency"] as! [[String: Any]]
        #expect(Set(latencyRows.map { $0["metric"] as! String }) == ["service", "delivery", "validate", "route"])
        // A serve folder and a simulation run are not compared.
        let run = try CLI.temporaryDirectory().appendingPathComponent("run")
        #expect(try CLI.run(["run", "smoke", "--clock", "virtual", "--out", run.path]).status == 0)
        let mixed = try CLI.run(["compare", a.folder.path, run.path])
        #expect(mixed.status == 1 && mixed.stderr.contains("is a fanout serve folder and"), "\(mixed.stderr)")
        #expect(mixed.stderr.contains("a fanout run one: only two folders of one command"), "\(mixed.stderr)")
    }

    @Test("a measurement that cannot be stored ends serve with an error naming it, non-zero, not a crash")
    func measurementFailureReported() throws {
        let serve = try ServeProcess(["--h2c"], environment: ["TMPDIR": "/nonexistent-fanout-spool-dir"])
        let p = try serve.population().first { ($0["app"] as! String) == "com.example.scores" }!
        let answer = try curl(
            serve.port, "POST", "/3/device/\(p["token"] as! String)",
            headers: [("apns-push-type", "liveactivity"), ("apns-topic", "com.example.scores.push-type.liveactivity")],
            body: livePayload(timestamp: 1_900_000_000))
        #expect(answer.status == 200)
        let status = serve.stop()
        #expect(status == 1, "\(serve.stderr)")
        #expect(serve.stderr.contains("the measurements could not be merged or stored"), "\(serve.stderr)")
        #expect(serve.stderr.contains("interval spool"), "\(serve.stderr)")
        #expect(FileManager.default.fileExists(atPath: serve.folder.appendingPathComponent("population.jsonl").path))
    }
}
