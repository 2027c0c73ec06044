import Foundation
import Testing

/// Issue 21, item 2: `fanout push` against `fanout serve` (real binaries, 127.0.0.1, h2c and TLS) leaves the served
/// devices in the state `fanout run --clock virtual` leaves them in. Both sides count from the run's virtual epoch
/// (`--epoch 1700000000`); the scenario is smoke without the three faults serve's devices do not play (offline
/// windows, a person's dismissals, token rotation — docs/PUSH.md, *Over the wire equals in process*).
@Suite("over the wire equals in process")
struct WireEqualsRunTests {
    static let epoch = "1700000000"
    /// Whole seconds: the payloads' dates are whole seconds.
    static let seconds = 6
    /// serve's devices' clock, on neither side the wall clock's: it reads the epoch at push's first request
    /// (`--epoch-from first-request`: push's payloads are dated from its own start, after its build), and the dump
    /// is read at a fixed time of it (`--state-at`), not when serve stops. A slower build (a sanitizer's) otherwise
    /// moved both later: ends applied after the dump read `active`, a late dump read ended activities `dismissed`.
    /// The run dumps at epoch + 6 s; serve at + 7 s, which leaves a second for push's own lateness: nothing is
    /// sent after 6 s and the first dismissal is at 8 s (ends from 3 s, dismissals 5 s after), so the states are
    /// the same at both times.
    static let serveFlags = ["--epoch", epoch, "--epoch-from", "first-request", "--state-at", String(Int(epoch)! + 7)]

    /// smoke with its offline windows, dismissals and token rotation off; every other fault kept (out-of-order
    /// timestamps, malformed and oversized payloads, lifecycle ends and dismissal dates, limits, the budget).
    static func wireSmoke(in dir: URL) throws -> String {
        let shown = try CLI.run(["scenarios", "show", "smoke"])
        var scenario = try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as! [String: Any]
        var faults = scenario["faults"] as! [String: Any]
        faults.removeValue(forKey: "offline")
        faults["dismissShare"] = 0
        faults["rotationShare"] = 0
        scenario["faults"] = faults
        scenario["name"] = "smoke-wire"
        let path = dir.appendingPathComponent("smoke-wire.json")
        try JSONSerialization.data(withJSONObject: scenario).write(to: path)
        return path.path
    }

    /// A dump's lines: the activity and device lines as they are, and the totals line parsed.
    static func dump(_ url: URL) throws -> (lines: [Substring], totals: [String: Any]) {
        let text = try String(contentsOf: url, encoding: .utf8)
        var lines = text.split(separator: "\n")
        let last = try JSONSerialization.jsonObject(with: Data(lines.removeLast().utf8)) as! [String: Any]
        return (lines, last["totals"] as! [String: Any])
    }

    /// JSON text with sorted keys: two objects compared by what they hold.
    static func canonical(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    /// The run's totals as serve's pipeline counts them: an oversized push is answered 413 from its body's size
    /// before serve's pipeline sees it (docs/INGEST.md §3), so it is neither a push nor a rejection there.
    static func withoutOversized(_ totals: [String: Any], oversized: Int) -> [String: Any] {
        var t = totals
        t["pushes"] = (t["pushes"] as! Int) - oversized
        var rejected = t["rejected"] as! [String: Int]
        #expect(rejected["PayloadTooLarge"] ?? 0 == oversized)
        rejected.removeValue(forKey: "PayloadTooLarge")
        t["rejected"] = rejected
        return t
    }

    @Test("push → serve leaves every activity and device as fanout run --clock virtual does, h2c and TLS")
    func wireEqualsRun() throws {
        let dir = try CLI.temporaryDirectory()
        let scenario = try Self.wireSmoke(in: dir)
        let duration = String(Self.seconds)
        let runState = dir.appendingPathComponent("run-state.jsonl")
        // Two workers: the merged dump is the one-worker dump (virtual time does not depend on the worker count).
        let run = try CLI.run([
            "run", scenario, "--clock", "virtual", "--duration", duration, "--workers", "2", "--out",
            dir.appendingPathComponent("run").path, "--state", runState.path,
        ])
        #expect(run.status == 0, "\(run.stderr)")
        let expected = try Self.dump(runState)
        #expect(expected.lines.count > 1000)

        let cert = dir.appendingPathComponent("cert.pem").path
        let key = dir.appendingPathComponent("key.pem").path
        let made = try Tool.run("openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
            "-out", cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
        ])
        #expect(made.status == 0, "\(made.stderr)")
        for tls in [false, true] {
            // One loop and one connection: pushes are applied in the order they were sent (several loops or
            // connections may apply two pushes to one activity in another order: docs/PUSH.md, *Over the wire
            // equals in process*).
            let serve = try ServeProcess(
                (tls ? ["--tls-cert", cert, "--tls-key", key] : ["--h2c"])
                    + ["--workers", "1", "--state", "full"] + Self.serveFlags, scenario: scenario)
            let out = dir.appendingPathComponent(tls ? "push-tls" : "push-h2c")
            let target = tls ? "https://localhost:\(serve.port)" : "http://127.0.0.1:\(serve.port)"
            if !tls {
                // A push that starts late, as after a slow build: only --epoch-from first-request keeps serve's
                // devices' clock from running 3 s ahead of push's payloads (ends applied after the dump's time).
                Thread.sleep(forTimeInterval: 3)
            }
            let pushed = try CLI.run(
                ["push", target, scenario, "--duration", duration, "--epoch", Self.epoch, "--out", out.path,
                    // Counts and state are checked here, not timing: a loaded machine must not fail it.
                    "--max-schedule-lag", "5000"] + (tls ? ["--ca", cert] : []))
            #expect(pushed.status == 0, "\(pushed.stderr)")
            if tls {
                // A serve that stops late, as under a sanitizer: its devices' clock passes the first dismissals,
                // which only --state-at keeps out of the dump.
                Thread.sleep(forTimeInterval: 3)
            }
            #expect(serve.stop() == 0, "\(serve.stderr)")
            let push = try PushCommandTests.summary(out)
            let served = try serve.summary()
            // Every push answered, with the status and reason serve counted; both sides' identities hold.
            PushCommandTests.expectSameCounts(push: push, serve: served)
            let requests = served["requests"] as! [String: Any]
            #expect(requests["identitiesHold"] as? Bool == true)
            #expect(requests["wireIdentityHolds"] as? Bool == true)
            #expect((served["accounting"] as! [String: Any])["identitiesHold"] as? Bool == true)
            // How long serve ran is said with a difference (the dump's time does not depend on it: --state-at).
            let elapsed = served["elapsedSeconds"] as! Double

            let got = try Self.dump(serve.folder.appendingPathComponent("state.jsonl"))
            #expect(got.lines.count == expected.lines.count)
            let differing = zip(got.lines, expected.lines).filter { $0 != $1 }
            #expect(
                differing.isEmpty,
                "\(differing.count) lines differ (serve ran \(elapsed) s), e.g. \(differing.prefix(2))")
            let oversized = ((push["requests"] as! [String: Any])["byStatus"] as! [String: Int])["413"] ?? 0
            #expect(oversized > 0)
            let normalised = Self.withoutOversized(expected.totals, oversized: oversized)
            #expect(try Self.canonical(got.totals) == Self.canonical(normalised))
        }
    }
}
