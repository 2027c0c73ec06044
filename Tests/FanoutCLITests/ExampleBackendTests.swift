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

    /// fanout serve's flags in these runs: a trigger lag bound a slow build does not reach.
    static let serveArgs = "--trigger-max-lag 5000"

    /// The run's verdict: passed (exit 0), or failed (exit 2) on pairs the backend was too slow to push within the
    /// settle time alone: every objective missed is `missing` or `staleAtEnd`, and at most 1% of the expected pairs
    /// are missing. How fast a Python backend turns a trigger into pushes is the machine's load, not fanout's code:
    /// with a build and a fuzz run beside it (load ~5 on 2 cores) a healthy run of `loop` missed 11 of 10,862 pairs
    /// (one event's last followers, "never pushed" 2.2 s after it was due), under ThreadSanitizer in CI 6 of 11,756.
    /// A broken registration, trigger or correlation misses far more, or makes wrong pushes, or breaks an identity.
    static func verdictHolds(_ status: Int32, _ summary: [String: Any], missingShare: Double = 0.01) -> Bool {
        guard status != 0 else { return true }
        guard status == 2, let verdict = summary["verdict"] as? [String: Any],
            let objectives = verdict["objectives"] as? [[String: Any]]
        else { return false }
        let missed = objectives.filter { $0["met"] as? Bool == false }.compactMap { $0["objective"] as? String }
        return !missed.isEmpty && missed.allSatisfy { $0.hasPrefix("missing") || $0.hasPrefix("staleAtEnd") }
            && missingAtMost(missingShare, summary)
    }

    /// Whether a run's missing pairs are at most `share` of its expected ones.
    static func missingAtMost(_ share: Double, _ summary: [String: Any]) -> Bool {
        guard let events = summary["events"] as? [String: Any], let missing = events["missing"] as? Int,
            let expected = events["expected"] as? Int
        else { return false }
        return Double(missing) <= share * Double(expected)
    }

    /// A run folder's summary.json.
    static func summary(_ folder: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: folder).appendingPathComponent("summary.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("registered, triggered, pushed back through aioapns, every push correlated, endToEnd measured")
    func loop() throws {
        let folder = try CLI.temporaryDirectory().appendingPathComponent("run")
        let script = Self.root.appendingPathComponent("scripts/example-backend.sh").path
        // The trigger's own lateness on a slow build (a sanitizer's: p99 170 ms under AddressSanitizer) is not what
        // this loop checks; TriggerCommandTests.openLoop judges the not-judged bound itself.
        let result = try CLI.launch(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["FANOUT_BIN=\(CLI.binary.path)", "SERVE_ARGS=\(Self.serveArgs)", "bash", script, "6", folder.path,
                "smoke"])
        let summary = try #require(try? Self.summary(folder.path), "\(result.stdout)\n\(result.stderr)")
        #expect(Self.verdictHolds(result.status, summary), "\(result.stdout)\n\(result.stderr)")
        let registration = try #require(summary["registration"] as? [String: Any])
        let activities = try #require(registration["activities"] as? Int)
        #expect(registration["registered"] as? Int == activities && activities > 0, "\(registration)")
        let trigger = try #require(summary["trigger"] as? [String: Any])
        let sent = trigger["sent"] as? Int ?? 0
        // A trigger still in flight when serving ends is cancelled and counted (sent = answered + timeouts + errors +
        // cancelled), never more than were in flight at once: every other one was answered 202.
        let cancelled = trigger["cancelledAtShutdown"] as? Int ?? -1
        let peak = trigger["peakInFlight"] as? Int ?? -1
        #expect(sent > 0 && cancelled >= 0 && cancelled <= peak, "\(trigger)")
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

    @Test("kickoff: the backend pushes each start to the push-to-start tokens, registers the started activities")
    func kickoff() throws {
        let directory = try CLI.temporaryDirectory()
        let folder = directory.appendingPathComponent("run")
        let scenario = try LifecycleScenario.write(
            directory, "kickoff.json", name: "kickoff", seed: 11, seconds: 8,
            faults: #"{"kickoff": {"share": 0.5, "atSeconds": 1, "appDelayMillis": {"p50": 30, "p99": 150}}}"#,
            devices: 200, activities: 1...2, sources: 6, rate: 6)
        let script = Self.root.appendingPathComponent("scripts/example-backend.sh").path
        let result = try CLI.launch(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["FANOUT_BIN=\(CLI.binary.path)", "SERVE_ARGS=\(Self.serveArgs)", "bash", script, "8", folder.path,
                scenario])
        let summary = try #require(try? Self.summary(folder.path), "\(result.stdout)\n\(result.stderr)")
        #expect(Self.verdictHolds(result.status, summary), "\(result.stdout)\n\(result.stderr)")
        let events = try #require(summary["events"] as? [String: Any])
        let k = try #require(events["kickoff"] as? [String: Any])
        let due = k["due"] as? Int ?? 0
        #expect(due > 20 && k["started"] as? Int == due && k["notStarted"] as? Int == 0, "\(k)")
        let registration = try #require(k["registration"] as? [String: Any])
        #expect(registration["registered"] as? Int == due && registration["failed"] as? Int == 0, "\(registration)")
        #expect((k["followed"] as? Int ?? 0) > 0 && k["identityHolds"] as? Bool == true, "\(k)")
        #expect(events["uncorrelated"] as? Int == 0 && k["unexpectedStarts"] as? Int == 0, "\(events)")
        #expect(result.stdout.contains("kickoff: \(due) of \(due) activities due started by push-to-start"),
            "\(result.stdout)")
    }

    @Test("two instances of the example backend sharing one SQLite file behind --register A,B and --trigger A,B")
    func twoInstances() throws {
        let folder = try CLI.temporaryDirectory().appendingPathComponent("run")
        let script = Self.root.appendingPathComponent("scripts/example-backend.sh").path
        let result = try CLI.launch(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["FANOUT_BIN=\(CLI.binary.path)", "SERVE_ARGS=\(Self.serveArgs)", "EXAMPLE_BACKEND_INSTANCES=2", "bash",
                script, "6", folder.path, "smoke"])
        let summary = try #require(try? Self.summary(folder.path), "\(result.stdout)\n\(result.stderr)")
        #expect(Self.verdictHolds(result.status, summary), "\(result.stdout)\n\(result.stderr)")
        let registration = try #require(summary["registration"] as? [String: Any])
        let trigger = try #require(summary["trigger"] as? [String: Any])
        // Both instances registered activities and took events; what one registered, the other pushed.
        for section in [registration, trigger] {
            let rows = try byURL(section)
            #expect(rows.count == 2 && rows.allSatisfy { ($0["successes"] as? Int ?? 0) > 0 }, "\(rows)")
            #expect(section["byURLAddsUp"] as? Bool == true)
        }
        #expect(registration["registered"] as? Int == registration["activities"] as? Int)
        let events = try #require(summary["events"] as? [String: Any])
        let identity = events["identity"] as? [String: Any]
        #expect((events["delivered"] as? Int ?? 0) > 0 && identity?["holds"] as? Bool == true, "\(events)")
        #expect(result.stdout.contains("trigger by URL (add up to the totals)"), "\(result.stdout)")
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
        #expect(!steps.isEmpty, "the plan ran steps")
        for step in steps {
            let b = try #require(step["backend"] as? [String: Any])
            let activities = try #require(b["activities"] as? Int)
            #expect(b["registered"] as? Int == activities && activities > 0, "\(b)")
            #expect((b["delivered"] as? Int ?? 0) > 0 && (b["counts"] as? [String: Int])?["missing"] == 0, "\(b)")
        }
    }

    /// docs/BACKEND.md, *A gate for your backend's CI*, shortened: runs of 8 s judged with `--settle 5` (an event is
    /// missing when not delivered 5 s after it was due: under AddressSanitizer on a loaded 2-core machine the
    /// healthy backend's endToEnd p99 reached 1.9 s and 2 of 6,783 pairs were not pushed within 3 s; a --settle as
    /// long as the run judged nothing and passed the faulty backend: now not judged). As there, latency is shown, not
    /// judged (on a shared machine its percentiles say more about the load than about the backend), and
    /// `events.reordered` is not judged (the example backend's concurrent fan-outs reorder a source's updates, and
    /// the scenario's outOfOrderShare sends some out of order itself); missing and stale at the end are, a healthy
    /// run allowed at most 0.2% of its pairs missing (the machine's load; the faulty backend misses ~1%). The two
    /// healthy runs run at the same time (the same load on both), the faulty one after them.
    @Test("a CI gate: two healthy runs of the backend compare exit 0, one dropping every 10th subscriber exit 2")
    func gate() throws {
        let directory = try CLI.temporaryDirectory()
        let script = Self.root.appendingPathComponent("scripts/example-backend.sh").path
        let binary = CLI.binary.path
        @Sendable func run(_ name: String, backend: String) -> (folder: String, result: Result<CLI.Result, Error>) {
            let folder = directory.appendingPathComponent(name).path
            let arguments = [
                "FANOUT_BIN=\(binary)", "EXAMPLE_BACKEND_ARGS=\(backend)", "SERVE_ARGS=--settle 5 \(Self.serveArgs)",
                "bash", script, "8", folder, "smoke",
            ]
            return (folder, Result { try CLI.launch(URL(fileURLWithPath: "/usr/bin/env"), arguments) })
        }
        final class Box: @unchecked Sendable { var run: (folder: String, result: Result<CLI.Result, Error>)? }
        let other = Box()
        let done = DispatchSemaphore(value: 0)
        Thread {
            other.run = run("healthy", backend: "")
            done.signal()
        }.start()
        let first = run("baseline", backend: "")
        done.wait()
        let second = try #require(other.run)
        let third = run("faulty", backend: "--drop-every 10")
        // Healthy: passed, or failed on a few pairs the backend did not push in time on a loaded machine (3 of ~11,000
        // in one `make test` beside a build) — at most 0.2% of the expected, a fifth of what the faulty one misses.
        let healthyShare = 0.002
        for run in [first, second] {
            let result = try run.result.get()
            let summary = try #require(
                try? Self.summary(run.folder), "\(run.folder): \(result.stdout)\n\(result.stderr)")
            #expect(
                Self.verdictHolds(result.status, summary, missingShare: healthyShare),
                "\(run.folder): \(result.stdout)\n\(result.stderr)")
        }
        // The run of the backend dropping subscribers judges itself: missing pairs, exit 2.
        let faultyResult = try third.result.get()
        #expect(faultyResult.status == 2, "\(third.folder): \(faultyResult.stdout)\n\(faultyResult.stderr)")
        let (baseline, healthy, faulty) = (first.folder, second.folder, third.folder)
        // Real time on both sides: a backend that falls behind (a slow build's fanout: 85 skipped under
        // AddressSanitizer) skips superseded events as it reorders them; the dropped subscribers are what is gated.
        let gate = ["*.p50=off", "*.p90=off", "*.p99=off", "*.p99.9=off", "events.reordered=off", "events.skipped=off"]
            .flatMap { ["--threshold", $0] }
        let same = try CLI.run(["compare", baseline, healthy] + gate)
        // Exit 0; or, when a healthy run missed a few pairs as above, 2 on those counts alone.
        let sameRegressions = same.stdout.split(separator: "\n").filter { $0.hasSuffix("REGRESSION") }
        let fewMissing = try [baseline, healthy].allSatisfy { Self.missingAtMost(healthyShare, try Self.summary($0)) }
        let onMissing = sameRegressions.allSatisfy {
            $0.hasPrefix("events.missing ") || $0.hasPrefix("events.staleAtEnd ")
        }
        #expect(
            same.status == 0 || (same.status == 2 && fewMissing && !sameRegressions.isEmpty && onMissing),
            "\(same.stdout)\n\(same.stderr)")
        let dropped = try CLI.run(["compare", baseline, faulty] + gate)
        #expect(dropped.status == 2, "\(dropped.stdout)\n\(dropped.stderr)")
        let lines = dropped.stdout.split(separator: "\n")
        for count in ["events.missing", "events.staleAtEnd"] {
            let line = lines.first { $0.hasPrefix(count + " ") }
            #expect(line?.hasSuffix("REGRESSION") == true, "\(count): \(dropped.stdout)")
        }
        #expect(dropped.stdout.contains("result: regression"))
    }
}
