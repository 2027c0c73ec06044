import Foundation
import Testing

/// `fanout push TARGET TRACE.jsonl` against a Python h2 server (the `h2` library; h2_hostile.py's record mode) that
/// writes down every request it receives: each push line of the trace arrives once, with the path, headers and body
/// the trace gives; shards together send what one run sends; an unreadable trace is refused with its line number.
@Suite("fanout push of a trace")
struct PushTraceTests {
    /// h2_hostile.py in record mode on a free port, appending to `file`.
    final class Recorder {
        let process = Process()
        let port: Int
        let file: URL

        init(file: URL) throws {
            self.file = file
            let output = Pipe()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "python3", Bundle.module.url(forResource: "Resources/h2_hostile", withExtension: "py")!.path,
                "record", file.path,
            ]
            process.standardOutput = output
            try process.run()
            port = Int(String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines))!
        }

        deinit {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }

        var target: String { "http://127.0.0.1:\(port)" }

        /// The requests written down: (path, method, headers in order, body).
        func requests() throws -> [Request] {
            CLI.text(of: file).split(separator: "\n").map { line in
                let o = try! JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
                return Request(
                    path: o["path"] as! String, method: o["method"] as! String,
                    headers: (o["headers"] as! [[String]]).map { ($0[0], $0[1]) },
                    body: Self.bytes(hex: o["body"] as! String))
            }
        }

        static func bytes(hex: String) -> [UInt8] {
            let digits = Array(hex.utf8)
            return stride(from: 0, to: digits.count, by: 2).map {
                UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)!
            }
        }
    }

    struct Request {
        var path: String
        var method: String
        var headers: [(String, String)]
        var body: [UInt8]

        /// The request with its id header's value as given, for comparing multisets. `content-length` (the client's
        /// own, when it sends one) must be the body's length and is left out.
        func key(id: String?) -> String {
            if let length = headers.first(where: { $0.0 == "content-length" }), length.1 != "\(body.count)" {
                return "content-length \(length.1) for a body of \(body.count) bytes"
            }
            let left = ["apns-id", "apns-request-id", "authorization", "content-length"]
            let other = headers.filter { !left.contains($0.0) }
                .map { "\($0.0): \($0.1)" }.sorted()
            let idHeader = headers.first { $0.0 == "apns-id" || $0.0 == "apns-request-id" }
            return "\(method) \(path)\n\(other.joined(separator: "\n"))\n\(idHeader?.0 ?? "no id"): "
                + "\(id ?? idHeader?.1 ?? "")\n\(body.map { String(format: "%02x", $0) }.joined())"
        }
    }

    /// What each push line of `trace` must arrive as, read here from the trace with JSONSerialization: the path
    /// (`/3/device/…` for `token` and `startToken`, `/4/broadcasts/apps/BUNDLE` for `channel`), the headers the line
    /// gives (null ones absent; a broadcast's channel as apns-channel-id and no apns-topic), the id header (`apns-id`,
    /// `apns-request-id` on a broadcast) with the line's `apnsId` or "generated", and the payload's exact bytes.
    static func expected(_ trace: String) -> (keys: [String], kinds: [String: Int], explicitIds: Set<String>) {
        var keys: [String] = []
        var kinds: [String: Int] = [:]
        var explicit = Set<String>()
        for line in trace.split(separator: "\n").dropFirst() {
            let o = try! JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            guard o["op"] as? String == "push" else { continue }
            // A string as it is; null: no header; a number or `true` as its JSON text, an integral one as an integer.
            func text(_ key: String) -> String? {
                if let s = o[key] as? String { return s }
                if o[key] == nil || o[key] is NSNull { return nil }
                let raw = String(line)
                let start = raw.range(of: "\"\(key)\":")!.upperBound
                let token = raw[start...].drop { $0 == " " }.prefix { $0 != "," && $0 != "}" }
                if let d = Double(token), d == d.rounded(), abs(d) < 1e15 { return String(Int64(d)) }
                return String(token)
            }
            var headers: [(String, String)] = []
            let path: String
            let kind: String
            if let channel = o["channel"] as? String {
                kind = "channel"
                var bundle = text("topic") ?? ""
                if bundle.hasSuffix(".push-type.liveactivity") { bundle.removeLast(23) }
                path = "/4/broadcasts/apps/" + bundle
                headers.append(("apns-channel-id", channel))
            } else {
                kind = o["token"] is String ? "token" : "startToken"
                path = "/3/device/" + ((o["token"] ?? o["startToken"]) as! String)
                if let topic = text("topic") { headers.append(("apns-topic", topic)) }
            }
            kinds[kind, default: 0] += 1
            for (key, name) in [
                ("pushType", "apns-push-type"), ("priority", "apns-priority"), ("expiration", "apns-expiration"),
                ("collapseId", "apns-collapse-id"),
            ] {
                if let value = text(key) { headers.append((name, value)) }
            }
            let idName = kind == "channel" ? "apns-request-id" : "apns-id"
            if let id = o["apnsId"] as? String { explicit.insert(id) }
            headers.append((idName, (o["apnsId"] as? String) ?? "generated"))
            let request = Request(
                path: path, method: "POST", headers: headers, body: Array((o["payload"] as! String).utf8))
            keys.append(request.key(id: nil))
        }
        return (keys.sorted(), kinds, explicit)
    }

    /// The recorded requests as keys, generated ids (not one of the trace's own) written "generated"; the generated
    /// ids, which must be canonical UUIDs, all different.
    static func recorded(_ requests: [Request], explicit: Set<String>) -> (keys: [String], generated: [String]) {
        var generated: [String] = []
        let keys = requests.map { r -> String in
            let id = r.headers.first { $0.0 == "apns-id" || $0.0 == "apns-request-id" }?.1
            if let id, !explicit.contains(id) {
                generated.append(id)
                return r.key(id: "generated")
            }
            return r.key(id: nil)
        }
        return (keys.sorted(), generated)
    }

    /// The first request recorded but not expected and the first expected but not recorded (a short message).
    static func difference(_ recorded: [String], _ expected: [String]) -> String {
        let extra = recorded.first { !expected.contains($0) } ?? "none"
        let missing = expected.first { !recorded.contains($0) } ?? "none"
        return "recorded, not expected: \(extra.prefix(600)); expected, not recorded: \(missing.prefix(600))"
    }

    static func isCanonicalUUID(_ s: String) -> Bool {
        let parts = s.split(separator: "-", omittingEmptySubsequences: false)
        return parts.map(\.count) == [8, 4, 4, 4, 12] && parts.allSatisfy { $0.allSatisfy(\.isHexDigit) }
    }

    static func summary(_ folder: URL) throws -> [String: Any] {
        let data = try Data(contentsOf: folder.appendingPathComponent("summary.json"))
        return try JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    /// A small trace (Resources/push-small.trace.jsonl): token pushes (one with its own apns-id and collapse id, one to a rotated-away token, one with a
    /// malformed payload, one with escapes in its payload, one with priority 10.0 and expiration `true`), a broadcast,
    /// two push-to-starts, and every device-side op.
    static var trace: String {
        let url = Bundle.module.url(forResource: "Resources/push-small.trace", withExtension: "jsonl")!
        return try! String(contentsOf: url, encoding: .utf8)
    }

    @Test("every push line sent once: path, headers and exact payload as the trace gives them; push-to-start counted")
    func smallTrace() throws {
        let dir = try CLI.temporaryDirectory()
        let tracePath = dir.appendingPathComponent("small.trace.jsonl")
        try Self.trace.write(to: tracePath, atomically: true, encoding: .utf8)
        // The trace is one fanout replay reads (so the push lines are what the trace format means).
        let replay = try CLI.run(["replay", tracePath.path])
        #expect(replay.status == 0, "\(replay.stderr)")

        let recorder = try Recorder(file: dir.appendingPathComponent("requests.jsonl"))
        let out = dir.appendingPathComponent("push")
        let started = Date()
        let result = try CLI.run([
            "push", recorder.target, tracePath.path, "--out", out.path, "--max-schedule-lag", "5000",
        ])
        let seconds = Date().timeIntervalSince(started)
        #expect(result.status == 0, "\(result.stderr)")
        let expected = Self.expected(Self.trace)
        #expect(expected.kinds == ["token": 4, "channel": 1, "startToken": 2])
        let requests = try recorder.requests()
        let recorded = Self.recorded(requests, explicit: expected.explicitIds)
        #expect(recorded.keys == expected.keys, "\(Self.difference(recorded.keys, expected.keys))")
        // The ids of lines without apnsId: canonical UUIDs, all different; the ids given are sent as given.
        #expect(recorded.generated.count == 5 && Set(recorded.generated).count == 5, "\(recorded.generated)")
        #expect(recorded.generated.allSatisfy(Self.isCanonicalUUID), "\(recorded.generated)")
        // The malformed payload went out as it is.
        #expect(requests.contains { $0.body == Array(#"{"aps":{"timestamp":1700000004,"event":"upd"#.utf8) })
        // The trace spans 0.4 s: sent at its times, not all at once and not later than that plus the connection.
        #expect(seconds >= 0.4, "\(seconds)")

        let summary = try Self.summary(out)
        #expect(summary["tokenPushes"] as? Int == 4)
        #expect(summary["broadcasts"] as? Int == 1)
        #expect(summary["pushToStarts"] as? Int == 2)
        #expect(summary["events"] as? Int == 7)
        let r = summary["requests"] as! [String: Any]
        #expect(r["sent"] as? Int == 7 && (r["byStatus"] as! [String: Int]) == ["200": 7])
        let source = summary["source"] as! [String: Any]
        #expect(source["kind"] as? String == "trace" && source["path"] as? String == tracePath.path)
        #expect(source["lines"] as? Int == 15 && source["pushLines"] as? Int == 7)
        // FNV-1a 64 of the file's bytes, computed here.
        var fnv: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in try Data(contentsOf: tracePath) {
            fnv ^= UInt64(byte)
            fnv &*= 0x100_0000_01B3
        }
        #expect(source["fnv1a64"] as? String == String(format: "%016llx", fnv))
        #expect(
            source["notSentDeviceSide"] as? [String: Int]
                == ["request": 1, "startToken": 2, "subscribe": 1, "rotate": 1, "dismiss": 1, "advance": 1])
        #expect(try String(contentsOf: out.appendingPathComponent("summary.md"), encoding: .utf8)
            .contains("2 push-to-start"))

        // A scenario run reports no push-to-start.
        let scenarioOut = dir.appendingPathComponent("scenario")
        let scenario = try CLI.run([
            "push", recorder.target, "smoke", "--duration", "1", "--out", scenarioOut.path,
            "--max-schedule-lag", "5000",
        ])
        #expect(scenario.status == 0, "\(scenario.stderr)")
        let scenarioSummary = try Self.summary(scenarioOut)
        #expect(scenarioSummary["pushToStarts"] as? Int == 0)
        #expect((scenarioSummary["source"] as? [String: Any])?["kind"] as? String == "scenario")
    }

    @Test("--shard 0/2 and 1/2 together send exactly what the unsharded run sends, generated apns-ids included")
    func shards() throws {
        let dir = try CLI.temporaryDirectory()
        let tracePath = dir.appendingPathComponent("small.trace.jsonl")
        try Self.trace.write(to: tracePath, atomically: true, encoding: .utf8)
        var sets: [[String]] = []
        var counts: [[String: Int]] = []
        for shard in [nil, "0/2", "1/2"] {
            let recorder = try Recorder(file: dir.appendingPathComponent("requests-\(sets.count).jsonl"))
            let out = dir.appendingPathComponent("push-\(sets.count)")
            let result = try CLI.run(
                ["push", recorder.target, tracePath.path, "--out", out.path, "--max-schedule-lag", "5000"]
                    + (shard.map { ["--shard", $0] } ?? []))
            #expect(result.status == 0, "\(result.stderr)")
            sets.append(try recorder.requests().map { $0.key(id: nil) })
            let s = try Self.summary(out)
            counts.append(["tokenPushes": s["tokenPushes"] as! Int, "pushToStarts": s["pushToStarts"] as! Int,
                "broadcasts": s["broadcasts"] as! Int])
        }
        #expect(sets[0].count == 7)
        #expect(sets[1].count == 4 && sets[2].count == 3)
        #expect((sets[1] + sets[2]).sorted() == sets[0].sorted())
        #expect(Set(sets[1]).isDisjoint(with: sets[2]))
        #expect(counts[1].merging(counts[2], uniquingKeysWith: +) == counts[0])
        // fanout merge adds the two shards' folders into the whole run's counts.
        let merged = dir.appendingPathComponent("merged")
        let merge = try CLI.run([
            "merge", dir.appendingPathComponent("push-1").path, dir.appendingPathComponent("push-2").path, "--out",
            merged.path,
        ])
        #expect(merge.status == 0, "\(merge.stderr)")
        let m = try Self.summary(merged)
        #expect(m["pushToStarts"] as? Int == 2 && m["tokenPushes"] as? Int == 4 && m["broadcasts"] as? Int == 1)
        #expect(((m["requests"] as! [String: Any])["sent"] as? Int) == 7)
        #expect((m["source"] as? [String: Any])?["pushLines"] as? Int == 7)
    }

    @Test("reports/examples/game-night.trace.jsonl: each of its 2,378 push lines arrives once, exactly as written")
    func gameNight() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let tracePath = root.appendingPathComponent("reports/examples/game-night.trace.jsonl")
        let text = try String(contentsOf: tracePath, encoding: .utf8)
        let dir = try CLI.temporaryDirectory()
        let recorder = try Recorder(file: dir.appendingPathComponent("requests.jsonl"))
        let out = dir.appendingPathComponent("push")
        // 589 s of trace in about 3 s.
        let result = try CLI.run([
            "push", recorder.target, tracePath.path, "--rate-scale", "200", "--out", out.path,
            "--max-schedule-lag", "5000", "--connections", "2",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let expected = Self.expected(text)
        #expect(expected.keys.count == 2378)
        let recorded = Self.recorded(try recorder.requests(), explicit: expected.explicitIds)
        #expect(recorded.keys.count == expected.keys.count)
        #expect(recorded.keys == expected.keys, "\(Self.difference(recorded.keys, expected.keys))")
        #expect(Set(recorded.generated).count == 2378)
        let summary = try Self.summary(out)
        #expect(summary["tokenPushes"] as? Int == expected.kinds["token"])
        #expect(summary["broadcasts"] as? Int == expected.kinds["channel"])
        #expect(summary["pushToStarts"] as? Int == 0)
        #expect(((summary["requests"] as! [String: Any])["sent"] as? Int) == 2378)
    }

    @Test("an unreadable trace: its line number, exit status 1 (as fanout replay), nothing sent, no folder")
    func badTrace() throws {
        let dir = try CLI.temporaryDirectory()
        let recorder = try Recorder(file: dir.appendingPathComponent("requests.jsonl"))
        var lines = Self.trace.split(separator: "\n").map(String.init)
        // Line 6 (the first push-to-start) loses its payload.
        lines[5] = lines[5].replacingOccurrences(of: #""payload": "#, with: #""body": "#)
        let bad = dir.appendingPathComponent("bad.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(to: bad, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("push")
        let result = try CLI.run(["push", recorder.target, bad.path, "--out", out.path])
        #expect(result.status == 1)
        #expect(result.stderr.contains("line 6: missing field payload"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out.path))
        #expect(try recorder.requests().isEmpty)
        // The same line refused by fanout replay.
        #expect(try CLI.run(["replay", bad.path]).stderr.contains("line 6: missing field payload"))

        // A header that is not a trace's version; a trace with --devices (a scenario's flag).
        let v2 = dir.appendingPathComponent("v2.jsonl")
        try (#"{"trace": 2, "epoch": 0, "schemas": {}}"# + "\n").write(to: v2, atomically: true, encoding: .utf8)
        let header = try CLI.run(["push", recorder.target, v2.path, "--out", out.path])
        #expect(header.status == 1 && header.stderr.contains("line 1: header: field trace: expected 1"), "\(header)")
        let good = dir.appendingPathComponent("good.jsonl")
        try Self.trace.write(to: good, atomically: true, encoding: .utf8)
        let devices = try CLI.run(["push", recorder.target, good.path, "--devices", "5", "--out", out.path])
        #expect(devices.status == 64 && devices.stderr.contains("--devices"), "\(devices.stderr)")
        // Several targets are serve shards, each owning a slice of a scenario's devices: no slice owns a trace's.
        let targets = try CLI.run(["push", recorder.target + "," + recorder.target, good.path, "--out", out.path])
        #expect(targets.status == 64 && targets.stderr.contains("one target"), "\(targets.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out.path))
        #expect(try recorder.requests().isEmpty)
    }
}
