import Foundation
import Testing

/// Tokens rotating while serving (`faults.rotationWhileServing`, docs/INGEST.md §5) against a real backend: a Python
/// one on 127.0.0.1 (Resources/lifecycle_backend.py) registers the activities, takes the trigger and pushes back
/// over HTTP/2. One that replaces an activity's token when the app registers the new one and drops a token answered
/// 410 passes; one that keeps every token it was ever given fails on `sentToUnregistered`, and `fanout compare`
/// names it.
@Suite("fanout serve: token rotation while serving, a backend that prunes and one that never does", .serialized)
struct RotationBackendTests {
    static let seconds = 8

    /// A scenario of token sources only: 40 devices, an activity each, 4 events a second, half the tokens rotating
    /// while serving with a 1 s grace.
    static func scenario(_ directory: URL, rotation: String = #"{"graceSeconds": 1}"#) throws -> String {
        try LifecycleScenario.write(
            directory, "rotation.json", name: "rotation-while-serving", seed: 3, seconds: seconds,
            faults: #"{"rotationShare": 0.5, "rotationWhileServing": "# + rotation + "}")
    }

    /// One run against a backend in `mode`, to its `--duration`: the serve process (ended), the backend.
    static func run(_ mode: String, _ directory: URL) throws -> (ServeProcess, TriggerBackend) {
        let apnsPort = directory.appendingPathComponent("apns-port-\(mode)")
        let backend = try TriggerBackend(mode, [apnsPort.path], script: "lifecycle_backend")
        let register = backend.url.replacingOccurrences(of: "/trigger", with: "/register")
        let serve = try ServeProcess(
            ["--h2c", "--workers", "2", "--duration", "\(seconds)", "--settle", "2", "--state", "none",
             "--expect-events", "--register", register, "--trigger", backend.url, "--trigger-max-lag", "5000"],
            scenario: try scenario(directory))
        try "\(serve.port)".write(to: apnsPort, atomically: true, encoding: .utf8)
        let deadline = Date().addingTimeInterval(90)
        while serve.process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        return (serve, backend)
    }

    @Test("a pruning backend passes (0 sent to unregistered); a hoarding one exits 2, and compare names the count")
    func pruneOrNot() throws {
        let directory = try CLI.temporaryDirectory()
        let (healthy, _) = try Self.run("healthy", directory)
        #expect(healthy.stop() == 0, "\(healthy.stderr)")
        let good = try healthy.summary()
        let events = try #require(good["events"] as? [String: Any])
        let rotations = try #require(events["rotations"] as? [String: Any])
        #expect(events["sentToUnregistered"] as? Int == 0 && events["missing"] as? Int == 0, "\(events)")
        #expect((rotations["rotated"] as? Int ?? 0) > 5 && (rotations["retired"] as? Int ?? 0) > 0, "\(rotations)")
        let registration = try #require(rotations["registration"] as? [String: Any])
        #expect(registration["registered"] as? Int == rotations["scheduled"] as? Int
            || (registration["unregisteredAtShutdown"] as? Int ?? 0) > 0, "\(registration)")
        #expect((registration["registered"] as? Int ?? 0) > 5 && registration["failed"] as? Int == 0)
        #expect(rotations["identityHolds"] as? Bool == true)
        #expect((events["identity"] as? [String: Any])?["holds"] as? Bool == true)
        #expect(healthy.stderr.contains("sentToUnregistered=0 (0 of"), "\(healthy.stderr)")
        let md = CLI.text(of: healthy.folder.appendingPathComponent("summary.md"))
        #expect(md.contains("Token rotations while serving:") && md.contains("then 0 pushes sent to unregistered"))
        let html = CLI.text(of: healthy.folder.appendingPathComponent("report.html"))
        #expect(html.contains("Token rotations while serving:"))

        let (hoarder, backend) = try Self.run("hoarder", directory)
        #expect(hoarder.stop() == 2, "\(hoarder.stderr)")
        let bad = try #require(try hoarder.summary()["events"] as? [String: Any])
        let sent = bad["sentToUnregistered"] as? Int ?? 0
        #expect(sent > 0 && bad["missing"] as? Int == 0, "\(bad)")
        #expect(hoarder.stderr.contains("sentToUnregistered=0 broken"), "\(hoarder.stderr)")
        // The backend saw them: a 410 Unregistered per old token first, then the same answer again and again.
        let pushes = try backend.requests()
        #expect(pushes.filter { $0["status"] as? Int == 410 && $0["reason"] as? String == "Unregistered" }.count
            >= sent)
        let compare = try CLI.run(["compare", healthy.folder.path, hoarder.folder.path])
        #expect(compare.status == 2, "\(compare.stdout)\n\(compare.stderr)")
        #expect(compare.stdout.contains("events.sentToUnregistered"), "\(compare.stdout)")
        let same = try CLI.run(["compare", healthy.folder.path, healthy.folder.path])
        #expect(same.status == 0, "\(same.stdout)\n\(same.stderr)")
    }

    @Test("a backend refusing the new tokens' registrations: failed, counted, and its missing pairs named for it")
    func refusedRegistration() throws {
        let directory = try CLI.temporaryDirectory()
        let (serve, _) = try Self.run("refuse-new", directory)
        #expect(serve.stop() == 2, "\(serve.stderr)")
        let events = try #require(try serve.summary()["events"] as? [String: Any])
        let rotations = try #require(events["rotations"] as? [String: Any])
        let registration = try #require(rotations["registration"] as? [String: Any])
        // Every attempt answered 500 (--register-attempts 3 each), so each rotation due in time failed.
        #expect((registration["failed"] as? Int ?? 0) > 0 && registration["registered"] as? Int == 0, "\(registration)")
        #expect((registration["byStatus"] as? [String: Int])?["500"] == registration["requests"] as? Int)
        #expect(rotations["identityHolds"] as? Bool == true)
        let reasons = try #require(events["missingByReason"] as? [String: Int])
        #expect((reasons["new token not registered (rotation while serving)"] ?? 0) > 0, "\(reasons)")
        #expect(reasons["never pushed"] == nil, "\(reasons)")
        #expect(serve.stderr.contains("missing=0 broken"), "\(serve.stderr)")
    }

    @Test("a backend that takes the new tokens (2xx) and never pushes to them: missing, named for it; compare exit 2")
    func newTokensIgnored() throws {
        let directory = try CLI.temporaryDirectory()
        let (healthy, _) = try Self.run("healthy", directory)
        #expect(healthy.stop() == 0, "\(healthy.stderr)")
        let (serve, _) = try Self.run("keep-old", directory)
        #expect(serve.stop() == 2, "\(serve.stderr)")
        let events = try #require(try serve.summary()["events"] as? [String: Any])
        let rotations = try #require(events["rotations"] as? [String: Any])
        let registration = try #require(rotations["registration"] as? [String: Any])
        #expect((registration["registered"] as? Int ?? 0) > 5 && registration["failed"] as? Int == 0, "\(registration)")
        // It drops each old token at its 410, as told: nothing sent to unregistered tokens, the activities left behind.
        #expect(events["sentToUnregistered"] as? Int == 0, "\(events)")
        let reasons = try #require(events["missingByReason"] as? [String: Int])
        let named = reasons["new token registered, never pushed to (rotation while serving)"] ?? 0
        #expect(named > 0 && reasons["never pushed"] == nil, "\(reasons)")
        #expect(serve.stderr.contains("missing=0 broken"), "\(serve.stderr)")
        let compare = try CLI.run(["compare", healthy.folder.path, serve.folder.path])
        #expect(compare.status == 2, "\(compare.stdout)\n\(compare.stderr)")
        let line = compare.stdout.split(separator: "\n").first { $0.hasPrefix("events.missing ") }
        #expect(line?.hasSuffix("REGRESSION") == true, "\(compare.stdout)")
    }

    @Test("rotation while serving without --register: a usage error (exit 64), nothing served")
    func needsRegister() throws {
        let directory = try CLI.temporaryDirectory()
        let result = try CLI.run(
            ["serve", try Self.scenario(directory), "--h2c", "--listen", "127.0.0.1:0", "--duration", "1",
             "--out", directory.appendingPathComponent("run").path])
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("faults.rotationWhileServing): give --register URL"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("run").path))
    }
}
