import Foundation
import Testing

/// App events while serving (`faults.appEvents`, docs/INGEST.md §5) against a real backend: a Python one on
/// 127.0.0.1 (Resources/lifecycle_backend.py) registers the activities, hears the app events at `/app-events`, takes
/// the trigger and pushes back over HTTP/2. One that drops an activity when the app tells it of its end passes; one
/// that ignores app events (`--ignore-app-events`) fails on `sentAfterAppEvent`, and `fanout compare` names it.
@Suite("fanout serve: app events, a backend that honours them and one that ignores them", .serialized)
struct AppEventsBackendTests {
    static let seconds = 8

    /// A scenario of token sources only: 40 devices, an activity each, 4 events a second; a third of the activities
    /// dismissed, a tenth turned off and a fifth uninstalled while serving, a 2 s grace.
    static func scenario(_ directory: URL, appEvents: String? = nil) throws -> String {
        let events = appEvents ?? #"{"dismiss": 0.3, "disable": 0.1, "uninstall": 0.2, "graceSeconds": 2}"#
        return try LifecycleScenario.write(
            directory, "app-events.json", name: "app-events", seed: 5, seconds: seconds,
            faults: #"{"appEvents": "# + events + "}")
    }

    /// One run against a backend (`options`: the backend's own flags), to its `--duration`: the serve process
    /// (ended), the backend.
    static func run(_ name: String, _ options: [String], _ directory: URL) throws -> (ServeProcess, TriggerBackend) {
        let apnsPort = directory.appendingPathComponent("apns-port-\(name)")
        let backend = try TriggerBackend("healthy", [apnsPort.path] + options, script: "lifecycle_backend")
        let register = backend.url.replacingOccurrences(of: "/trigger", with: "/register")
        let appEvents = backend.url.replacingOccurrences(of: "/trigger", with: "/app-events")
        let serve = try ServeProcess(
            ["--h2c", "--workers", "2", "--duration", "\(seconds)", "--settle", "2", "--state", "none",
             "--expect-events", "--register", register, "--app-events", appEvents, "--trigger", backend.url,
             "--trigger-max-lag", "5000"],
            scenario: try scenario(directory))
        try "\(serve.port)".write(to: apnsPort, atomically: true, encoding: .utf8)
        let deadline = Date().addingTimeInterval(90)
        while serve.process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        return (serve, backend)
    }

    @Test("a backend honouring app events passes (0 sent after them); one ignoring them exits 2, compare names it")
    func honourOrIgnore() throws {
        let directory = try CLI.temporaryDirectory()
        let (healthy, heard) = try Self.run("healthy", [], directory)
        #expect(healthy.stop() == 0, "\(healthy.stderr)")
        let good = try healthy.summary()
        let events = try #require(good["events"] as? [String: Any])
        let app = try #require(events["appEvents"] as? [String: Any])
        #expect(events["sentAfterAppEvent"] as? Int == 0 && events["missing"] as? Int == 0, "\(events)")
        #expect((app["applied"] as? Int ?? 0) > 5 && (app["notExpected"] as? Int ?? 0) > 0, "\(app)")
        let byKind = try #require(app["appliedByKind"] as? [String: Int])
        #expect((byKind["dismissed"] ?? 0) > 0 && (byKind["uninstalled"] ?? 0) > 0, "\(byKind)")
        let requests = try #require(app["requests"] as? [String: Any])
        #expect((requests["told"] as? Int ?? 0) >= (app["applied"] as? Int ?? 0) - 2 && requests["failed"] as? Int == 0,
                "\(requests)")
        #expect(app["identityHolds"] as? Bool == true)
        #expect((events["identity"] as? [String: Any])?["holds"] as? Bool == true)
        #expect(healthy.stderr.contains("sentAfterAppEvent=0 (0 of"), "\(healthy.stderr)")
        // The backend heard them: one request per app event told, each naming its kind and activity.
        let told = try heard.requests().filter { $0["appEvent"] != nil }
        #expect(told.count >= requests["told"] as? Int ?? 0, "\(told)")
        let kinds = Set(told.compactMap { $0["appEvent"] as? String })
        #expect(kinds.isSubset(of: ["dismissed", "disabled", "uninstalled"]) && kinds.contains("dismissed"))
        let md = CLI.text(of: healthy.folder.appendingPathComponent("summary.md"))
        #expect(md.contains("App events while serving:") && md.contains("then 0 sent after the app event"))
        let html = CLI.text(of: healthy.folder.appendingPathComponent("report.html"))
        #expect(html.contains("App events while serving:"))

        let (ignoring, backend) = try Self.run("ignoring", ["--ignore-app-events"], directory)
        #expect(ignoring.stop() == 2, "\(ignoring.stderr)")
        let bad = try #require(try ignoring.summary()["events"] as? [String: Any])
        let sent = bad["sentAfterAppEvent"] as? Int ?? 0
        #expect(sent > 0 && bad["missing"] as? Int == 0, "\(bad)")
        let badApp = try #require(bad["appEvents"] as? [String: Any])
        let sentByKind = try #require(badApp["sentAfterAppEventByKind"] as? [String: Int])
        #expect((sentByKind["dismissed"] ?? 0) > 0, "\(sentByKind)")
        #expect(ignoring.stderr.contains("sentAfterAppEvent=0 broken"), "\(ignoring.stderr)")
        // It went on pushing to the ended activities (answered 200, ignored by the device) and once to each
        // uninstalled app's token (410 Unregistered, then dropped).
        #expect(try backend.requests().contains { $0["status"] as? Int == 410 })
        let compare = try CLI.run(["compare", healthy.folder.path, ignoring.folder.path])
        #expect(compare.status == 2, "\(compare.stdout)\n\(compare.stderr)")
        #expect(compare.stdout.contains("events.sentAfterAppEvent"), "\(compare.stdout)")
        let same = try CLI.run(["compare", healthy.folder.path, healthy.folder.path])
        #expect(same.status == 0, "\(same.stdout)\n\(same.stderr)")
    }

    @Test("a backend refusing the app's requests (500) fails on appEvents.failed, its side named")
    func refused() throws {
        let directory = try CLI.temporaryDirectory()
        let (serve, _) = try Self.run("refusing", ["--refuse-app-events"], directory)
        #expect(serve.stop() == 2, "\(serve.stderr)")
        let events = try #require(try serve.summary()["events"] as? [String: Any])
        let app = try #require(events["appEvents"] as? [String: Any])
        let requests = try #require(app["requests"] as? [String: Any])
        let failed = requests["failed"] as? Int ?? 0
        #expect(failed > 0 && requests["told"] as? Int == 0, "\(requests)")
        #expect(serve.stderr.contains("appEvents.failed=0 broken (measured \(failed) of"), "\(serve.stderr)")
        #expect(app["identityHolds"] as? Bool == true, "\(app)")
    }

    @Test("app events without --app-events or --expect-events, --app-events without app events: exit 64; shares over 1")
    func needsAppEvents() throws {
        let directory = try CLI.temporaryDirectory()
        let out = directory.appendingPathComponent("run").path
        let without = try CLI.run(
            ["serve", try Self.scenario(directory), "--h2c", "--listen", "127.0.0.1:0", "--duration", "5",
             "--expect-events", "--out", out])
        #expect(without.status == 64, "\(without.stderr)")
        #expect(without.stderr.contains("faults.appEvents): give --app-events URL"), "\(without.stderr)")
        let unjudged = try CLI.run(
            ["serve", try Self.scenario(directory), "--h2c", "--listen", "127.0.0.1:0", "--duration", "5",
             "--app-events", "http://127.0.0.1:9/app-events", "--out", out])
        #expect(unjudged.status == 64, "\(unjudged.stderr)")
        #expect(unjudged.stderr.contains("judged with --expect-events"), "\(unjudged.stderr)")
        let none = try CLI.run(
            ["serve", try Self.scenario(directory, appEvents: "null"), "--h2c", "--listen", "127.0.0.1:0",
             "--duration", "5", "--expect-events", "--app-events", "http://127.0.0.1:9/app-events", "--out", out])
        #expect(none.status == 64, "\(none.stderr)")
        #expect(none.stderr.contains("--app-events: the scenario has no app events"), "\(none.stderr)")
        let over = try CLI.run(
            ["serve", try Self.scenario(directory, appEvents: #"{"dismiss": 0.6, "uninstall": 0.5}"#), "--h2c",
             "--listen", "127.0.0.1:0", "--duration", "5", "--out", out])
        #expect(over.status == 1, "\(over.stderr)")  // a bad scenario file, as every other one
        #expect(over.stderr.contains("faults.appEvents: dismiss + disable + uninstall add up to"), "\(over.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
    }
}
