import Foundation
import Testing

// curl over h2c and TLS. The same suite continues by subject in ServeCommandTests+Load.swift (h2load, event
// loops), +Python.swift (Python h2: channels, events, faults, provider tokens) and +Hostile.swift (hostile and
// silent clients, bad flags); ServeCommandSupport.swift holds what they share (ServeProcess, Tool, curl).
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
}
