import Foundation
import Testing

/// `fanout push --threshold` and `fanout compare` of push folders, against `fanout serve smoke --h2c` (started here
/// on 127.0.0.1): report.html written, a threshold met (0) or broken (2), a saturated run 3 whatever its thresholds;
/// two push folders compared (same 0, slower 2, faster 4), a saturated one refused (3), a serve folder refused (1).
@Suite("fanout push --threshold, fanout compare of push folders")
struct PushGateCommandTests {
    static func push(_ port: Int, _ out: URL, _ extra: [String]) throws -> CLI.Result {
        try CLI.run(
            ["push", "http://127.0.0.1:\(port)", "smoke", "--duration", "2", "--drain", "3", "--out", out.path] + extra)
    }

    static func text(_ folder: URL, _ name: String) throws -> String {
        try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
    }

    @Test("thresholds met: exit 0; one broken: exit 2, named in stderr, summary.md and summary.json; saturated: 3")
    func thresholds() throws {
        let dir = try CLI.temporaryDirectory()
        let serve = try ServeProcess(["--h2c"])
        defer { _ = serve.stop() }
        // Timing is not what is tested here: a loaded machine (the suite runs in parallel) must not saturate it.
        let lag = ["--max-schedule-lag", "5000"]
        let met = dir.appendingPathComponent("met")
        let ok = try Self.push(
            serve.port, met, lag + ["--threshold", "latency.p99=60s", "--threshold", "failures=0",
                "--threshold", "non200=10%"])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stderr.contains("threshold latency.p99=60s met"), "\(ok.stderr)")
        let html = try Self.text(met, "report.html")
        #expect(html.hasPrefix("<!DOCTYPE html>") && html.contains("every threshold met") && !html.contains("<script"))
        #expect(html.contains("Request latency over time") && html.contains("Answers by reason"))
        let summary = try JSONSerialization.jsonObject(with: Data(try Self.text(met, "summary.json").utf8))
            as! [String: Any]
        #expect(summary["exitCode"] as? Int == 0 && summary["streams"] as? Int == 1000)
        let gate = summary["thresholds"] as! [String: Any]
        #expect(gate["judged"] as? Bool == true && gate["broken"] as? Int == 0)
        #expect((gate["results"] as! [[String: Any]]).count == 3)

        let broken = dir.appendingPathComponent("broken")
        let two = try Self.push(serve.port, broken, lag + ["--threshold", "latency.p50=1ns"])
        #expect(two.status == 2, "\(two.stderr)")
        #expect(two.stderr.contains("threshold latency.p50=1ns BROKEN"), "\(two.stderr)")
        #expect(try Self.text(broken, "summary.md").contains("**Threshold broken**: `latency.p50=1ns`"))
        #expect(try Self.text(broken, "report.html").contains("threshold broken: latency.p50=1ns"))

        // Saturated (a lag bound below any timer's resolution) and a broken threshold: 3, the threshold not judged.
        let saturated = dir.appendingPathComponent("saturated")
        let three = try Self.push(
            serve.port, saturated, ["--max-schedule-lag", "0.000001", "--threshold", "latency.p50=1ns"])
        #expect(three.status == 3, "\(three.stderr)")
        #expect(three.stderr.contains("thresholds not judged"), "\(three.stderr)")
        #expect(try Self.text(saturated, "summary.md").contains("**Thresholds not judged**"))

        let bad = try Self.push(serve.port, dir.appendingPathComponent("bad"), ["--threshold", "latency.p98=1ms"])
        #expect(bad.status == 64, "\(bad.stderr)")
    }

    @Test("compare of push folders: same 0, slower 2, faster 4; saturated refused 3; push against serve refused 1")
    func compare() throws {
        let dir = try CLI.temporaryDirectory()
        let lag = ["--max-schedule-lag", "5000"]
        let fast = try ServeProcess(["--h2c"])
        let a = dir.appendingPathComponent("a")
        #expect(try Self.push(fast.port, a, lag).status == 0)
        let saturated = dir.appendingPathComponent("saturated")
        #expect(try Self.push(fast.port, saturated, ["--max-schedule-lag", "0.000001"]).status == 3)
        #expect(fast.stop() == 0)
        // The same server holding every answer 200 ms: every percentile of latency well above the defaults' bands.
        let slow = try ServeProcess(["--h2c", "--latency", "200ms"])
        let b = dir.appendingPathComponent("b")
        #expect(try Self.push(slow.port, b, lag).status == 0)
        #expect(slow.stop() == 0)

        let same = try CLI.run(["compare", a.path, a.path])
        #expect(same.status == 0, "\(same.stdout)\(same.stderr)")
        #expect(same.stdout.contains("latency") && same.stdout.contains("scheduleLag"))
        #expect(same.stdout.contains("requests.sent") && same.stdout.contains("requests.byStatus.200"))
        let slower = try CLI.run(["compare", a.path, b.path])
        #expect(slower.status == 2, "\(slower.stdout)\(slower.stderr)")
        #expect(slower.stdout.contains("REGRESSION"))
        // scheduleLag (the client's timer, noise between runs) not judged: latency only improved.
        let faster = try CLI.run([
            "compare", b.path, a.path, "--threshold", "scheduleLag.p50=off", "--threshold", "scheduleLag.p90=off",
            "--threshold", "scheduleLag.p99=off", "--threshold", "scheduleLag.p99.9=off",
        ])
        #expect(faster.status == 4, "\(faster.stdout)")
        #expect(faster.stdout.contains("improved"))
        let loose = try CLI.run([
            "compare", a.path, b.path, "--threshold", "latency.p50=off", "--threshold", "latency.p90=off",
            "--threshold", "latency.p99=off", "--threshold", "latency.p99.9=off", "--threshold", "scheduleLag.p50=off",
            "--threshold", "scheduleLag.p90=off", "--threshold", "scheduleLag.p99=off",
            "--threshold", "scheduleLag.p99.9=off",
        ])
        #expect(loose.status == 0, "\(loose.stdout)")

        let refused = try CLI.run(["compare", a.path, saturated.path])
        #expect(refused.status == 3, "\(refused.stderr)")
        #expect(refused.stderr.contains("saturated") && refused.stderr.contains("not judged"), "\(refused.stderr)")
        let mixed = try CLI.run(["compare", a.path, fast.folder.path])
        #expect(mixed.status == 1, "\(mixed.stderr)")
        #expect(mixed.stderr.contains("fanout push folder") && mixed.stderr.contains("fanout serve"), "\(mixed.stderr)")
    }
}
