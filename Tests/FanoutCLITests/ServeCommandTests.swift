import Foundation
import Testing

/// `fanout serve` started by the test on 127.0.0.1 (a free port), driven by clients nobody here wrote: curl,
/// h2load (nghttp2) and Python's `h2` library; stopped with SIGTERM, which must end it with status 0 and a
/// complete run folder.
final class ServeProcess {
    let process = Process()
    let directory: URL
    let folder: URL
    let errors: URL
    private(set) var port = 0

    init(_ arguments: [String], scenario: String = "smoke", environment: [String: String] = [:]) throws {
        directory = try CLI.temporaryDirectory()
        folder = directory.appendingPathComponent("run")
        errors = directory.appendingPathComponent("serve.err")
        let output = directory.appendingPathComponent("serve.out")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        process.executableURL = CLI.binary
        process.arguments = ["serve", scenario, "--listen", "127.0.0.1:0", "--out", folder.path] + arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardError = try FileHandle(forWritingTo: errors)
        process.standardOutput = try FileHandle(forWritingTo: output)
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let text = CLI.text(of: errors)
            if let range = text.range(of: #"listening on 127\.0\.0\.1:[0-9]+"#, options: .regularExpression) {
                port = Int(text[range].split(separator: ":").last!)!
                return
            }
            if !process.isRunning { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        if process.isRunning { process.terminate() }
        throw CLIFailure("fanout serve did not start: \(CLI.text(of: errors))")
    }

    /// SIGTERM, then the exit status; a server still running after 30 s is killed (and the status shows it).
    func stop() -> Int32 {
        if process.isRunning { process.terminate() }
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    var stderr: String { CLI.text(of: errors) }

    func summary() throws -> [String: Any] {
        let data = try Data(contentsOf: folder.appendingPathComponent("summary.json"))
        return try JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    func population() throws -> [[String: Any]] {
        let text = try String(contentsOf: folder.appendingPathComponent("population.jsonl"), encoding: .utf8)
        return try text.split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
    }
}

struct CLIFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A program found on PATH (curl, h2load, python3, openssl).
enum Tool {
    /// A tool found on PATH (curl, h2load, openssl, python3), run to its end.
    static func run(_ name: String, _ arguments: [String]) throws -> CLI.Result {
        try CLI.launch(URL(fileURLWithPath: "/usr/bin/env"), [name] + arguments)
    }

    static var script: String { Bundle.module.url(forResource: "Resources/serve_client", withExtension: "py")!.path }
    static var boundsScript: String {
        Bundle.module.url(forResource: "Resources/serve_bounds", withExtension: "py")!.path
    }
}

/// A curl answer: status, headers, body.
struct CurlAnswer {
    var status: Int
    var headers: [String: String]
    var body: String

    init(_ text: String) {
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        body = parts.dropFirst().joined(separator: "\r\n\r\n")
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        status = Int(statusLine.split(separator: " ").dropFirst().first ?? "0") ?? 0
        headers = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
    }
}

func curl(_ port: Int, _ method: String, _ path: String, headers: [(String, String)], body: String?, tls: String? = nil)
    throws -> CurlAnswer
{
    var arguments = ["-s", "-i", "-X", method]
    if let tls {
        arguments += ["--http2", "--cacert", tls, "https://localhost:\(port)\(path)", "--resolve", "localhost:\(port):127.0.0.1"]
    } else {
        arguments += ["--http2-prior-knowledge", "http://127.0.0.1:\(port)\(path)"]
    }
    for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
    if let body { arguments += ["--data-binary", body] }
    let result = try Tool.run("curl", arguments)
    guard result.status == 0 else { throw CLIFailure("curl failed (\(result.status)): \(result.stderr)") }
    return CurlAnswer(result.stdout)
}

func livePayload(timestamp: Int, event: String = "update") -> String {
    #"{"aps":{"event":"\#(event)","timestamp":\#(timestamp),"content-state":{"home":3,"away":1,"clock":"88:00","# +
        #""winProbability":0.9,"final":false,"lastEvent":"goal"}}}"#
}

@Suite("fanout serve (the executable, real HTTP/2 clients)", .serialized)
struct ServeCommandTests {
    @Test("curl h2c: a valid update is answered 200 with its apns-id and applied by the device")
    func validUpdate() throws {
        let serve = try ServeProcess(["--h2c", "--workers", "1"])
        let p = try serve.population().first { ($0["app"] as! String) == "com.example.scores" }!
        let now = Int(Date().timeIntervalSince1970)
        let id = "123e4567-e89b-12d3-a456-426614174000"
        let answer = try curl(
            serve.port, "POST", "/3/device/\(p["token"] as! String)",
            headers: [
                ("apns-push-type", "liveactivity"), ("apns-topic", "com.example.scores.push-type.liveactivity"),
                ("apns-id", id), ("apns-priority", "10"),
            ], body: livePayload(timestamp: now))
        #expect(answer.status == 200)
        #expect(answer.headers["apns-id"] == id)
        #expect(answer.body.isEmpty)
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let state = try String(contentsOf: serve.folder.appendingPathComponent("state.jsonl"), encoding: .utf8)
        let activity = p["activity"] as! String
        let line = state.split(separator: "\n").first { $0.hasPrefix("{\"activity\": \"\(activity)\"") }
        #expect(line?.contains("\"timestamp\": \(now)") == true, "\(line ?? "no line")")
        let summary = try serve.summary()
        let accounting = summary["accounting"] as! [String: Any]
        #expect((accounting["outcomes"] as! [String: Int])["applied"] == 1)
        #expect(accounting["identitiesHold"] as? Bool == true)
        #expect((summary["requests"] as! [String: Any])["identitiesHold"] as? Bool == true)
        let html = try String(contentsOf: serve.folder.appendingPathComponent("report.html"), encoding: .utf8)
        #expect(html.contains("<title>fanout serve: smoke</title>") && !html.contains("<script"))
        for file in ["summary.md", "service.hgrm", "delivery.hgrm", "fanout.hgrm", "rotated-tokens.jsonl", "latency.hlog"] {
            #expect(FileManager.default.fileExists(atPath: serve.folder.appendingPathComponent(file).path), "\(file)")
        }
    }

    @Test("curl h2c: every reason of docs/INGEST.md §3 with APNs's status and JSON body")
    func everyReason() throws {
        let serve = try ServeProcess(["--h2c"])
        let population = try serve.population()
        let scores = population.first { ($0["app"] as! String) == "com.example.scores" }!
        let token = scores["token"] as! String
        let channel = population.first { $0["channel"] is String }!
        let channelApp = channel["app"] as! String
        let rotated = try String(contentsOf: serve.folder.appendingPathComponent("rotated-tokens.jsonl"), encoding: .utf8)
        let old = try JSONSerialization.jsonObject(with: Data(rotated.split(separator: "\n").first!.utf8)) as! [String: Any]
        let now = Int(Date().timeIntervalSince1970)
        let valid = livePayload(timestamp: now)
        let topic = ("apns-topic", "com.example.scores.push-type.liveactivity")
        let type = ("apns-push-type", "liveactivity")
        let broadcast: [(String, String)] = [
            ("apns-channel-id", channel["channel"] as! String), ("apns-push-type", "LiveActivity"),
            ("apns-priority", "10"), ("apns-expiration", "0"),
        ]
        struct Case {
            var method = "POST"
            var path: String
            var headers: [(String, String)]
            var body: String?
            var status: Int
            var reason: String
        }
        let push = "/3/device/\(token)"
        let cases: [Case] = [
            Case(method: "PUT", path: push, headers: [type, topic], body: valid, status: 405, reason: "MethodNotAllowed"),
            Case(method: "GET", path: push, headers: [type, topic], body: nil, status: 405, reason: "MethodNotAllowed"),
            Case(path: "/3/devices/\(token)", headers: [type, topic], body: valid, status: 404, reason: "BadPath"),
            Case(path: "/3/device/", headers: [type, topic], body: valid, status: 400, reason: "MissingDeviceToken"),
            Case(path: push, headers: [type, topic, topic], body: valid, status: 400, reason: "DuplicateHeaders"),
            Case(path: push, headers: [type, topic], body: "", status: 400, reason: "PayloadEmpty"),
            Case(
                path: push, headers: [type, topic], body: String(repeating: " ", count: 4097), status: 413,
                reason: "PayloadTooLarge"),
            Case(path: push, headers: [topic], body: valid, status: 400, reason: "InvalidPushType"),
            Case(path: push, headers: [("apns-push-type", "nonsense"), topic], body: valid, status: 400,
                reason: "InvalidPushType"),
            Case(path: push, headers: [type], body: valid, status: 400, reason: "MissingTopic"),
            Case(path: push, headers: [type, ("apns-topic", "com.example.scores")], body: valid, status: 400,
                reason: "TopicDisallowed"),
            Case(path: push, headers: [type, topic, ("apns-priority", "7")], body: valid, status: 400,
                reason: "BadPriority"),
            Case(path: push, headers: [type, topic, ("apns-collapse-id", String(repeating: "c", count: 65))],
                body: valid, status: 400, reason: "BadCollapseId"),
            Case(path: push, headers: [type, topic, ("apns-id", "not-a-uuid")], body: valid, status: 400,
                reason: "BadMessageId"),
            Case(path: push, headers: [type, topic, ("apns-expiration", "-1")], body: valid, status: 400,
                reason: "BadExpirationDate"),
            Case(path: "/3/device/abc", headers: [type, topic], body: valid, status: 400, reason: "BadDeviceToken"),
            Case(path: "/3/device/" + String(repeating: "ab", count: 32), headers: [type, topic], body: valid,
                status: 400, reason: "BadDeviceToken"),
            Case(path: push, headers: [type, ("apns-topic", "com.example.deliveries.push-type.liveactivity")],
                body: valid, status: 400, reason: "DeviceTokenNotForTopic"),
            Case(path: "/3/device/\(old["token"] as! String)", headers: [type, topic], body: valid, status: 410,
                reason: "Unregistered"),
            Case(path: "/4/broadcasts/apps/\(channelApp)", headers: Array(broadcast.dropFirst()), body: valid,
                status: 400, reason: "MissingChannelId"),
            Case(path: "/4/broadcasts/apps/\(channelApp)", headers: [("apns-channel-id", "@@@")] + broadcast.dropFirst(),
                body: valid, status: 400, reason: "BadChannelId"),
            Case(path: "/4/broadcasts/apps/\(channelApp)", headers: [("apns-channel-id", "bm9uZQ==")] + broadcast.dropFirst(),
                body: valid, status: 400, reason: "ChannelNotRegistered"),
            Case(path: "/4/broadcasts/apps/\(channelApp)", headers: broadcast.filter { $0.0 != "apns-push-type" },
                body: valid, status: 400, reason: "MissingPushType"),
            Case(path: push, headers: [type, topic], body: #"{"aps":{"event":"update"}}"#, status: 400,
                reason: "BadRequestPayload"),
            Case(path: push, headers: [type, topic], body: "{not json", status: 400, reason: "BadRequestPayload"),
            // Several faults: the first failing check of the list answers.
            Case(path: "/3/device/abc", headers: [topic, ("apns-priority", "7")], body: "", status: 400,
                reason: "PayloadEmpty"),
            Case(path: "/3/device/abc", headers: [type, ("apns-priority", "7")], body: valid, status: 400,
                reason: "MissingTopic"),
        ]
        var seen: [String: Int] = [:]
        for c in cases {
            let answer = try curl(serve.port, c.method, c.path, headers: c.headers, body: c.body)
            let expected = c.reason == "Unregistered"
                ? #"{"reason":"Unregistered","timestamp":\#(old["retiredAt"] as! Int)}"#
                : #"{"reason":"\#(c.reason)"}"#
            #expect(answer.status == c.status && answer.body == expected, "\(c.path) \(c.headers): \(answer.body)")
            #expect(answer.headers["content-type"] == "application/json", "\(c.reason)")
            seen[c.reason, default: 0] += 1
        }
        #expect(serve.stop() == 0)
        let summary = try serve.summary()
        let requests = summary["requests"] as! [String: Any]
        #expect(requests["total"] as? Int == cases.count)
        #expect(requests["identitiesHold"] as? Bool == true)
        let byReason = requests["byReason"] as! [String: Int]
        #expect(byReason == seen)
        let md = try String(contentsOf: serve.folder.appendingPathComponent("summary.md"), encoding: .utf8)
        #expect(md.contains("pushes to tokens that were rotated away (410 Unregistered)**: 1"))
        #expect(md.contains(String((old["token"] as! String).prefix(16))))
    }

    @Test("curl over TLS 1.2+ with ALPN h2 and a certificate made by openssl")
    func tls() throws {
        let dir = try CLI.temporaryDirectory()
        let cert = dir.appendingPathComponent("cert.pem").path
        let key = dir.appendingPathComponent("key.pem").path
        let made = try Tool.run(
            "openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                "-out", cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
            ])
        #expect(made.status == 0, "\(made.stderr)")
        let serve = try ServeProcess(["--tls-cert", cert, "--tls-key", key])
        let p = try serve.population().first!
        let answer = try curl(
            serve.port, "POST", "/3/device/\(p["token"] as! String)",
            headers: [("apns-push-type", "liveactivity"), ("apns-topic", "\(p["app"] as! String).push-type.liveactivity")],
            body: livePayload(timestamp: Int(Date().timeIntervalSince1970)), tls: cert)
        #expect(answer.status == 200 && answer.headers["apns-id"] != nil)
        let python = try Tool.run("python3", [Tool.script, "tls", String(serve.port), cert, serve.folder.path])
        #expect(python.status == 0, "\(python.stdout) \(python.stderr)")
        // A client offering only HTTP/1.1 is refused in the handshake (APNs speaks nothing but HTTP/2).
        let h1 = try Tool.run(
            "curl", ["-s", "--http1.1", "--cacert", cert, "--resolve", "localhost:\(serve.port):127.0.0.1",
                "https://localhost:\(serve.port)/3/device/aa"])
        #expect(h1.status != 0)
        #expect(serve.stop() == 0)
        let connections = try serve.summary()["connections"] as! [String: Any]
        #expect(connections["tls"] as? Int == 3)
    }

    @Test("h2load: 20,000 pushes on 4 connections × 100 streams, every answer accounted for")
    func h2load() throws {
        let serve = try ServeProcess(["--h2c"])
        let p = try serve.population().first!
        let body = serve.directory.appendingPathComponent("payload.json")
        let now = Int(Date().timeIntervalSince1970)
        try livePayload(timestamp: now).write(to: body, atomically: true, encoding: .utf8)
        let result = try Tool.run(
            "h2load",
            [
                "-n", "20000", "-c", "4", "-m", "100", "-d", body.path,
                "-H", "apns-push-type: liveactivity", "-H", "apns-topic: \(p["app"] as! String).push-type.liveactivity",
                "http://127.0.0.1:\(serve.port)/3/device/\(p["token"] as! String)",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("20000 succeeded"), "\(result.stdout)")
        #expect(serve.stop() == 0)
        let summary = try serve.summary()
        let requests = summary["requests"] as! [String: Any]
        #expect(requests["total"] as? Int == 20000)
        #expect((requests["byStatus"] as! [String: Int])["200"] == 20000)
        let accounting = summary["accounting"] as! [String: Any]
        let outcomes = accounting["outcomes"] as! [String: Int]
        // One timestamp, 20,000 times: the first applies, every retry is a duplicate the device ignores.
        #expect(outcomes["applied"] == 1 && outcomes["ignoredStaleTimestamp"] == 19_999, "\(outcomes)")
        #expect(accounting["deliveries"] as? Int == 20000)
        #expect(accounting["identitiesHold"] as? Bool == true)
        let latency = summary["latency"] as! [String: [String: Any]]
        #expect(latency["service"]?["count"] as? Int == 20000)
        // The wire identity, from two code paths: 20,000 answers judged by the service, 20,000 taken by nghttp2.
        let connections = summary["connections"] as! [String: Any]
        #expect(connections["responsesSubmitted"] as? Int == 20000 && connections["answersDropped"] as? Int == 0)
        #expect(requests["wireIdentityHolds"] as? Bool == true)
        let findings = summary["findings"] as! [String: [String: Any]]
        #expect(findings["staleTimestamp"]?["count"] as? Int == 19_999)
    }

    @Test("two event loops: pushes to every token reach the loop owning the device; counts add up across loops")
    func twoLoops() throws {
        let serve = try ServeProcess(["--h2c", "--workers", "2"])
        let population = try serve.population()
        let scores = population.filter { ($0["app"] as! String) == "com.example.scores" }
        let uris = serve.directory.appendingPathComponent("uris.txt")
        try scores.map { "http://127.0.0.1:\(serve.port)/3/device/\($0["token"] as! String)\n" }.joined()
            .write(to: uris, atomically: true, encoding: .utf8)
        let body = serve.directory.appendingPathComponent("payload.json")
        try livePayload(timestamp: Int(Date().timeIntervalSince1970)).write(to: body, atomically: true, encoding: .utf8)
        let n = scores.count * 3
        let result = try Tool.run(
            "h2load",
            [
                // h2load's clients each walk the URI list from the start: 3 clients × every token once.
                "-n", String(n), "-c", "3", "-m", "32", "-d", body.path, "-H", "apns-push-type: liveactivity",
                "-H", "apns-topic: com.example.scores.push-type.liveactivity", "-i", uris.path,
            ])
        #expect(result.stdout.contains("\(n) succeeded"), "\(result.stdout)")
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let summary = try serve.summary()
        #expect(summary["workers"] as? Int == 2)
        let requests = summary["requests"] as! [String: Any]
        #expect(requests["total"] as? Int == n && requests["identitiesHold"] as? Bool == true)
        #expect(requests["wireIdentityHolds"] as? Bool == true)
        let accounting = summary["accounting"] as! [String: Any]
        let outcomes = accounting["outcomes"] as! [String: Int]
        // Every token three times: the first push applies on the device's own loop, the other two are duplicates.
        #expect(outcomes["applied"] == scores.count && outcomes["ignoredStaleTimestamp"] == 2 * scores.count, "\(outcomes)")
        #expect(accounting["identitiesHold"] as? Bool == true)
        #expect((summary["connections"] as! [String: Any])["accepted"] as? Int == 3)
        // The two loops' dumps merged: every activity once, sorted, one totals line.
        let state = try String(contentsOf: serve.folder.appendingPathComponent("state.jsonl"), encoding: .utf8)
        let lines = state.split(separator: "\n")
        let activities = lines.filter { $0.hasPrefix("{\"activity\"") }
        #expect(activities.count == population.count)
        #expect(activities == activities.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        #expect(lines.last?.hasPrefix("{\"totals\"") == true && lines.filter { $0.hasPrefix("{\"totals\"") }.count == 1)
        // latency.hlog, read by HdrHistogram's Python reader: every sample of every metric, once.
        let script = [
            "import sys", "from hdrh.log import HistogramLogReader", "from hdrh.histogram import HdrHistogram",
            "reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600 * 10**9, 3))", "total = 0",
            "while True:", "    h = reader.get_next_interval_histogram()", "    if h is None:", "        break",
            "    total += h.get_total_count()", "print(total)",
        ].joined(separator: "\n")
        let read = try Tool.run("python3", ["-c", script, serve.folder.appendingPathComponent("latency.hlog").path])
        let latency = summary["latency"] as! [String: [String: Any]]
        let expected = ["service", "delivery", "fanout", "validate", "route"].reduce(0) {
            $0 + (latency[$1]?["count"] as? Int ?? -1)
        }
        #expect(Int(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == expected, "\(read.stderr)")
    }

    @Test("Python h2: broadcast and the channel-management API")
    func channels() throws {
        let serve = try ServeProcess(["--h2c"])
        let result = try Tool.run("python3", [Tool.script, "channels", String(serve.port), serve.folder.path])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(serve.stop() == 0)
        let seen = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [String: Any]
        let summary = try serve.summary()
        let accounting = summary["accounting"] as! [String: Any]
        // The scenario channel's subscribers each got the broadcast; the new channel had none.
        #expect(accounting["deliveries"] as? Int == seen["subscribers"] as? Int)
        #expect((summary["requests"] as! [String: Any])["acceptedBroadcasts"] as? Int == 2)
        #expect((summary["latency"] as! [String: [String: Any]])["fanout"]?["count"] as? Int == 2)
    }

    @Test("Python h2, --expect-events: pushes with the events' timestamps correlated, counted and judged at shutdown")
    func expectEvents() throws {
        let serve = try ServeProcess(["--h2c", "--expect-events", "--settle", "0"])
        let result = try Tool.run("python3", [Tool.script, "events", String(serve.port), serve.folder.path])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let seen = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [String: Any]
        let summary = try serve.summary()
        let events = try #require(summary["events"] as? [String: Any])
        #expect(events["events"] as? Int == seen["events"] as? Int)
        #expect(events["correlated"] as? Int == 4 && events["delivered"] as? Int == 2)
        #expect(events["duplicate"] as? Int == 1 && events["reordered"] as? Int == 1)
        #expect(events["notApplied"] as? Int == 0 && events["uncorrelated"] as? Int == 1)
        #expect(events["superseded"] as? Int == 0)
        // Judged at shutdown: every follower of every source with a due event, other than a, is stale at the end.
        let missing = events["missing"] as? Int ?? 0
        #expect(missing > 0 && (events["staleAtEnd"] as? Int ?? 0) > 0)
        #expect(events["expected"] as? Int == 2 + missing)
        #expect((events["identity"] as? [String: Any])?["holds"] as? Bool == true)
        #expect((events["endToEnd"] as? [String: Any])?["count"] as? Int == 2)
        let examples = events["examples"] as? [String: [String]]
        #expect(examples?["uncorrelated"]?.first?.contains(seen["b"] as! String) == true)
        #expect((summary["latency"] as? [String: Any])?["endToEnd"] != nil)
        let files = try FileManager.default.contentsOfDirectory(atPath: serve.folder.path)
        #expect(files.contains("events.jsonl") && files.contains("events-judged.jsonl") && files.contains("endToEnd.hgrm"))
        let md = try String(contentsOf: serve.folder.appendingPathComponent("summary.md"), encoding: .utf8)
        #expect(md.contains("## Events (--expect-events)") && !md.contains("BROKEN"))
        let html = try String(contentsOf: serve.folder.appendingPathComponent("report.html"), encoding: .utf8)
        #expect(html.contains("<h2>Events (--expect-events)</h2>") && !html.contains("BROKEN"))
    }

    /// `fanout serve --faults 503=20% --seed SEED --expect-events` (one worker: one loop draws every fault) and the
    /// `faults` client: what each push got, by apns-id, and summary.json's events.
    static func faultsRun(seed: Int) throws -> (byId: [String: String], seen: [String: Any], events: [String: Any]) {
        let serve = try ServeProcess([
            "--h2c", "--workers", "1", "--faults", "503=20%", "--seed", String(seed), "--expect-events",
            "--settle", "0",
        ])
        let result = try Tool.run("python3", [Tool.script, "faults", String(serve.port), serve.folder.path])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let seen = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [String: Any]
        let events = try #require(try serve.summary()["events"] as? [String: Any])
        return (seen["byId"] as? [String: String] ?? [:], seen, events)
    }

    @Test("Python h2, --faults 503=20%: a seed refuses the same pushes (by apns-id); refused event pushes go missing")
    func faultsBySeed() throws {
        let (first, seen, events) = try Self.faultsRun(seed: 7)
        let (again, _, _) = try Self.faultsRun(seed: 7)
        let (other, _, _) = try Self.faultsRun(seed: 8)
        let refused = first.filter { $0.value == "ServiceUnavailable" }.count
        #expect(first.count == 100 && (5...40).contains(refused), "\(first)")
        #expect(Set(first.values).isSubset(of: ["200", "ServiceUnavailable"]))
        #expect(again == first, "the same seed, the same faults to the same apns-ids")
        #expect(other != first && other.count == 100, "another seed, other faults")
        // Nothing resent: each refused event push is a missing delivery named by its fault; the 100 above carried no
        // event (unmatched).
        let eventRefused = seen["eventRefused"] as? Int ?? -1
        let byReason = events["missingByReason"] as? [String: Int] ?? [:]
        #expect(byReason["refused 503 ServiceUnavailable, never resent", default: 0] == eventRefused, "\(byReason)")
        #expect(byReason.values.reduce(0, +) == events["missing"] as? Int)
        let f = events["refusedNotResent"] as? [String: Int] ?? [:]
        #expect(f["pushes"] == refused + eventRefused && f["unmatched"] == refused, "\(f)")
        #expect(f["missing"] == eventRefused, "\(f)")
        #expect((events["identity"] as? [String: Any])?["holds"] as? Bool == true, "\(events)")
    }

    @Test("without --expect-events: no events in the summary, no endToEnd, no events files")
    func noEvents() throws {
        let serve = try ServeProcess(["--h2c", "--duration", "0.2"])
        #expect(serve.stop() == 0)
        let summary = try serve.summary()
        #expect(summary["events"] == nil && (summary["latency"] as? [String: Any])?["endToEnd"] == nil)
        let files = try FileManager.default.contentsOfDirectory(atPath: serve.folder.path)
        #expect(!files.contains("events.jsonl") && !files.contains("endToEnd.hgrm"))
    }

    @Test("Python h2: ES256 provider tokens checked as APNs does (P-256 keys made by the test)")
    func jwt() throws {
        let dir = try CLI.temporaryDirectory()
        var files: [String] = []
        for k in 1...2 {
            let ec = dir.appendingPathComponent("k\(k).pem").path
            let p8 = dir.appendingPathComponent("k\(k).p8").path
            let pub = dir.appendingPathComponent("k\(k).pub").path
            #expect(try Tool.run("openssl", ["ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", ec]).status == 0)
            #expect(try Tool.run("openssl", ["pkcs8", "-topk8", "-nocrypt", "-in", ec, "-out", p8]).status == 0)
            #expect(try Tool.run("openssl", ["ec", "-in", ec, "-pubout", "-out", pub]).status == 0)
            files += [p8, pub]
        }
        // Key 1 given as its public key, key 2 as the private .p8 Apple hands out.
        let serve = try ServeProcess([
            "--h2c", "--auth", "jwt", "--auth-key", "KEYONE1234=\(files[1])", "--auth-key", "KEYTWO1234=\(files[2])",
            "--team", "TEAM123456",
        ])
        let result = try Tool.run(
            "python3",
            [Tool.script, "jwt", String(serve.port), files[0], "KEYONE1234", files[2], "KEYTWO1234", "TEAM123456",
                serve.folder.path])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(serve.stop() == 0)
        let summary = try serve.summary()
        let byReason = (summary["requests"] as! [String: Any])["byReason"] as! [String: Int]
        #expect(
            byReason == [
                "MissingProviderToken": 1, "InvalidProviderToken": 7, "ExpiredProviderToken": 1,
                "TooManyProviderTokenUpdates": 1, "UnrelatedKeyIdInToken": 1,
            ])
        // One token of the run was signed in DER: a finding for the backend, counted once.
        let der = (summary["findings"] as? [String: Any])?["derSignature"] as? [String: Any]
        #expect(der?["count"] as? Int == 1)
    }

    @Test("hostile clients get a GOAWAY or APNs's answer; everyone else is still served")
    func hostile() throws {
        let serve = try ServeProcess(["--h2c"])
        let result = try Tool.run("python3", [Tool.script, "hostile", String(serve.port), serve.folder.path])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(serve.stop() == 0)
        let summary = try serve.summary()
        let connections = summary["connections"] as! [String: Any]
        let reasons = connections["endReasons"] as! [String: Int]
        #expect(reasons["no HTTP/2 preface"] == 1, "\(reasons)")
        #expect(reasons["no HTTP/2 preface in time"] == nil, "\(reasons)")
        // nghttp2's GOAWAY for the malformed frame is labelled apart from the clients' own clean GOAWAYs.
        #expect(reasons.filter { $0.key.hasPrefix("protocol error") }.values.reduce(0, +) == 1, "\(reasons)")
        #expect((reasons["closed by the client (GOAWAY)"] ?? 0) >= 1, "\(reasons)")
        #expect(connections["trailerFields"] as? Int == 1)
        #expect(connections["accepted"] as? Int == connections["closed"] as? Int)
        let byReason = (summary["requests"] as! [String: Any])["byReason"] as! [String: Int]
        #expect(byReason["PayloadTooLarge"] == 1)
        #expect(byReason["DuplicateHeaders"] == nil, "a trailer is not a duplicate header")
        #expect((summary["requests"] as! [String: Any])["identitiesHold"] as? Bool == true)
        #expect((summary["requests"] as! [String: Any])["wireIdentityHolds"] as? Bool == true)
    }

    @Test("a client that never sends the preface is closed after --preface-timeout (the only such client)")
    func silentClient() throws {
        let serve = try ServeProcess(["--h2c", "--workers", "1", "--preface-timeout", "1"])
        let result = try Tool.run("python3", [Tool.boundsScript, "silent", String(serve.port)])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(serve.stop() == 0)
        let reasons = (try serve.summary()["connections"] as! [String: Any])["endReasons"] as! [String: Int]
        #expect(reasons == ["no HTTP/2 preface in time": 1], "\(reasons)")
    }

    @Test("bad flags: a clear error and a non-zero exit, nothing written")
    func badFlags() throws {
        let dir = try CLI.temporaryDirectory()
        let out = dir.appendingPathComponent("never").path
        for (arguments, message) in [
            (["serve", "smoke", "--out", out], "choose --h2c"),
            (["serve", "smoke", "--h2c", "--tls-cert", "a", "--tls-key", "b", "--out", out], "exclude each other"),
            (["serve", "smoke", "--h2c", "--auth", "jwt", "--out", out], "--auth jwt needs"),
            (["serve", "smoke", "--h2c", "--listen", "nowhere", "--out", out], "--listen: expected HOST:PORT"),
            (["serve", "smoke", "--h2c", "--auth", "magic", "--out", out], "--auth: expected none or jwt"),
            (["serve", "smoke", "--h2c", "--max-streams", "10001", "--out", out], "--max-streams: expected 1 to 10000"),
            (["serve", "smoke", "--h2c", "--max-connections", "0", "--out", out], "--max-connections: expected"),
            (["serve", "smoke", "--h2c", "--request-timeout", "0", "--out", out], "--request-timeout: expected"),
            (["serve", "smoke", "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key", "--out", out],
                "cannot read the certificate"),
        ] {
            let result = try CLI.run(arguments)
            #expect(result.status != 0, "\(arguments)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: out + "/summary.json"))
    }
}
