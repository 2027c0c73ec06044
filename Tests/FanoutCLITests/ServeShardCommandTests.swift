import Foundation
import Testing

/// `fanout serve --shard K/N` (real processes, h2c, 127.0.0.1), `fanout push A,B` to the shards and `fanout merge` of
/// their folders: the merged devices and counts equal one unsharded serve's driven by the same push, a misrouted push
/// is counted, and a set that is not whole is refused.
@Suite("fanout serve --shard, fanout push to N shards, fanout merge of serve folders", .serialized)
struct ServeShardCommandTests {
    static let epoch = WireEqualsRunTests.epoch
    static let seconds = String(WireEqualsRunTests.seconds)

    /// A box for serve processes started on several threads at once.
    final class Started: @unchecked Sendable {
        private let lock = NSLock()
        private var byIndex: [Int: ServeProcess] = [:]
        private var errors: [String] = []
        func set(_ k: Int, _ serve: ServeProcess) { lock.withLock { byIndex[k] = serve } }
        func fail(_ text: String) { lock.withLock { errors.append(text) } }
        var all: [Int: ServeProcess] { lock.withLock { byIndex } }
        var failures: [String] { lock.withLock { errors } }
    }

    /// The shards' serve processes, started together (one thread each): their devices' clocks start about at once.
    static func shards(_ n: Int, _ arguments: [String], scenario: String) throws -> [ServeProcess] {
        let started = Started()
        let done = DispatchGroup()
        for k in 0..<n {
            done.enter()
            Thread {
                do {
                    started.set(k, try ServeProcess(arguments + ["--shard", "\(k)/\(n)"], scenario: scenario))
                } catch {
                    started.fail("shard \(k): \(error)")
                }
                done.leave()
            }.start()
        }
        done.wait()
        guard started.failures.isEmpty else { throw CLIFailure("\(started.failures)") }
        return (0..<n).map { started.all[$0]! }
    }

    static func push(_ targets: [ServeProcess], _ scenario: String, out: URL, duration: String = seconds) throws
        -> [String: Any]
    {
        let target = targets.map { "http://127.0.0.1:\($0.port)" }.joined(separator: ",")
        let pushed = try CLI.run([
            "push", target, scenario, "--duration", duration, "--epoch", epoch, "--out", out.path,
            // Counts and state are checked here, not timing: a loaded machine must not fail it.
            "--max-schedule-lag", "5000",
        ])
        #expect(pushed.status == 0, "\(pushed.stderr)")
        return try PushCommandTests.summary(out)
    }

    @Test("push to 2 serve shards: every push answered, none misrouted; merged, the devices and counts of one serve")
    func shardedEqualsWhole() throws {
        let dir = try CLI.temporaryDirectory()
        let scenario = try WireEqualsRunTests.wireSmoke(in: dir)
        // One loop, one connection per target: pushes applied in the order sent (docs/PUSH.md, *Over the wire
        // equals in process*).
        // Every serve's devices' clock from push's first request, every dump at one time of it (see
        // WireEqualsRunTests.serveFlags), however long push took to start and each serve to stop.
        let common = ["--h2c", "--workers", "1", "--state", "full"] + WireEqualsRunTests.serveFlags

        let whole = try ServeProcess(common, scenario: scenario)
        let wholePush = try Self.push([whole], scenario, out: dir.appendingPathComponent("push-whole"))
        #expect(whole.stop() == 0, "\(whole.stderr)")
        let wholeSummary = try whole.summary()
        #expect(wholeSummary["shard"] == nil)

        let shards = try Self.shards(2, common, scenario: scenario)
        let push = try Self.push(shards, scenario, out: dir.appendingPathComponent("push-sharded"))
        for s in shards { #expect(s.stop() == 0, "\(s.stderr)") }
        // Every push answered; each broadcast went to both shards (one event, two requests).
        let requests = push["requests"] as! [String: Any]
        let broadcasts = push["broadcasts"] as! Int
        #expect(requests["answered"] as? Int == requests["sent"] as? Int)
        #expect(requests["failed"] as? Int == 0 && requests["unansweredAtEnd"] as? Int == 0)
        #expect(push["tokenPushes"] as? Int == wholePush["tokenPushes"] as? Int)
        #expect(broadcasts == wholePush["broadcasts"] as! Int && broadcasts > 0)
        #expect(requests["sent"] as? Int == (push["tokenPushes"] as! Int) + 2 * broadcasts)
        #expect((push["target"] as! String).split(separator: ",").count == 2)
        var byStatus: [String: Int] = [:]
        for (k, s) in shards.enumerated() {
            let summary = try s.summary()
            #expect(summary["shard"] as? String == "\(k)/2" && summary["shards"] as? Int == 2)
            let r = summary["requests"] as! [String: Any]
            #expect(r["notThisShard"] as? Int == 0, "shard \(k)")
            #expect((r["acceptedPushes"] as! Int) > 0, "shard \(k): no token push reached it")
            byStatus.merge(r["byStatus"] as! [String: Int], uniquingKeysWith: +)
        }
        #expect(byStatus == requests["byStatus"] as! [String: Int])

        let merged = dir.appendingPathComponent("merged")
        let merge = try CLI.run(["merge", shards[0].folder.path, shards[1].folder.path, "--out", merged.path])
        #expect(merge.status == 0, "\(merge.stderr)")
        let m = try PushCommandTests.summary(merged)
        #expect(m["shards"] as? Int == 2 && m["shard"] == nil)
        // The devices' accounting equals the unsharded serve's exactly (a broadcast's verdict counted by one shard).
        #expect(
            try WireEqualsRunTests.canonical(m["accounting"] as! [String: Any])
                == WireEqualsRunTests.canonical(wholeSummary["accounting"] as! [String: Any]))
        let mr = m["requests"] as! [String: Any]
        let wr = wholeSummary["requests"] as! [String: Any]
        #expect(mr["acceptedPushes"] as? Int == wr["acceptedPushes"] as? Int)
        // Each shard answered every broadcast: the requests are the unsharded ones and a second copy of each.
        #expect(mr["total"] as? Int == (wr["total"] as! Int) + broadcasts)
        #expect(mr["identitiesHold"] as? Bool == true && mr["wireIdentityHolds"] as? Bool == true)
        let service = (m["latency"] as! [String: Any])["service"] as! [String: Any]
        #expect(service["count"] as? Int == mr["total"] as? Int)
        let hgrm = try String(contentsOf: merged.appendingPathComponent("service.hgrm"), encoding: .utf8)
        #expect(hgrm.contains(String(format: "Total count    = %12d]", mr["total"] as! Int)), "\(hgrm.suffix(200))")

        // state.jsonl: every activity and device line as the unsharded serve left it, and the same totals.
        let expected = try WireEqualsRunTests.dump(whole.folder.appendingPathComponent("state.jsonl"))
        let got = try WireEqualsRunTests.dump(merged.appendingPathComponent("state.jsonl"))
        #expect(expected.lines.count > 1000 && got.lines.count == expected.lines.count)
        let differing = zip(got.lines, expected.lines).filter { $0 != $1 }
        #expect(differing.isEmpty, "\(differing.count) lines differ, e.g. \(differing.prefix(2))")
        #expect(try WireEqualsRunTests.canonical(got.totals) == WireEqualsRunTests.canonical(expected.totals))

        try Self.refusals(shards, push: dir.appendingPathComponent("push-sharded"), in: dir)
    }

    /// A missing shard: exit 5; a push folder among serve folders: exit 6; a shard's summary.json lacking a field:
    /// exit 1 naming it; nothing written.
    static func refusals(_ shards: [ServeProcess], push: URL, in dir: URL) throws {
        let out = dir.appendingPathComponent("refused")
        let missing = try CLI.run(["merge", shards[1].folder.path, "--out", out.path])
        #expect(missing.status == 5 && missing.stderr.contains("missing shard 0/2"), "\(missing.stderr)")
        let twice = try CLI.run(["merge", shards[0].folder.path, shards[0].folder.path, "--out", out.path])
        #expect(twice.status == 5 && twice.stderr.contains("shard 0/2 is also in"), "\(twice.stderr)")
        let mixed = try CLI.run(["merge", shards[0].folder.path, shards[1].folder.path, push.path, "--out", out.path])
        #expect(mixed.status == 6 && mixed.stderr.contains("do not mix"), "\(mixed.stderr)")
        // A shard whose summary.json lacks a count: exit 1 naming the file and the field, never a zero added.
        let lacking = dir.appendingPathComponent("shard-1-lacking")
        try FileManager.default.copyItem(at: shards[1].folder, to: lacking)
        let summary = lacking.appendingPathComponent("summary.json")
        var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: summary)) as? [String: Any])
        var faults = try #require(object["faults"] as? [String: Any])
        faults["heldPeak"] = nil
        object["faults"] = faults
        try JSONSerialization.data(withJSONObject: object).write(to: summary)
        let unread = try CLI.run(["merge", shards[0].folder.path, lacking.path, "--out", out.path])
        #expect(
            unread.status == 1 && unread.stderr.contains("shard-1-lacking/summary.json: field faults.heldPeak"),
            "\(unread.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }

    @Test("the whole population pushed to one shard: the other shard's pushes answered BadDeviceToken, counted")
    func misrouted() throws {
        let dir = try CLI.temporaryDirectory()
        let serve = try ServeProcess(["--h2c", "--workers", "2", "--shard", "1/2"])
        let push = try Self.push([serve], "smoke", out: dir.appendingPathComponent("push"), duration: "2")
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let summary = try serve.summary()
        let requests = summary["requests"] as! [String: Any]
        let notThisShard = requests["notThisShard"] as! Int
        // About half of the token pushes, each answered as APNs answers an unknown token; none a true unknown.
        let tokenPushes = push["tokenPushes"] as! Int
        #expect(
            notThisShard > tokenPushes / 4 && notThisShard < tokenPushes * 3 / 4, "\(notThisShard) of \(tokenPushes)")
        let reasons = (push["requests"] as! [String: Any])["byReason"] as! [String: Int]
        #expect(reasons["BadDeviceToken"] == notThisShard)
        let findings = summary["findings"] as! [String: Any]
        #expect((findings["unknownToken"] as! [String: Any])["count"] as? Int == 0)
        let md = try String(contentsOf: serve.folder.appendingPathComponent("summary.md"), encoding: .utf8)
        #expect(md.contains("Shard 1/2 of the devices: \(notThisShard) token pushes to another shard's device"))
    }

    @Test("push --shard K/2 (every other event) to 2 serve shards: every push to its device's shard, both merged")
    func pushShardsToServeShards() throws {
        let dir = try CLI.temporaryDirectory()
        let serves = try Self.shards(2, ["--h2c", "--workers", "1", "--state", "summary"], scenario: "smoke")
        let target = serves.map { "http://127.0.0.1:\($0.port)" }.joined(separator: ",")
        let folders = (0..<2).map { dir.appendingPathComponent("push-\($0)") }
        for (k, folder) in folders.enumerated() {
            let pushed = try CLI.run([
                "push", target, "smoke", "--duration", "2", "--shard", "\(k)/2", "--connections", "2",
                "--max-schedule-lag", "5000", "--out", folder.path,
            ])
            #expect(pushed.status == 0, "\(pushed.stderr)")
        }
        for s in serves { #expect(s.stop() == 0, "\(s.stderr)") }
        var served = 0
        for s in serves {
            let r = try s.summary()["requests"] as! [String: Any]
            #expect(r["notThisShard"] as? Int == 0)
            served += r["total"] as! Int
        }
        let merged = dir.appendingPathComponent("push-merged")
        let merge = try CLI.run(["merge", folders[0].path, folders[1].path, "--out", merged.path])
        #expect(merge.status == 0, "\(merge.stderr)")
        let push = try PushCommandTests.summary(merged)
        let requests = push["requests"] as! [String: Any]
        #expect(requests["sent"] as? Int == served && requests["answered"] as? Int == served)
        #expect(served == (push["tokenPushes"] as! Int) + 2 * (push["broadcasts"] as! Int))
        let serveMerge = try CLI.run(
            ["merge", serves[0].folder.path, serves[1].folder.path, "--out", dir.appendingPathComponent("serve").path])
        #expect(serveMerge.status == 0, "\(serveMerge.stderr)")
    }

    @Test("--shard with --expect-events, --trigger or --register is refused (exit 64); a bad K/N too")
    func refusedFlags() throws {
        let events = try CLI.run(["serve", "smoke", "--h2c", "--shard", "0/2", "--expect-events"])
        #expect(events.status == 64 && events.stderr.contains("--shard does not combine with --expect-events"),
            "\(events.stderr)")
        let trigger = try CLI.run(["serve", "smoke", "--h2c", "--shard", "0/2", "--trigger", "http://127.0.0.1:9/"])
        #expect(
            trigger.status == 64 && trigger.stderr.contains("--shard does not combine with --trigger"),
            "\(trigger.stderr)")
        let register = try CLI.run(["serve", "smoke", "--h2c", "--shard", "0/2", "--register", "http://127.0.0.1:9/"])
        #expect(
            register.status == 64 && register.stderr.contains("--shard does not combine with --register"),
            "\(register.stderr)")
        let bad = try CLI.run(["serve", "smoke", "--h2c", "--shard", "2/2"])
        #expect(bad.status == 64 && bad.stderr.contains("K must be from 0 to 1"), "\(bad.stderr)")
    }
}
