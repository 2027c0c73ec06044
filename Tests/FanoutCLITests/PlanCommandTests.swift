import Foundation
import Testing

@Suite("fanout plan (the executable)")
struct PlanCommandTests {
    @Test(
        "bad SLO, target or loss text: a clear message, usage exit status 64, no plan folder",
        arguments: [
            (["--slo", "endToEnd.p99<5ms"], "--slo: SLO \"endToEnd.p99<5ms\": expected METRIC.PERCENTILE<=DURATION"),
            (["--slo", "endToEnd.p95<=5ms"], "unknown percentile \"p95\""),
            (["--slo", "endToEnd.p99<=5"], "needs a unit"),
            ([], "--slo: give at least one"),
            (["--slo", "endToEnd.p99<=5ms", "--target", "fanout=3000000"], "--target: target \"fanout=3000000\""),
            (["--slo", "endToEnd.p99<=5ms", "--max-loss", "2"], "--max-loss: expected a share from 0 to 1"),
            (["--slo", "endToEnd.p99<=5ms", "--max-workers", "0"], "--max-workers: expected 1 to 256"),
            (["--slo", "endToEnd.p99<=5ms", "--clock", "wall"], "--clock: expected virtual or real, got wall"),
            (["--slo", "missing==0"], "missing==0: counts of the end-to-end judge need --trigger"),
            (["--slo", "endToEnd.p99<=5ms", "--slo", "missing=off"], "missing=off: counts of the end-to-end judge need"),
            (["--slo", "endToEnd.p99<=5ms", "--register", "http://127.0.0.1:9/r"], "--register: only with --trigger"),
            (["--slo", "endToEnd.p99<=5ms", "--", "--h2c"], "flags after --: only with --trigger"),
            (
                ["--trigger", "http://127.0.0.1:9/t", "--slo", "missing==1"],
                "--slo: objective \"missing==1\": == takes 0 only"
            ),
            (
                ["--trigger", "http://127.0.0.1:9/t", "--slo", "apply.p99<=5ms"],
                "a plan of your backend measures endToEnd"
            ),
            (
                ["--trigger", "http://127.0.0.1:9/t", "--slo", "endToEnd.p99<=5ms", "--target", "fanout=9 within=1s"],
                "--target: a backend's scaling is not measured"
            ),
            (
                ["--trigger", "http://127.0.0.1:9/t", "--slo", "endToEnd.p99<=5ms", "--max-loss", "1%"],
                "--max-loss: with --trigger use --slo \"missing<=0.1%\""
            ),
            (
                ["--trigger", "http://127.0.0.1:9/t", "--slo", "endToEnd.p99<=5ms", "--", "--h2c", "--duration=3"],
                "--duration after --: each step sets it"
            ),
        ])
    func badInput(arguments: [String], message: String) throws {
        let dir = try CLI.temporaryDirectory().appendingPathComponent("plan")
        let result = try CLI.run(["plan", "default", "--out", dir.path] + arguments)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path))
    }

    /// On the cost model (`--clock virtual`): the steps, the knee and the files are the same on any machine.
    @Test("a short plan of a known-capacity scenario writes plan.json, plan.md and plan.html")
    func shortPlan() throws {
        let dir = try CLI.temporaryDirectory()
        let scenario = dir.appendingPathComponent("capacity.json")
        try Data(
            """
            {"name": "capacity", "durationSeconds": 1,
             "population": {"devices": 20, "activitiesPerDevice": {"min": 1, "max": 1}},
             "apps": [{"bundle": "com.x", "schema": "S"}], "schemas": {"S": {"n": "int"}},
             "sources": {"count": 1, "broadcastShare": 1},
             "arrival": {"process": "constant", "ratePerSecond": 50}, "costNanosPerDelivery": 500000}
            """.utf8
        ).write(to: scenario)
        let out = dir.appendingPathComponent("plan")
        let result = try CLI.run([
            "plan", scenario.path, "--slo", "endToEnd.p99<=500ms", "--max-workers", "1",
            "--step-seconds", "0.5", "--max-step-seconds", "0.5", "--precision", "1.5",
            "--max-schedule-lag", "200ms", "--target", "fanout=1000 within=100ms",
            "--clock", "virtual", "--out", out.path,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("virtual time"), "\(result.stderr)")
        #expect(result.stderr.contains("plan 1w step 1  ×1"), "\(result.stderr)")
        #expect(result.stdout.contains("Knee: ×"), "\(result.stdout)")
        let files = Set(try FileManager.default.contentsOfDirectory(atPath: out.path))
        #expect(files == ["plan.json", "plan.md", "plan.html"])
        let json =
            try JSONSerialization.jsonObject(with: Data(contentsOf: out.appendingPathComponent("plan.json")))
            as! [String: Any]
        // 20 deliveries of 500 µs per event: 2,000 deliveries/s, factor 2 (50 events/s at factor 1); with
        // --precision 1.5 the search stops at a pass ×2 and a fail ×2.83.
        let knee = try #require(json["knee"] as? [String: Any])
        #expect(knee["workers"] as? Int == 1 && knee["factor"] as? Double == 2)
        let rate = try #require(knee["deliveriesPerSecond"] as? Double)
        #expect(abs(rate - 2000) / 2000 < 0.10, "knee \(rate) deliveries/s")
        let method = try #require(json["method"] as? [String: Any])
        #expect((method["steady"] as? String)?.contains("virtual time") == true)
        #expect((json["prediction"] as? [String: Any])?["requiredPerSecond"] as? Int == 10_000)
    }

    /// A backend that accepts every event (200) and pushes nothing: each step is a real fanout serve run whose judge
    /// finds every expected delivery missing.
    /// `missing==0` is not given: with --trigger it is judged by default.
    @Test("--trigger: a backend that accepts events and pushes nothing fails every step on missing; exit 2, all written")
    func backendPushesNothing() throws {
        let backend = try TriggerBackend("h1")
        let out = try CLI.temporaryDirectory().appendingPathComponent("plan")
        let result = try CLI.run([
            "plan", "smoke", "--trigger", backend.url, "--slo", "endToEnd.p99<=1s",
            "--step-seconds", "1", "--max-step-seconds", "1", "--settle", "0.5", "--start-factor", "0.5",
            "--max-factor", "0.5", "--precision", "2", "--repeats", "2", "--out", out.path,
            "--", "--h2c", "--listen", "127.0.0.1:0", "--workers", "1",
        ])
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stdout.contains("No rate met every objective through the backend"), "\(result.stdout)")
        #expect(result.stderr.contains("[run 2 of 2]") && result.stderr.contains("the median of 2 runs"), "\(result.stderr)")
        #expect(result.stderr.contains("plan backend step 1  ×0.5"), "\(result.stderr)")
        let json =
            try JSONSerialization.jsonObject(with: Data(contentsOf: out.appendingPathComponent("plan.json")))
            as! [String: Any]
        #expect(json["knee"] is NSNull)
        let search = try #require((json["searches"] as? [[String: Any]])?.first)
        let steps = try #require(search["steps"] as? [[String: Any]])
        #expect(steps.count >= 2, "\(steps)")  // ×0.5, ×0.25, … down to the lowest factor
        let criteria = try #require(json["criteria"] as? [String: Any])
        #expect(
            (criteria["counts"] as? [String]).map { Set(["missing==0", "wrongContent==0", "wrongKind==0"]).isSubset(of: $0) }
                == true, "the defaults: \(criteria)")
        for step in steps {
            #expect((step["runs"] as? [Any])?.count == 2, "each step run twice and judged on the median")
            let failures = step["failures"] as? [String] ?? []
            #expect(failures.contains { $0.hasPrefix("missing ") && $0.hasSuffix(" > 0") }, "\(failures)")
        }
        let first = steps[0]
        let failures = first["failures"] as? [String] ?? []
        #expect(failures.contains("endToEnd.p99: no samples"), "\(failures)")
        let measures = try #require(first["backend"] as? [String: Any])
        let trigger = try #require(measures["trigger"] as? [String: Any])
        let sent = trigger["sent"] as? Int ?? 0
        #expect(sent > 0 && trigger["succeeded"] as? Int == sent, "\(trigger)")
        let counts = try #require(measures["counts"] as? [String: Int])
        #expect(counts["missing"] == measures["expected"] as? Int && (counts["missing"] ?? 0) > 0, "\(measures)")
        // Each step's files: its scenario (× its factor) and the serve's whole run folder; the events went to the backend.
        let folder = try #require(measures["folder"] as? String)
        #expect(FileManager.default.fileExists(atPath: folder + "/summary.json"))
        #expect(FileManager.default.fileExists(atPath: folder + "/../scenario.json"))
        #expect(try backend.requests().filter { ($0["path"] as? String) == "/trigger" }.count >= sent)
        for name in ["plan.md", "plan.html"] {
            #expect(CLI.text(of: out.appendingPathComponent(name)).contains("missing"))
        }
    }
}
