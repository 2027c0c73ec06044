import Foundation
import Testing

/// `fanout push --shard K/N --barrier DIR` against one `fanout serve` (h2c, 127.0.0.1): the shards meet in DIR
/// (each writes ready-K once ready) and start at the one instant the files fix; a shard whose peers never arrive
/// gives up (exit 8, a folder saying so) and `fanout merge` names it; the barrier's flags are refused where they
/// contradict. Counts and order only: no wall-clock bound (a sanitizer's build on a loaded machine is slow).
@Suite("fanout push --barrier", .serialized)
struct PushBarrierTests {
    /// A margin and a skew wide enough for a loaded machine: every shard sees the last file long before the start.
    static let barrierFlags = ["--barrier-margin", "3", "--max-start-skew", "5"]

    static func barrier(_ summary: [String: Any]) throws -> [String: Any] {
        try #require(summary["barrier"] as? [String: Any], "no barrier in \(summary.keys.sorted())")
    }

    @Test("2 shards meet at the barrier: one start instant, read from both folders, after both were ready; merged")
    func barrierMet() throws {
        let dir = try CLI.temporaryDirectory()
        let serve = try ServeProcess(["--h2c"])
        let target = "http://127.0.0.1:\(serve.port)"
        let meeting = dir.appendingPathComponent("barrier").path
        let folders = (0..<2).map { dir.appendingPathComponent("shard-\($0)-of-2") }
        let results = PushShardTests.Results()
        let done = DispatchGroup()
        for k in 0..<2 {
            done.enter()
            Thread {
                do {
                    results.set(k, try CLI.run(
                        ["push", target] + PushShardTests.pushFlags + Self.barrierFlags
                            + ["--shard", "\(k)/2", "--barrier", meeting, "--out", folders[k].path]))
                } catch {
                    results.fail("shard \(k): \(error)")
                }
                done.leave()
            }.start()
        }
        done.wait()
        // The same directory again: a shard's file is there already (another run's barrier), refused at once.
        let again = try CLI.run(
            ["push", target] + PushShardTests.pushFlags
                + ["--shard", "0/2", "--barrier", meeting, "--out", dir.appendingPathComponent("again").path])
        #expect(serve.stop() == 0)
        #expect(results.failures.isEmpty, "\(results.failures)")
        for (k, result) in results.all { #expect(result.status == 0, "shard \(k): \(result.stderr)") }
        #expect(again.status == 1 && again.stderr.contains("ready-0 is there already"), "\(again.stderr)")
        for k in 0..<2 {
            #expect(FileManager.default.fileExists(atPath: meeting + "/ready-\(k)"), "ready-\(k)")
        }

        let summaries = try folders.map { try PushCommandTests.summary($0) }
        let barriers = try summaries.map { try Self.barrier($0) }
        // Both read the same files, so both fixed the same start: the latest ready instant + the margin.
        let ready = try barriers.map { try #require($0["readyUnixNanos"] as? [Int], "\($0)") }
        #expect(ready[0] == ready[1] && ready[0].count == 2, "\(ready)")
        let start = try #require(barriers[0]["startUnixNanos"] as? Int)
        #expect(barriers[1]["startUnixNanos"] as? Int == start)
        #expect(start == ready[0].max()! + 3_000_000_000, "\(start) \(ready)")
        for (k, b) in barriers.enumerated() {
            #expect(b["timedOut"] is NSNull && b["shards"] as? Int == 2, "\(b)")
            #expect(b["ownReadyUnixNanos"] as? Int == ready[0][k], "shard \(k): its own file holds its instant")
            let met = try #require(b["metUnixNanos"] as? Int)
            #expect(met >= ready[0].max()!, "shard \(k) saw the last file after it was written")
        }
        for (k, summary) in summaries.enumerated() {
            let startAt = try #require(summary["startAt"] as? [String: Any])
            // requestedSeconds is a Double: to a microsecond.
            #expect(abs(Int(((startAt["requestedSeconds"] as! Double) * 1e9).rounded()) - start) < 1000)
            #expect(startAt["refused"] is NSNull && startAt["maxSkewNanos"] as? Int == 5_000_000_000)
            // Started at the start, not before it (to a libuv timer's millisecond).
            let started = try #require(startAt["startedUnixNanos"] as? Int)
            #expect(started > start - 2_000_000, "shard \(k) started \(start - started) ns early")
            #expect((summary["requests"] as! [String: Any])["sent"] as! Int > 0)
            let md = try String(contentsOf: folders[k].appendingPathComponent("summary.md"), encoding: .utf8)
            #expect(md.contains("Barrier `\(meeting)` (`--barrier`): 2 shards, met"), "\(md.prefix(800))")
        }

        // The merge: both shards' starts and their spread, within the skew.
        let merged = dir.appendingPathComponent("merged")
        let merge = try CLI.run(["merge"] + folders.map(\.path) + ["--out", merged.path])
        #expect(merge.status == 0, "\(merge.stderr)")
        #expect(merge.stdout.contains("shard starts spread"), "\(merge.stdout)")
        let startAt = try #require(try PushCommandTests.summary(merged)["startAt"] as? [String: Any])
        let starts = try #require(startAt["shardStartedUnixNanos"] as? [String: Int])
        #expect(Set(starts.keys) == ["0/2", "1/2"], "\(startAt)")
        #expect(startAt["spreadNanos"] as? Int == starts.values.max()! - starts.values.min()!)
        #expect((startAt["notStarted"] as? [String])?.isEmpty == true)
    }

    @Test("a shard whose peer never arrives gives up (--barrier-timeout): exit 8, a folder saying so; merge names it")
    func peersNeverArrive() throws {
        let dir = try CLI.temporaryDirectory()
        let serve = try ServeProcess(["--h2c"])
        let target = "http://127.0.0.1:\(serve.port)"
        // Each shard alone at its own barrier: shard 0/2 waits for ready-1, shard 1/2 for ready-0.
        let folders = (0..<2).map { dir.appendingPathComponent("shard-\($0)-of-2") }
        var runs: [CLI.Result] = []
        for k in 0..<2 {
            runs.append(try CLI.run(
                ["push", target] + PushShardTests.pushFlags
                    + ["--shard", "\(k)/2", "--barrier", dir.appendingPathComponent("barrier-\(k)").path,
                        "--barrier-timeout", "0.5", "--out", folders[k].path]))
        }
        #expect(serve.stop() == 0)
        let lone = runs[0]
        #expect(lone.status == 8, "\(lone.stderr)")
        #expect(lone.stderr.contains("fanout push: barrier not met: 1 of 2 shards ready"), "\(lone.stderr)")
        let summary = try PushCommandTests.summary(folders[0])
        let barrier = try Self.barrier(summary)
        let timedOut = try #require(barrier["timedOut"] as? String)
        #expect(timedOut.contains("within --barrier-timeout 0.5 s"), "\(timedOut)")
        #expect(timedOut.contains("no ready-1 in"), "\(timedOut)")
        #expect(barrier["startUnixNanos"] is NSNull && barrier["metUnixNanos"] is NSNull)
        let ready = try #require(barrier["readyUnixNanos"] as? [Any])
        #expect(ready.count == 2 && ready[0] is Int && ready[1] is NSNull, "\(ready)")
        let startAt = try #require(summary["startAt"] as? [String: Any])
        #expect((startAt["refused"] as? String)?.hasPrefix("barrier not met: ") == true, "\(startAt)")
        #expect(startAt["requestedSeconds"] is NSNull && startAt["startedUnixNanos"] is NSNull)
        #expect((summary["requests"] as? [String: Any])?["sent"] as? Int == 0 && summary["exitCode"] as? Int == 8)
        let md = try String(contentsOf: folders[0].appendingPathComponent("summary.md"), encoding: .utf8)
        #expect(md.contains("**Refused to start**: barrier not met"), "\(md.prefix(600))")
        #expect(md.contains("exit status 8"), "\(md.prefix(600))")
        #expect(runs[1].status == 8, "\(runs[1].stderr)")

        // The merge names both, and fails as a set that did not start together does (exit 7).
        let merged = dir.appendingPathComponent("merged")
        let merge = try CLI.run(["merge"] + folders.map(\.path) + ["--out", merged.path])
        #expect(merge.status == 7, "\(merge.stderr)")
        #expect(merge.stderr.contains("not started together: shard 0/2 barrier not met"), "\(merge.stderr)")
        #expect(merge.stderr.contains("; shard 1/2 barrier not met"), "\(merge.stderr)")
        let mergedStart = try #require(try PushCommandTests.summary(merged)["startAt"] as? [String: Any])
        #expect(mergedStart["notStarted"] as? [String] == ["0/2", "1/2"], "\(mergedStart)")
        #expect(mergedStart["withinSkew"] as? Bool == false)
    }

    @Test("--barrier with --start-at, without --shard, empty; its timeout and margin without it: exit 64")
    func flagsRefused() throws {
        let base = ["push", "http://127.0.0.1:9", "smoke"]
        let start = String(Int(Date().timeIntervalSince1970) + 3_600)  // ahead of a slow (sanitizer) run
        let cases: [([String], String)] = [
            (["--shard", "0/2", "--barrier", "/tmp/b", "--start-at", start], "--barrier and --start-at exclude"),
            (["--barrier", "/tmp/b"], "--barrier: needs --shard K/N"),
            (["--shard", "0/2", "--barrier", ""], "--barrier: expected a directory"),
            (["--barrier-timeout", "5"], "--barrier-timeout: only with --barrier"),
            (["--barrier-margin", "1"], "--barrier-margin: only with --barrier"),
            (["--shard", "0/2", "--barrier", "/tmp/b", "--barrier-timeout", "0"], "--barrier-timeout: expected"),
            (["--shard", "0/2", "--barrier", "/tmp/b", "--barrier-margin=-1"], "--barrier-margin: expected"),
            (["--max-start-skew", "0.5"], "--max-start-skew: only with --start-at or --barrier"),
        ]
        for (arguments, message) in cases {
            let r = try CLI.run(base + arguments)
            #expect(r.status == 64 && r.stderr.contains(message), "\(arguments): \(r.status) \(r.stderr)")
        }
    }
}
