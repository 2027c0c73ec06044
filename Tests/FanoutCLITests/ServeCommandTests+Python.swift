import Foundation
import Testing

// Python h2: channels, events, faults and provider tokens, continued from ServeCommandTests.swift.
extension ServeCommandTests {
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
        // The client pushes some events only: the rest are missing, and the run's verdict fails it.
        #expect(serve.stop() == 2, "\(serve.stderr)")
        #expect(serve.stderr.contains("verdict: FAILED: missing=0 broken"), "\(serve.stderr)")
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
        // Refused event pushes go missing: the verdict fails the run.
        #expect(serve.stop() == 2, "\(serve.stderr)")
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
        #expect(eventRefused > 0, "the seed refuses some event pushes (else the checks below hold as 0 == 0)")
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
}
