import Foundation
import Testing

/// `fanout serve` against clients that try to kill it, hang it or make it hold state: each bound is reached and
/// counted in summary.json, and SIGTERM still writes the run folder in bounded time.
@Suite("fanout serve bounds (hostile clients, real sockets)", .serialized)
struct ServeBoundsTests {
    @Test("pipelined requests (> 64 KiB), never read, then a reset: three times; alive, then SIGTERM ends it cleanly")
    func resetsWithPipelinedRequests() throws {
        let serve = try ServeProcess(["--h2c", "--workers", "1", "--max-streams", "5000"])
        let result = try Tool.run("python3", [Tool.boundsScript, "flood", String(serve.port), serve.folder.path, "3"])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(serve.process.isRunning, "alive after the resets: \(serve.stderr)")
        // Ended by SIGTERM (stop() kills a server still running 30 s later: its status would say so), with nothing
        // left for the drain deadline to cut: every connection was closed by then.
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let summary = try serve.summary()
        let connections = summary["connections"] as! [String: Any]
        #expect(connections["accepted"] as? Int == 4 && connections["closed"] as? Int == 4)
        let reasons = connections["endReasons"] as? [String: Int] ?? [:]
        #expect(reasons["Shutdown (drain time over)"] == nil, "\(reasons)")
        let requests = summary["requests"] as! [String: Any]
        #expect((requests["total"] as? Int ?? 0) > 3 * 65536 / 70, "the pipelined requests were answered")
        #expect(requests["wireIdentityHolds"] as? Bool == true, "\(connections)")
    }

    @Test(
        "a client that stops reading: output pauses (counted); SIGTERM with --drain-timeout 1 still writes the folder",
        arguments: [1, 2])
    func stalledReader(workers: Int) throws {
        let serve = try ServeProcess([
            "--h2c", "--workers", String(workers), "--max-streams", "5000", "--drain-timeout", "1",
        ])
        let result = try Tool.run(
            "python3",
            [
                Tool.boundsScript, "stall", String(serve.port), serve.folder.path,
                String(serve.process.processIdentifier),
            ])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        let seen = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] ?? [:]
        // The folder was written while this client still held its socket open (the script waits for it, 30 s at
        // most, before it closes the socket): the drain deadline, not the client, ended the connection.
        #expect(seen["folderAfterSeconds"] is Double, "\(seen)")
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let connections = try serve.summary()["connections"] as! [String: Any]
        #expect((connections["outputPauses"] as? Int ?? 0) > 0, "\(connections)")
        // Ended by the shutdown either way: still holding answers nghttp2 had not framed ("drain time over"), or
        // with everything framed and only the socket's flush left (bounded by the same drain time). Which one
        // depends on how far a loaded machine let the server get before it stopped reading.
        let reasons = connections["endReasons"] as! [String: Int]
        #expect(reasons["Shutdown (drain time over)", default: 0] + reasons["Shutdown", default: 0] == 1, "\(reasons)")
    }

    @Test("a client that asks for 2,000 all-channels lists and never reads: answers held up to --max-unsent-bytes")
    func unsentAnswers() throws {
        let serve = try ServeProcess(["--h2c", "--workers", "1", "--max-unsent-bytes", "65536"])
        let result = try Tool.run("python3", [Tool.boundsScript, "unsent", String(serve.port), serve.folder.path])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let summary = try serve.summary()
        let connections = summary["connections"] as! [String: Any]
        // ~10 KB per list (300 channels): the kernel's socket buffers take some (at most a few MB), the rest waits
        // unsent, and past 64 KiB of it every further request is refused. Without the bound all 2,000 (20 MB) would
        // be built and held.
        let refused = connections["requestsRefused"] as? Int ?? 0
        #expect(refused > 1000, "\(connections)")
        let requests = summary["requests"] as! [String: Any]
        #expect(requests["wireIdentityHolds"] as? Bool == true, "\(connections)")
        // Refused requests are not judged: 300 creates + the push + the lists answered = requests.total.
        #expect(requests["total"] as? Int == 300 + 1 + (2000 - refused), "\(requests)")
    }

    @Test(
        "open-stream budget, request deadline, idle by requests (PINGs ignored), connection cap: each hit and counted")
    func bounds() throws {
        let serve = try ServeProcess([
            "--h2c", "--workers", "1", "--max-open-streams", "3", "--request-timeout", "1", "--idle-timeout", "2",
            "--max-connections", "3",
        ])
        let result = try Tool.run("python3", [Tool.boundsScript, "bounds", String(serve.port), serve.folder.path])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        let seen = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] ?? [:]
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let summary = try serve.summary()
        let connections = summary["connections"] as! [String: Any]
        #expect(connections["streamsRefused"] as? Int == 1, "\(connections)")
        #expect(connections["requestTimeouts"] as? Int == 3, "\(connections)")
        // Three refused at once by the cap, plus any retry the client needed while the server saw earlier ones close.
        #expect(connections["refused"] as? Int == seen["refused"] as? Int && (seen["refused"] as? Int ?? 0) >= 3)
        let reasons = connections["endReasons"] as! [String: Int]
        #expect((reasons["IdleTimeout"] ?? 0) >= 1, "\(reasons)")
        #expect(connections["acceptErrors"] as? Int == 0)
        #expect((summary["requests"] as! [String: Any])["wireIdentityHolds"] as? Bool == true)
    }
}
