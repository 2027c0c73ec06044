import Foundation
import Testing

/// The whole loop, shortened: scripts/example-backend.sh runs fanout serve (this build) over TLS with ES256 tokens,
/// the example backend (examples/backend-aioapns: aiohttp, aioapns, sqlite3) registers every activity and turns each
/// triggered event into pushes back to fanout, which correlates them with their events.
@Suite("examples/backend-aioapns end to end (scripts/example-backend.sh)", .serialized)
struct ExampleBackendTests {
    static var root: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    @Test("registered, triggered, pushed back through aioapns, every push correlated, endToEnd measured")
    func loop() throws {
        let folder = try CLI.temporaryDirectory().appendingPathComponent("run")
        let script = Self.root.appendingPathComponent("scripts/example-backend.sh").path
        let result = try CLI.launch(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["FANOUT_BIN=\(CLI.binary.path)", "bash", script, "6", folder.path, "smoke"])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let data = try Data(contentsOf: folder.appendingPathComponent("summary.json"))
        let summary = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let registration = try #require(summary["registration"] as? [String: Any])
        #expect(registration["registered"] as? Int == registration["activities"] as? Int, "\(registration)")
        let trigger = try #require(summary["trigger"] as? [String: Any])
        let sent = trigger["sent"] as? Int ?? 0
        // A trigger still in flight when serving ends is cancelled and counted (sent = answered + timeouts + errors +
        // cancelled): every other one was answered 202.
        let cancelled = trigger["cancelledAtShutdown"] as? Int ?? -1
        #expect(sent > 0 && (0...2).contains(cancelled), "\(trigger)")
        #expect((trigger["byStatus"] as? [String: Int])?["202"] == sent - cancelled, "\(trigger)")
        #expect(trigger["timeouts"] as? Int == 0 && (trigger["errors"] as? [String: Int])?.isEmpty == true)
        let requests = try #require(summary["requests"] as? [String: Any])
        #expect((requests["acceptedPushes"] as? Int ?? 0) > 0 && (requests["acceptedBroadcasts"] as? Int ?? 0) > 0)
        let events = try #require(summary["events"] as? [String: Any])
        // The backend copies each event's timestamp into aps.timestamp: nothing it sends is uncorrelated.
        #expect(events["uncorrelated"] as? Int == 0 && (events["delivered"] as? Int ?? 0) > 0, "\(events)")
        #expect((events["identity"] as? [String: Any])?["holds"] as? Bool == true, "\(events)")
        #expect(((events["endToEnd"] as? [String: Any])?["count"] as? Int ?? 0) > 0)
        #expect(result.stdout.contains("endToEnd (event's intended time → applied on the device"))
    }

    @Test("fanout plan --trigger of the example backend: every step passes at its scenario's rate, a knee (lower bound)")
    func plan() throws {
        let folder = try CLI.temporaryDirectory().appendingPathComponent("plan")
        let script = Self.root.appendingPathComponent("scripts/plan-backend.sh").path
        let result = try CLI.launch(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "FANOUT_BIN=\(CLI.binary.path)", "bash", script, folder.path, "smoke", "--", "--slo",
                "endToEnd.p99<=5s", "--slo", "missing==0", "--step-seconds", "2", "--max-step-seconds", "2",
                "--start-factor", "0.5", "--max-factor", "1",
            ])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("Knee of the backend: "), "\(result.stdout)")
        let json =
            try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent("plan.json")))
            as! [String: Any]
        let knee = try #require(json["knee"] as? [String: Any])
        #expect(knee["factor"] as? Double == 1, "\(knee)")
        let steps = try #require((json["searches"] as? [[String: Any]])?.first?["steps"] as? [[String: Any]])
        for step in steps {
            let b = try #require(step["backend"] as? [String: Any])
            #expect(b["registered"] as? Int == b["activities"] as? Int, "\(b)")
            #expect((b["delivered"] as? Int ?? 0) > 0 && (b["counts"] as? [String: Int])?["missing"] == 0, "\(b)")
        }
    }
}
