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
        ])
    func badInput(arguments: [String], message: String) throws {
        let dir = try CLI.temporaryDirectory().appendingPathComponent("plan")
        let result = try CLI.run(["plan", "default"] + arguments + ["--out", dir.path])
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path))
    }

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
            "--out", out.path,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("plan 1w step 1  ×1"), "\(result.stderr)")
        #expect(result.stdout.contains("Knee: ×"), "\(result.stdout)")
        let files = Set(try FileManager.default.contentsOfDirectory(atPath: out.path))
        #expect(files == ["plan.json", "plan.md", "plan.html"])
        let json =
            try JSONSerialization.jsonObject(with: Data(contentsOf: out.appendingPathComponent("plan.json")))
            as! [String: Any]
        #expect((json["knee"] as? [String: Any])?["workers"] as? Int == 1)
        #expect((json["prediction"] as? [String: Any])?["requiredPerSecond"] as? Int == 10_000)
    }
}
