import Foundation
import Testing

/// `fanout push` against `fanout serve` (both started here on 127.0.0.1), h2c and TLS, with and without provider
/// tokens; and against a server that never answers (Python h2), where the generator must say it was saturated.
@Suite("fanout push against fanout serve")
struct PushCommandTests {
    static func summary(_ folder: URL) throws -> [String: Any] {
        let data = try Data(contentsOf: folder.appendingPathComponent("summary.json"))
        return try JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    /// smoke without its payload faults (malformed and oversized payloads are answered 400 and 413 by design).
    static func cleanSmoke(in dir: URL) throws -> String {
        let shown = try CLI.run(["scenarios", "show", "smoke"])
        var scenario = try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as! [String: Any]
        var faults = scenario["faults"] as! [String: Any]
        faults["malformedShare"] = 0
        faults["oversizedShare"] = 0
        scenario["faults"] = faults
        scenario["name"] = "smoke-clean"
        let path = dir.appendingPathComponent("smoke-clean.json")
        try JSONSerialization.data(withJSONObject: scenario).write(to: path)
        return path.path
    }

    /// Push's counts equal serve's: every request serve counted was sent by push and answered with the same status
    /// and reason; serve accepted exactly the pushes push saw answered 200.
    static func expectSameCounts(push: [String: Any], serve: [String: Any]) {
        let p = push["requests"] as! [String: Any]
        let s = serve["requests"] as! [String: Any]
        #expect(p["sent"] as? Int == s["total"] as? Int)
        #expect(p["answered"] as? Int == p["sent"] as? Int)
        #expect(p["byStatus"] as! [String: Int] == s["byStatus"] as! [String: Int])
        #expect(p["byReason"] as! [String: Int] == s["byReason"] as! [String: Int])
        let accepted = (s["acceptedPushes"] as! Int) + (s["acceptedBroadcasts"] as! Int)
        #expect((p["byStatus"] as! [String: Int])["200"] == accepted)
        #expect((push["identity"] as! [String: Any])["holds"] as? Bool == true)
    }

    @Test("the largest --drain and --max-schedule-lag run to the end: no trap converting them at the schedule's end")
    func largestBounds() throws {
        let dir = try CLI.temporaryDirectory()
        let serve = try ServeProcess(["--h2c", "--devices", "200"])
        let out = dir.appendingPathComponent("push")
        let result = try CLI.run([
            "push", "http://127.0.0.1:\(serve.port)", "smoke", "--devices", "200", "--duration", "1", "--out",
            out.path, "--drain", "3600", "--max-schedule-lag", "3600000", "--reconnects", "1000000",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(serve.stop() == 0)
        let requests = try #require(try Self.summary(out)["requests"] as? [String: Any])
        let sent = try #require(requests["sent"] as? Int)
        #expect(sent > 0 && requests["answered"] as? Int == sent, "\(requests)")
    }

    @Test("h2c: every push of smoke (faults aside) answered 200 — no BadDeviceToken; counts equal serve's")
    func h2cSmoke() throws {
        let dir = try CLI.temporaryDirectory()
        let serve = try ServeProcess(["--h2c"])
        let out = dir.appendingPathComponent("push")
        let result = try CLI.run([
            "push", "http://127.0.0.1:\(serve.port)", "smoke", "--duration", "4", "--out", out.path, "--connections",
            "2",
            // Counts are checked here, not timing: a loaded machine (the suite runs in parallel) must not fail it.
            "--max-schedule-lag", "5000",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(serve.stop() == 0)
        let push = try Self.summary(out)
        let requests = push["requests"] as! [String: Any]
        let byStatus = requests["byStatus"] as! [String: Int]
        let byReason = requests["byReason"] as! [String: Int]
        // smoke's payload faults (1% malformed, 1% oversized) are the only non-200 answers.
        #expect(Set(byReason.keys).isSubset(of: ["BadRequestPayload", "PayloadTooLarge"]), "\(byReason)")
        #expect((byStatus["200"] ?? 0) > 0 && (byStatus["200"] ?? 0) >= (requests["sent"] as! Int) * 9 / 10)
        #expect((push["tokenPushes"] as! Int) > 0 && (push["broadcasts"] as! Int) > 0)
        Self.expectSameCounts(push: push, serve: try serve.summary())
        for file in ["summary.md", "latency.hlog", "latency.hgrm", "schedule-lag.hgrm"] {
            #expect(FileManager.default.fileExists(atPath: out.appendingPathComponent(file).path), "\(file)")
        }
        let hlog = try String(contentsOf: out.appendingPathComponent("latency.hlog"), encoding: .utf8)
        #expect(hlog.contains("Tag=latency,") && hlog.contains("Tag=scheduleLag,"))
    }

    @Test("TLS (--ca, ALPN h2) and ES256 provider tokens (--auth-key, --team): a clean smoke answered 200, all of it")
    func tlsJWT() throws {
        let dir = try CLI.temporaryDirectory()
        let cert = dir.appendingPathComponent("cert.pem").path
        let key = dir.appendingPathComponent("key.pem").path
        let made = try Tool.run("openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
            "-out", cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
        ])
        #expect(made.status == 0, "\(made.stderr)")
        let p8 = dir.appendingPathComponent("auth.p8").path
        #expect(try Tool.run("openssl", [
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", p8,
        ]).status == 0)
        let scenario = try Self.cleanSmoke(in: dir)
        let serve = try ServeProcess(
            ["--tls-cert", cert, "--tls-key", key, "--auth", "jwt", "--auth-key", "KEY1234567=\(p8)", "--team",
                "TEAM123456"], scenario: scenario)
        let out = dir.appendingPathComponent("push")
        let result = try CLI.run([
            "push", "https://localhost:\(serve.port)", scenario, "--duration", "3", "--ca", cert, "--auth-key",
            "KEY1234567=\(p8)", "--team", "TEAM123456", "--out", out.path, "--max-schedule-lag", "5000",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(serve.stop() == 0)
        let push = try Self.summary(out)
        let requests = push["requests"] as! [String: Any]
        #expect(requests["byStatus"] as! [String: Int] == ["200": requests["sent"] as! Int])
        #expect((requests["sent"] as! Int) > 100)
        #expect(push["providerTokensIssued"] as? Int == 1)
        Self.expectSameCounts(push: push, serve: try serve.summary())

        // Without --ca the self-signed certificate is refused: no connection, exit 1, a clear message.
        let other = try ServeProcess(["--tls-cert", cert, "--tls-key", key])
        let refused = try CLI.run([
            "push", "https://localhost:\(other.port)", "smoke", "--duration", "1", "--out",
            dir.appendingPathComponent("refused").path,
        ])
        #expect(other.stop() == 0)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("certificate"), "\(refused.stderr)")
    }

    @Test("saturation is reported, not hidden: a lag bound below the timer's; a silent server is server-limited")
    func saturated() throws {
        let dir = try CLI.temporaryDirectory()
        let serve = try ServeProcess(["--h2c"])
        let lagged = dir.appendingPathComponent("lagged")
        let result = try CLI.run([
            "push", "http://127.0.0.1:\(serve.port)", "smoke", "--duration", "2", "--max-schedule-lag", "0.000001",
            "--out", lagged.path,
        ])
        #expect(result.status == 3, "\(result.stderr)")
        #expect(try String(contentsOf: lagged.appendingPathComponent("summary.md"), encoding: .utf8)
            .contains("Generator saturated"))
        #expect(serve.stop() == 0)

        // Python h2 (100 streams, never answers): the burst's requests wait in the queue; at the drain deadline the
        // open and queued ones are unanswered at the end. The queued ones waited for the server's streams: the run is
        // server-limited, not saturated, and judged — latency counts the unanswered at the run's end (fail closed).
        let silent = Process()
        let output = Pipe()
        silent.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        silent.arguments = [
            "python3", Bundle.module.url(forResource: "Resources/h2_hostile", withExtension: "py")!.path, "silent",
        ]
        silent.standardOutput = output
        try silent.run()
        defer {
            kill(silent.processIdentifier, SIGKILL)
            silent.waitUntilExit()
        }
        let port = Int(String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines))!
        let out = dir.appendingPathComponent("silent")
        let never = try CLI.run([
            "push", "http://127.0.0.1:\(port)", "smoke", "--duration", "2", "--drain", "0.5", "--out", out.path,
            "--threshold", "latency.p50=1s", "--threshold", "answeredLatency.p50=1s",
            // The generator's own lateness on a loaded machine must not make it saturated: server-limited comes
            // from the requests still queued at the end, whatever the bound.
            "--max-schedule-lag", "5000",
        ])
        #expect(never.status == 2, "\(never.stderr)")
        #expect(never.stderr.contains("server-limited") && !never.stderr.contains("generator saturated"))
        #expect(never.stderr.contains("threshold latency.p50=1s BROKEN"), "\(never.stderr)")
        let push = try Self.summary(out)
        let requests = push["requests"] as! [String: Any]
        #expect(requests["answered"] as? Int == 0)
        #expect(requests["unansweredAtEnd"] as? Int == requests["sent"] as? Int)
        #expect((requests["queuedAtEnd"] as! Int) > 0)
        #expect((push["saturation"] as! [String: Any])["saturated"] as? Bool == false)
        #expect((push["saturation"] as! [String: Any])["serverLimited"] as? Bool == true)
        #expect(push["verdict"] as? String == "server-limited")
        #expect((push["latency"] as! [String: Any])["count"] as? Int == requests["sent"] as? Int)
        #expect((push["answeredLatency"] as! [String: Any])["count"] as? Int == 0)
        #expect((push["identity"] as! [String: Any])["holds"] as? Bool == true)
    }

    @Test("SIGINT ends the run early: the folder is written, what was in flight answered or unanswered, exit 130")
    func interrupted() throws {
        let dir = try CLI.temporaryDirectory()
        let serve = try ServeProcess(["--h2c"])
        let out = dir.appendingPathComponent("push")
        let push = Process()
        push.executableURL = CLI.binary
        push.arguments = [
            "push", "http://127.0.0.1:\(serve.port)", "smoke", "--duration", "60", "--out", out.path,
            "--max-schedule-lag", "5000",
        ]
        push.standardOutput = FileHandle.nullDevice
        let log = dir.appendingPathComponent("push.err")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        push.standardError = try FileHandle(forWritingTo: log)
        try push.run()
        // SIGINT once the run is under way (a progress line with answers: the loop runs and watches SIGINT), not
        // after a fixed sleep: a sanitizer build on a loaded machine was still starting after 3 s, and SIGINT's
        // default action ended it with no folder. The wait is a bound, not a measure.
        let started = Date().addingTimeInterval(120)
        while push.isRunning && Date() < started {
            // CLI.text: a file still being written, read without FoundationEssentials' leak (LeakSanitizer).
            if CLI.text(of: log).range(of: "s  sent [0-9]+  answered [1-9]", options: .regularExpression) != nil {
                break
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        kill(push.processIdentifier, SIGINT)
        let deadline = Date().addingTimeInterval(40)
        while push.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if push.isRunning { kill(push.processIdentifier, SIGKILL) }
        push.waitUntilExit()
        #expect(push.terminationReason == .exit && push.terminationStatus == 130)
        #expect(serve.stop() == 0)
        let summary = try Self.summary(out)
        #expect(summary["interrupted"] as? Bool == true)
        let requests = summary["requests"] as! [String: Any]
        #expect((requests["sent"] as! Int) > 0)
        #expect((summary["identity"] as! [String: Any])["holds"] as? Bool == true)
        // What was open when SIGINT came was drained (answered) or is unanswered at the end, never lost:
        // sent = answered + failed + unanswered, each read.
        let unanswered = try #require(requests["unansweredAtEnd"] as? Int)
        let (sent, answered, failed) = (requests["sent"] as! Int, requests["answered"] as! Int, requests["failed"] as! Int)
        #expect(unanswered == sent - answered - failed && unanswered >= 0 && answered > 0, "\(requests)")
        // Ended before its 60-s schedule did (the process was given 40 s after SIGINT, or killed and failed above).
        #expect((summary["elapsedSeconds"] as! Double) < 60)
        // serve saw every request push had answered, and none push had not handed to nghttp2.
        let served = (try serve.summary()["requests"] as! [String: Any])["total"] as! Int
        #expect(served >= requests["answered"] as! Int && served <= requests["submitted"] as! Int)
    }
}
