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
        ])
    func badInput(arguments: [String], message: String) throws {
        let dir = try CLI.temporaryDirectory().appendingPathComponent("plan")
        let result = try CLI.run(["plan", "default"] + arguments + ["--out", dir.path])
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
}
