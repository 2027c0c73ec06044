import Foundation
import Testing

/// `fanout push --shard K/N --start-at` against one `fanout serve` (h2c, 127.0.0.1) per set, and `fanout merge` of
/// the shards' folders: the merged counts equal an unsharded run's, and a set that is not whole is refused.
@Suite("fanout push --shard and fanout merge of push folders", .serialized)
struct PushShardTests {
    /// A box for the results of commands run on several threads at once.
    final class Results: @unchecked Sendable {
        private let lock = NSLock()
        private var byIndex: [Int: CLI.Result] = [:]
        private var errors: [String] = []
        func set(_ k: Int, _ result: CLI.Result) { lock.withLock { byIndex[k] = result } }
        func fail(_ text: String) { lock.withLock { errors.append(text) } }
        var all: [Int: CLI.Result] { lock.withLock { byIndex } }
        var failures: [String] { lock.withLock { errors } }
    }

    /// The counts two runs must agree on exactly (latencies differ from run to run; these must not).
    static func counts(_ summary: [String: Any]) -> [String: String] {
        let requests = summary["requests"] as! [String: Any]
        var c: [String: String] = [:]
        for key in ["events", "tokenPushes", "broadcasts"] { c[key] = "\(summary[key] as! Int)" }
        for key in ["sent", "submitted", "failed", "unansweredAtEnd"] { c[key] = "\(requests[key] as! Int)" }
        c["byStatus"] = (requests["byStatus"] as! [String: Int]).sorted { $0.key < $1.key }.description
        c["byReason"] = (requests["byReason"] as! [String: Int]).sorted { $0.key < $1.key }.description
        c["latency.count"] = "\((summary["latency"] as! [String: Any])["count"] as! Int)"
        return c
    }

    static let pushFlags = ["smoke", "--duration", "2", "--max-schedule-lag", "5000", "--drain", "5"]

    /// N shards of smoke started together (`--start-at` a few seconds ahead) against one serve, then merged.
    static func shards(_ n: Int, in dir: URL) throws -> (merged: URL, shards: [URL], serve: [String: Any]) {
        let serve = try ServeProcess(["--h2c"])
        // 2 shards: 7 s ahead, so they open their connections 5 s before the start (not at once); 4 shards: 5 s
        // (each checks its --start-at when it parses its flags: a slow launch must not make it 1 s late).
        let start = String(format: "%.3f", Date().timeIntervalSince1970 + (n == 2 ? 7 : 5))
        let folders = (0..<n).map { dir.appendingPathComponent("shard-\($0)-of-\(n)") }
        let target = "http://127.0.0.1:\(serve.port)"
        let results = Results()
        // One thread each (not a pool the size of the cores): every shard's process waits for the start at once.
        let done = DispatchGroup()
        for k in 0..<n {
            done.enter()
            Thread {
                do {
                    results.set(k, try CLI.run(
                        ["push", target] + pushFlags
                            + ["--shard", "\(k)/\(n)", "--start-at", start, "--out", folders[k].path]))
                } catch {
                    results.fail("shard \(k): \(error)")
                }
                done.leave()
            }.start()
        }
        done.wait()
        #expect(serve.stop() == 0)
        #expect(results.failures.isEmpty, "\(results.failures)")
        for (k, result) in results.all { #expect(result.status == 0, "shard \(k): \(result.stderr)") }
        for (k, folder) in folders.enumerated() {
            let summary = try PushCommandTests.summary(folder)
            #expect(summary["shard"] as? String == "\(k)/\(n)")
            // The measured start skew is recorded; the shards waited for the common start: none began before it
            // (to a libuv timer's millisecond). How late one began is a loaded machine's business, not a test's.
            let startAt = summary["startAt"] as! [String: Any]
            #expect(String(format: "%.3f", startAt["requestedSeconds"] as! Double) == start)
            let skew = startAt["skewNanos"] as! Int
            #expect(skew > -2_000_000, "shard \(k): started \(-skew) ns before the requested start")
        }
        let merged = dir.appendingPathComponent("merged-\(n)")
        let merge = try CLI.run(["merge"] + folders.map(\.path) + ["--out", merged.path])
        #expect(merge.status == 0, "\(merge.stderr)")
        return (merged, folders, try serve.summary())
    }

    @Test("2 and 4 push shards started together, merged, equal one unsharded run's counts exactly")
    func mergedEqualsWhole() throws {
        let dir = try CLI.temporaryDirectory()
        let serve = try ServeProcess(["--h2c"])
        let whole = dir.appendingPathComponent("whole")
        let result = try CLI.run(["push", "http://127.0.0.1:\(serve.port)"] + Self.pushFlags + ["--out", whole.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(serve.stop() == 0)
        let wholeSummary = try PushCommandTests.summary(whole)
        let expected = Self.counts(wholeSummary)
        #expect(wholeSummary["shard"] is NSNull)
        #expect((Int(expected["sent"]!) ?? 0) > 100 && (Int(expected["broadcasts"]!) ?? 0) > 0, "\(expected)")

        for n in [2, 4] {
            let (merged, shards, serveSummary) = try Self.shards(n, in: dir)
            let summary = try PushCommandTests.summary(merged)
            #expect(Self.counts(summary) == expected, "\(n) shards")
            #expect(summary["shards"] as? Int == n)
            PushCommandTests.expectSameCounts(push: summary, serve: serveSummary)
            // Each shard sent a part, none the whole: every event by exactly one shard.
            let sent = try shards.map {
                (try PushCommandTests.summary($0)["requests"] as! [String: Any])["sent"] as! Int
            }
            #expect(sent.allSatisfy { $0 > 0 && $0 < Int(expected["sent"]!)! }, "\(sent)")
            // The merged latency.hlog holds every shard's samples, second by second.
            let hlog = try String(contentsOf: merged.appendingPathComponent("latency.hlog"), encoding: .utf8)
            #expect(hlog.contains("Tag=latency,") && hlog.contains("Tag=scheduleLag,"))
            let hgrm = try String(contentsOf: merged.appendingPathComponent("latency.hgrm"), encoding: .utf8)
            let total = String(format: "Total count    = %12d]", Int(expected["latency.count"]!)!)
            #expect(hgrm.contains(total), "\(hgrm.suffix(300))")

            if n == 4 {
                try Self.refusals(shards, in: dir)
            }
        }
    }

    /// A missing shard, a duplicated one, shards of two different N: exit 5; shards of another --start-at, a run
    /// folder among push folders: exit 6; nothing written.
    static func refusals(_ shards: [URL], in dir: URL) throws {
        let out = dir.appendingPathComponent("refused")
        let missing = try CLI.run(["merge", shards[0].path, shards[1].path, shards[3].path, "--out", out.path])
        #expect(missing.status == 5 && missing.stderr.contains("missing shard 2/4"), "\(missing.stderr)")
        let twice = try CLI.run(["merge"] + shards.map(\.path) + [shards[2].path, "--out", out.path])
        #expect(twice.status == 5 && twice.stderr.contains("shard 2/4 is also in"), "\(twice.stderr)")
        let other = dir.appendingPathComponent("shard-1-of-2")
        let mixedN = try CLI.run(["merge", shards[0].path, other.path, "--out", out.path])
        #expect(mixedN.status == 5 && mixedN.stderr.contains("is one of 2, the others of 4"), "\(mixedN.stderr)")
        // The same shard started a second later (its summary's --start-at moved): not one run, exit 6.
        let later = dir.appendingPathComponent("shard-1-of-2-later")
        try FileManager.default.copyItem(at: other, to: later)
        let summaryURL = later.appendingPathComponent("summary.json")
        var summary = try JSONSerialization.jsonObject(with: Data(contentsOf: summaryURL)) as! [String: Any]
        var startAt = summary["startAt"] as! [String: Any]
        startAt["requestedSeconds"] = (startAt["requestedSeconds"] as! Double) + 1
        summary["startAt"] = startAt
        try JSONSerialization.data(withJSONObject: summary).write(to: summaryURL)
        let apart = try CLI.run(
            ["merge", dir.appendingPathComponent("shard-0-of-2").path, later.path, "--out", out.path])
        #expect(apart.status == 6 && apart.stderr.contains("--start-at"), "\(apart.stderr)")
        let run = dir.appendingPathComponent("run-shard")
        #expect(try CLI.run(["run", "smoke", "--duration", "1", "--shard", "1/2", "--out", run.path]).status == 0)
        let mixed = try CLI.run(["merge", dir.appendingPathComponent("shard-0-of-2").path, run.path, "--out", out.path])
        #expect(mixed.status == 6 && mixed.stderr.contains("do not mix"), "\(mixed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }

    @Test("--start-at in the past is refused (exit 64); a bad --shard too")
    func badStart() throws {
        let past = try CLI.run(["push", "http://127.0.0.1:9", "smoke", "--start-at", "2020-01-01T00:00:00Z"])
        #expect(past.status == 64 && past.stderr.contains("in the past"), "\(past.stderr)")
        let garbled = try CLI.run(["push", "http://127.0.0.1:9", "smoke", "--start-at", "soon"])
        #expect(garbled.status == 64 && garbled.stderr.contains("RFC 3339"), "\(garbled.stderr)")
        let shard = try CLI.run(["push", "http://127.0.0.1:9", "smoke", "--shard", "4/4"])
        #expect(shard.status == 64 && shard.stderr.contains("K must be from 0 to 3"), "\(shard.stderr)")
    }

    @Test("a shard ready after --start-at + --max-start-skew refuses to start (exit 7, a folder saying so); merged: named")
    func lateShardRefuses() throws {
        let dir = try CLI.temporaryDirectory()
        let serve = try ServeProcess(["--h2c"])
        let target = "http://127.0.0.1:\(serve.port)"
        // Shard 0 starts on time (3 s ahead); shard 1 is launched once the start has passed (as a pod scheduled
        // late would be): within --start-at's 1 s tolerance, but ready after it by more than --max-start-skew.
        let startSeconds = Date().timeIntervalSince1970 + 3
        let start = String(format: "%.3f", startSeconds)
        let folders = (0..<2).map { dir.appendingPathComponent("shard-\($0)-of-2") }
        let results = Results()
        let done = DispatchGroup()
        done.enter()
        Thread {
            do {
                results.set(0, try CLI.run(
                    ["push", target] + Self.pushFlags
                        + ["--shard", "0/2", "--start-at", start, "--out", folders[0].path]))
            } catch {
                results.fail("shard 0: \(error)")
            }
            done.leave()
        }.start()
        let wait = startSeconds + 0.2 - Date().timeIntervalSince1970
        if wait > 0 { Thread.sleep(forTimeInterval: wait) }
        let late = try CLI.run(
            ["push", target] + Self.pushFlags
                + ["--shard", "1/2", "--start-at", start, "--max-start-skew", "0.05", "--out", folders[1].path])
        done.wait()
        #expect(serve.stop() == 0)
        #expect(results.failures.isEmpty, "\(results.failures)")
        for (_, result) in results.all { #expect(result.status == 0, "shard 0: \(result.stderr)") }
        #expect(late.status == 7, "\(late.stderr)")
        #expect(late.stderr.contains("refused to start: ready"), "\(late.stderr)")
        let summary = try PushCommandTests.summary(folders[1])
        let startAt = try #require(summary["startAt"] as? [String: Any])
        #expect((startAt["refused"] as? String)?.contains("more than --max-start-skew 0.05 s") == true, "\(startAt)")
        #expect((summary["requests"] as? [String: Any])?["sent"] as? Int == 0 && summary["exitCode"] as? Int == 7)
        let md = try String(contentsOf: folders[1].appendingPathComponent("summary.md"), encoding: .utf8)
        #expect(md.contains("**Refused to start**"))
        // The merge says which shard did not start with the others, and fails.
        let merged = dir.appendingPathComponent("merged")
        let merge = try CLI.run(["merge"] + folders.map(\.path) + ["--out", merged.path])
        #expect(merge.status == 7, "\(merge.stderr)")
        #expect(merge.stderr.contains("not started together: shard 1/2 ready"), "\(merge.stderr)")
        let mergedSummary = try PushCommandTests.summary(merged)
        let mergedStart = try #require(mergedSummary["startAt"] as? [String: Any])
        #expect((mergedStart["refused"] as? String)?.hasPrefix("shard 1/2 ") == true)
        // The shard that started is the merged run's start (the refused one has none), and the one that did not is
        // named among the starts.
        #expect((mergedSummary["startedAtSeconds"] as? Double ?? 0) > startSeconds - 1, "\(mergedSummary)")
        #expect(mergedStart["notStarted"] as? [String] == ["1/2"] && mergedStart["withinSkew"] as? Bool == false)
        // compare judges nothing of a run that sent nothing.
        let compare = try CLI.run(["compare", folders[0].path, folders[1].path])
        #expect(compare.status == 3, "\(compare.stderr)")
    }
}
