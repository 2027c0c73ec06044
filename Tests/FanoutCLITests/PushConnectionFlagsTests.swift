import Foundation
import Testing

/// `fanout push`'s connection flags (--connect-timeout, --request-timeout, --ping-interval, --max-queued,
/// --reconnect-budget) given boundary and absurd values: a usage error naming the flag (exit 64), nothing written
/// and no trap; in-range values accepted (the run then fails to connect: exit 1, not 64).
@Suite("fanout push connection flags: range-checked")
struct PushConnectionFlagsTests {
    static let refused: [(flag: String, value: String, message: String)] = [
        ("--request-timeout", "inf", "Error: --request-timeout: expected seconds above 0, at most 3600, got inf"),
        ("--request-timeout", "nan", "Error: --request-timeout: expected seconds above 0, at most 3600, got nan"),
        ("--request-timeout", "1e30", "Error: --request-timeout: expected seconds above 0, at most 3600, got 1e+30"),
        ("--request-timeout", "0", "Error: --request-timeout: expected seconds above 0, at most 3600, got 0.0"),
        ("--request-timeout", "-1", "Error: --request-timeout: expected seconds above 0, at most 3600, got -1.0"),
        ("--connect-timeout", "601", "Error: --connect-timeout: expected seconds above 0, at most 600, got 601.0"),
        ("--connect-timeout", "-inf", "Error: --connect-timeout: expected seconds above 0, at most 600, got -inf"),
        ("--ping-interval", "0.05", "Error: --ping-interval: expected seconds 0 (no PING) or 0.1 to 3600, got 0.05"),
        ("--ping-interval", "1e17", "Error: --ping-interval: expected seconds 0 (no PING) or 0.1 to 3600, got 1e+17"),
        ("--reconnect-budget", "-0.5", "Error: --reconnect-budget: expected seconds 0 to 604800, got -0.5"),
        ("--reconnect-budget", "inf", "Error: --reconnect-budget: expected seconds 0 to 604800, got inf"),
        ("--max-queued", "0", "Error: --max-queued: expected 1 to 10000000, got 0"),
        ("--max-queued", "10000001", "Error: --max-queued: expected 1 to 10000000, got 10000001"),
        ("--max-queued", "-5", "Error: --max-queued: expected 1 to 10000000, got -5"),
        ("--first-stream-id", "2", "Error: --first-stream-id: expected an odd id from 1 to 2147483647, got 2"),
        (
            "--first-stream-id", "2147483649",
            "Error: --first-stream-id: expected an odd id from 1 to 2147483647, got 2147483649"
        ),
    ]

    @Test("absurd and out-of-range values: exit 64, the flag named, nothing written", arguments: refused)
    func refusedValues(_ flag: String, _ value: String, _ message: String) throws {
        let dir = try CLI.temporaryDirectory()
        let out = dir.appendingPathComponent("out")
        let result = try CLI.run(["push", "http://127.0.0.1:9", "smoke", "--out", out.path, "\(flag)=\(value)"])
        #expect(result.status == 64, "\(flag) \(value): \(result.stderr)")
        #expect(result.stderr.contains(message), "\(flag) \(value): \(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }

    @Test("a value that is not a number (or an Int flag given 1e30): exit 64")
    func notNumbers() throws {
        for (flag, value) in [("--max-queued", "1e30"), ("--request-timeout", "soon"), ("--ping-interval", "")] {
            let result = try CLI.run(["push", "http://127.0.0.1:9", "smoke", "\(flag)=\(value)"])
            #expect(result.status == 64, "\(flag) \(value): \(result.stderr)")
        }
    }

    @Test("--first-stream-id near the end: the first connection drains and is replaced, no request failed, exit 0")
    func streamIdsDrain() throws {
        let dir = try CLI.temporaryDirectory()
        let server = try PushHostileTests.Hostile("apns")
        let out = dir.appendingPathComponent("out")
        let result = try PushHostileTests.push(
            "http://127.0.0.1:\(server.port)", out,
            ["--first-stream-id", String(Int(Int32.max) - 2 * 10_000 - 20), "--max-schedule-lag", "5000"])
        #expect(result.status == 0, "\(result.stderr)")
        let (requests, summary) = try PushHostileTests.requests(out)
        #expect(requests["failed"] as? Int == 0 && requests["answered"] as? Int == requests["sent"] as? Int)
        let ends = summary["connectionEnds"] as! [String: Int]
        #expect(ends["stream ids used up (drained)"] == 1, "\(ends)")
        #expect(summary["reconnects"] as? Int == 1 && summary["connectionsDrained"] as? Int == 1)
        #expect(summary["drainedForStreamIds"] as? Int == 1, "the replacement counted as the ids'")
    }

    @Test("the boundaries themselves are accepted: the run gets as far as connecting (refused: exit 1)")
    func boundariesAccepted() throws {
        let dir = try CLI.temporaryDirectory()
        let result = try CLI.run([
            "push", "http://127.0.0.1:9", "smoke", "--out", dir.appendingPathComponent("out").path,
            "--request-timeout", "3600", "--connect-timeout", "600", "--ping-interval", "0", "--max-queued", "1",
            "--reconnect-budget", "0", "--reconnects", "0",
        ])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("failed: connect:"), "\(result.stderr)")
    }
}
