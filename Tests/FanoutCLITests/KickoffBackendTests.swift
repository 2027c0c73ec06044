import Foundation
import Testing

/// Kickoff by push-to-start (`faults.kickoff`, docs/INGEST.md §5) against a real backend: a Python one on 127.0.0.1
/// (Resources/lifecycle_backend.py) registers the devices' push-to-start tokens, takes the trigger's start events and
/// pushes a start to every token of the source, registers each started activity when its app sends it, and pushes
/// the source's updates to it over HTTP/2. The healthy one passes with every activity started, registered and
/// followed; one that never pushes the start, one that never pushes to the started activities, and a device budget of
/// 0 each fail on a named count, and `fanout compare` against the healthy run names it.
@Suite("fanout serve: kickoff by push-to-start, a backend that starts and follows, and ones that do not", .serialized)
struct KickoffBackendTests {
    static let seconds = 8

    /// Token sources only: 40 devices, an activity each, 4 events a second; every source starts by push-to-start at
    /// 1 s, the app registering each started activity after 30 ms (p50) to 150 ms (p99).
    static func scenario(_ directory: URL, budget: Int = 10) throws -> String {
        try LifecycleScenario.write(
            directory, "kickoff-\(budget).json", name: "kickoff", seed: 3, seconds: seconds,
            faults: #"{"kickoff": {"share": 1, "atSeconds": 1, "appDelayMillis": {"p50": 30, "p99": 150}, "#
                + #""startBudget": \#(budget)}}"#)
    }

    /// One run against a backend in `mode`, to its `--duration`: the serve process (ended), the backend.
    static func run(_ mode: String, _ directory: URL, budget: Int = 10) throws -> (ServeProcess, TriggerBackend) {
        let apnsPort = directory.appendingPathComponent("apns-port-\(mode)-\(budget)")
        let backend = try TriggerBackend(mode, [apnsPort.path], script: "lifecycle_backend")
        let register = backend.url.replacingOccurrences(of: "/trigger", with: "/register")
        let serve = try ServeProcess(
            ["--h2c", "--workers", "2", "--duration", "\(seconds)", "--settle", "2", "--state", "none",
             "--expect-events", "--register", register, "--trigger", backend.url, "--trigger-max-lag", "5000"],
            scenario: try scenario(directory, budget: budget))
        try "\(serve.port)".write(to: apnsPort, atomically: true, encoding: .utf8)
        let deadline = Date().addingTimeInterval(90)
        while serve.process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        return (serve, backend)
    }

    static func kickoff(_ serve: ServeProcess) throws -> ([String: Any], [String: Any]) {
        let events = try #require(try serve.summary()["events"] as? [String: Any])
        return (events, try #require(events["kickoff"] as? [String: Any]))
    }

    @Test("a healthy backend: every activity started, registered and followed, 0 missing, the latency reported")
    func healthy() throws {
        let directory = try CLI.temporaryDirectory()
        let (serve, backend) = try Self.run("healthy", directory)
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let (events, k) = try Self.kickoff(serve)
        #expect(k["activities"] as? Int == 40 && k["due"] as? Int == 40 && k["started"] as? Int == 40, "\(k)")
        #expect(k["notStarted"] as? Int == 0 && k["followed"] as? Int == 40 && k["identityHolds"] as? Bool == true)
        let registration = try #require(k["registration"] as? [String: Any])
        #expect(registration["registered"] as? Int == 40 && registration["failed"] as? Int == 0, "\(registration)")
        for step in ["toLockScreen", "toRegistered", "toFirstUpdate"] {
            #expect((k[step] as? [String: Any])?["count"] as? Int == 40, "\(step): \(k)")
        }
        #expect(events["missing"] as? Int == 0 && events["kickoffNotStarted"] as? Int == 0, "\(events)")
        #expect((events["delivered"] as? Int ?? 0) > 100 && events["uncorrelated"] as? Int == 0, "\(events)")
        #expect((events["identity"] as? [String: Any])?["holds"] as? Bool == true)
        #expect(serve.stderr.contains("kickoff.notStarted=0 (0 of 40)"), "\(serve.stderr)")
        // The backend pushed one start per device (one push-to-start token each), every one answered 200.
        let starts = try backend.requests().filter { $0["start"] != nil }
        #expect(starts.count == 40 && starts.allSatisfy { $0["status"] as? Int == 200 }, "\(starts)")
        let md = CLI.text(of: serve.folder.appendingPathComponent("summary.md"))
        #expect(md.contains("Kickoff by push-to-start: 4 sources, 40 activities") && md.contains("on the Lock Screen"))
        let html = CLI.text(of: serve.folder.appendingPathComponent("report.html"))
        #expect(html.contains("<h3>Kickoff by push-to-start</h3>") && html.contains("first update delivered"))
        let population = CLI.text(of: serve.folder.appendingPathComponent("population.jsonl"))
        #expect(population.split(separator: "\n").count == 40 && population.contains("\"activity\": null"))
    }

    @Test("no start pushed, the started never pushed to, a spent budget: each fails on its count; compare exit 2")
    func failures() throws {
        let directory = try CLI.temporaryDirectory()
        let (healthy, _) = try Self.run("healthy", directory)
        #expect(healthy.stop() == 0, "\(healthy.stderr)")

        let (noStart, _) = try Self.run("no-start", directory)
        #expect(noStart.stop() == 2, "\(noStart.stderr)")
        var (events, k) = try Self.kickoff(noStart)
        #expect(k["notStarted"] as? Int == 40 && k["started"] as? Int == 0, "\(k)")
        #expect((k["notStartedByReason"] as? [String: Int])?[
            "start never pushed (no push-to-start reached the device)"] == 40, "\(k)")
        #expect(events["kickoffNotStarted"] as? Int == 40 && k["identityHolds"] as? Bool == true)
        #expect(noStart.stderr.contains("kickoff.notStarted=0 broken (measured 40 of 40"), "\(noStart.stderr)")
        var compare = try CLI.run(["compare", healthy.folder.path, noStart.folder.path])
        #expect(compare.status == 2 && compare.stdout.contains("events.kickoffNotStarted"), "\(compare.stdout)")

        let (ignored, _) = try Self.run("ignore-started", directory)
        #expect(ignored.stop() == 2, "\(ignored.stderr)")
        (events, k) = try Self.kickoff(ignored)
        #expect(k["started"] as? Int == 40 && k["notStarted"] as? Int == 0 && k["followed"] as? Int == 0, "\(k)")
        let reasons = try #require(events["missingByReason"] as? [String: Int])
        let named = reasons["started by push-to-start and registered, never pushed to (kickoff)"] ?? 0
        #expect(named > 40 && named == events["missing"] as? Int, "\(reasons)")
        compare = try CLI.run(["compare", healthy.folder.path, ignored.folder.path])
        #expect(compare.status == 2 && compare.stdout.contains("events.missing"), "\(compare.stdout)")

        let (spent, _) = try Self.run("healthy", directory, budget: 0)
        #expect(spent.stop() == 2, "\(spent.stderr)")
        (events, k) = try Self.kickoff(spent)
        #expect(k["budgetRefusals"] as? Int == 40 && k["started"] as? Int == 0, "\(k)")
        #expect((k["notStartedByReason"] as? [String: Int])?[
            "refused by the device (its push-to-start budget spent)"] == 40, "\(k)")
        // Another scenario (its budget): compare refuses unless told, then names the count.
        compare = try CLI.run(["compare", healthy.folder.path, spent.folder.path])
        #expect(compare.status == 6, "\(compare.status) \(compare.stderr)")
        compare = try CLI.run(["compare", "--allow-config-change", healthy.folder.path, spent.folder.path])
        #expect(compare.status == 2 && compare.stdout.contains("events.kickoffNotStarted"), "\(compare.stdout)")
    }

    @Test("a kickoff without --trigger, --register or --expect-events, or with --shard, is refused (exit 64)")
    func flags() throws {
        let directory = try CLI.temporaryDirectory()
        let scenario = try Self.scenario(directory)
        for (extra, words) in [
            (["--expect-events", "--register", "http://127.0.0.1:9/r"], "--trigger URL"),
            (["--expect-events", "--trigger", "http://127.0.0.1:9/t"], "--register URL"),
            (["--trigger", "http://127.0.0.1:9/t", "--register", "http://127.0.0.1:9/r"], "--expect-events"),
            (["--expect-events", "--trigger", "http://127.0.0.1:9/t", "--register", "http://127.0.0.1:9/r",
              "--shard", "0/2"], "served whole"),
        ] {
            let r = try CLI.run(["serve", scenario, "--h2c", "--duration", "5"] + extra)
            #expect(r.status == 64 && r.stderr.contains(words), "\(extra): \(r.stderr)")
        }
    }
}
