import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `fanout push` against hostile servers (Python h2 in Resources/h2_hostile.py, on 127.0.0.1): each is a clear error
/// or a count in summary.json, the identity sent = answered + failed + unanswered at end holds, and the exit status
/// is the documented one (docs/PUSH.md, *What it sends, measures and writes*: the exit table).
@Suite("fanout push against hostile servers")
struct PushHostileTests {
    /// h2_hostile.py in `mode`, killed when the value goes.
    final class Hostile {
        let process = Process()
        let port: Int

        init(_ mode: String) throws {
            let output = Pipe()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "python3", Bundle.module.url(forResource: "Resources/h2_hostile", withExtension: "py")!.path, mode,
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
    }

    static func push(_ target: String, _ out: URL, _ more: [String] = []) throws -> CLI.Result {
        try CLI.run(["push", target, "smoke", "--duration", "1", "--out", out.path] + more)
    }

    static func requests(_ out: URL) throws -> (requests: [String: Any], summary: [String: Any]) {
        let summary = try PushCommandTests.summary(out)
        #expect((summary["identity"] as! [String: Any])["holds"] as? Bool == true)
        return (summary["requests"] as! [String: Any], summary)
    }

    @Test("nothing listening, not HTTP/2, a failed TLS handshake: exit 1 with the reason, no run folder")
    func noConnection() throws {
        let dir = try CLI.temporaryDirectory()
        let refused = try Self.push("http://127.0.0.1:\(freePort())", dir.appendingPathComponent("refused"))
        #expect(refused.status == 1)
        #expect(
            refused.stderr.contains("failed: connect:") && refused.stderr.contains("ECONNREFUSED"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("refused").path))

        let garbage = try Hostile("garbage")
        let h2c = try Self.push("http://127.0.0.1:\(garbage.port)", dir.appendingPathComponent("h2c"))
        #expect(h2c.status == 1)
        #expect(h2c.stderr.contains("failed: protocol error"), "\(h2c.stderr)")
        // TLS to a server that answers in plain text: the handshake fails.
        let tls = try Self.push("https://127.0.0.1:\(garbage.port)", dir.appendingPathComponent("tls"), ["--insecure"])
        #expect(tls.status == 1)
        #expect(tls.stderr.contains("failed: TLS"), "\(tls.stderr)")
    }

    @Test("GOAWAY mid-run and no reconnect allowed: every connection lost, exit 1, the rest counted 'no connection'")
    func goAwayNoReconnect() throws {
        let dir = try CLI.temporaryDirectory()
        let server = try Hostile("goaway")
        let out = dir.appendingPathComponent("goaway")
        let result = try Self.push("http://127.0.0.1:\(server.port)", out, ["--reconnects", "0", "--streams", "4"])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("every connection to"), "\(result.stderr)")
        let (requests, summary) = try Self.requests(out)
        #expect(requests["answered"] as? Int == 5, "\(requests)")
        let failures = requests["failures"] as! [String: Int]
        // Every request not answered failed, under GOAWAY or no connection (none counted under another kind).
        let sent = try #require(requests["sent"] as? Int)
        let notAnswered = sent - 5 - (requests["unansweredAtEnd"] as? Int ?? 0)
        #expect(
            (failures["no connection"] ?? 0) + (failures["GOAWAY"] ?? 0) == notAnswered && notAnswered > 0,
            "\(failures)")
        #expect(failures.keys.allSatisfy { $0 == "no connection" || $0 == "GOAWAY" }, "\(failures)")
        #expect((summary["connectionEnds"] as! [String: Int]).keys.contains { $0.contains("GOAWAY") })
    }

    @Test("SETTINGS_MAX_CONCURRENT_STREAMS 0: nothing sent, every push queued to the end, server-limited, exit 0")
    func neverSent() throws {
        let dir = try CLI.temporaryDirectory()
        let server = try Hostile("zero")
        let out = dir.appendingPathComponent("zero")
        // A lag bound a sanitizer's slow build cannot break (dispatchLag p99 14 ms under ThreadSanitizer).
        let result = try Self.push(
            "http://127.0.0.1:\(server.port)", out, ["--drain", "0.5", "--max-schedule-lag", "2000"])
        // The server's fault, not the generator's: server-limited (no threshold given: nothing broken).
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("server-limited"), "\(result.stderr)")
        let (requests, _) = try Self.requests(out)
        #expect(requests["submitted"] as? Int == 0)
        #expect(requests["queuedAtEnd"] as? Int == requests["sent"] as? Int)
        #expect((requests["sent"] as! Int) > 0)
    }

    @Test("a header block past 16 KiB and a body past 64 KiB: failed as 'response too large', exit 0, identity held")
    func tooLarge() throws {
        let dir = try CLI.temporaryDirectory()
        for (mode, part) in [("bigheaders", "headers"), ("endless", "body")] {
            let server = try Hostile(mode)
            let out = dir.appendingPathComponent(mode)
            let result = try Self.push(
                "http://127.0.0.1:\(server.port)", out, ["--max-schedule-lag", "5000", "--drain", "20"])
            #expect(result.status == 0, "\(mode): \(result.stderr)")
            let (requests, _) = try Self.requests(out)
            let failures = requests["failures"] as! [String: Int]
            let sent = requests["sent"] as! Int
            // The server answers the odd-numbered requests past the bound, the others 200.
            #expect(
                failures == ["response too large (\(part))": sent / 2 + sent % 2], "\(mode): \(failures) of \(sent)")
            #expect(requests["answered"] as? Int == sent / 2)
            #expect(requests["unansweredAtEnd"] as? Int == 0)
        }
    }

    func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                _ = bind(fd, $0, length)
                return getsockname(fd, $0, &length)
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
