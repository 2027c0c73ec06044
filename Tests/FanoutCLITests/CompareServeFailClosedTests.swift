import Foundation
import Testing

/// `fanout compare` of two serve folders fails closed, the executable as a user runs it: runs of different flags are
/// refused (6) unless allowed, a current run without what the baseline judged is absent (5), and a run fanout's own
/// trigger held up is not judged (3).
@Suite("fanout compare of serve folders fails closed (the executable)", .serialized)
struct CompareServeFailClosedTests {
    /// A short serve run (h2c, one loop, nothing pushed at it), stopped by its --duration.
    static func serve(_ extra: [String]) throws -> ServeProcess {
        let serve = try ServeProcess(["--h2c", "--workers", "1", "--duration", "1", "--state", "none"] + extra)
        serve.process.waitUntilExit()
        return serve
    }

    @Test("--expect-events in the baseline only: refused for its flags (6), then ABSENT (5) when allowed")
    func absentAndRefused() throws {
        let base = try Self.serve(["--expect-events", "--settle", "0"])
        let current = try Self.serve([])
        let refused = try CLI.run(["compare", base.folder.path, current.folder.path])
        #expect(refused.status == 6, "\(refused.stdout)\n\(refused.stderr)")
        #expect(refused.stderr.contains("expectEvents: true → false"), "\(refused.stderr)")
        let allowed = try CLI.run(["compare", base.folder.path, current.folder.path, "--allow-config-change"])
        #expect(allowed.status == 5, "\(allowed.stdout)\n\(allowed.stderr)")
        #expect(allowed.stdout.contains("events (--expect-events)") && allowed.stdout.contains("ABSENT"))
        #expect(allowed.stderr.contains("judged although the flags differ"), "\(allowed.stderr)")
        // The same run against itself: judged, nothing absent.
        let same = try CLI.run(["compare", current.folder.path, current.folder.path])
        #expect(same.status == 0, "\(same.stdout)\n\(same.stderr)")
    }

    @Test("a run its own trigger held up (verdict.harnessLimits) is not judged: exit 3, naming fanout's side")
    func heldUp() throws {
        let run = try Self.serve([])
        let summaryURL = run.folder.appendingPathComponent("summary.json")
        var summary = try JSONSerialization.jsonObject(with: Data(contentsOf: summaryURL)) as! [String: Any]
        var verdict = try #require(summary["verdict"] as? [String: Any])
        verdict["status"] = "not judged"
        verdict["harnessLimits"] = ["the trigger left 4 due events unsent (waiting for a free slot)"]
        summary["verdict"] = verdict
        let held = run.directory.appendingPathComponent("held.json")
        try JSONSerialization.data(withJSONObject: summary).write(to: held)
        let result = try CLI.run(["compare", summaryURL.path, held.path])
        #expect(result.status == 3, "\(result.stdout)\n\(result.stderr)")
        #expect(
            result.stderr.contains("not judged") && result.stderr.contains("4 due events unsent"), "\(result.stderr)")
    }
}
