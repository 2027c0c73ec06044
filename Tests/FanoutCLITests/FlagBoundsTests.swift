import Foundation
import Testing

@testable import fanout

/// Every numeric flag of `fanout push` and `fanout serve` given its boundaries and absurd values (NaN, ±infinity,
/// 1e17, 1e30, integers past Int64), and the combinations push would ignore: each is either refused as a usage
/// error (exit 64) whose message names the flag, or accepted and turned into the run's options without a trap
/// (the conversions that once trapped at the end of a run — `--drain inf`, `--max-schedule-lag 1e30` — are made
/// here). In-process, through the commands' own parsing and `validate()`, so that the table runs in a moment;
/// BadInputTests runs a few of them through the executable.
@Suite("Flag bounds (push and serve, in-process)")
struct FlagBoundsTests {
    enum Expect {
        case accepted
        /// Refused, the message naming this flag.
        case refused(String)
    }

    struct Row: CustomStringConvertible {
        var arguments: [String]
        var expect: Expect
        var description: String { arguments.joined(separator: " ") }
    }

    /// `flag=value` for each value, refused (naming the flag) unless listed as accepted.
    static func rows(_ flag: String, accept: [String], refuse: [String], with more: [String] = []) -> [Row] {
        accept.map { Row(arguments: ["\(flag)=\($0)"] + more, expect: .accepted) }
            + refuse.map { Row(arguments: ["\(flag)=\($0)"] + more, expect: .refused(flag)) }
    }

    /// Values no numeric flag takes.
    static let absurd = ["nan", "-nan", "inf", "-inf", "1e17", "1e30", "1e308", "abc", "", "99999999999999999999"]

    static func inSeconds(_ seconds: Double) -> String { String(Int(Date().timeIntervalSince1970 + seconds)) }

    /// A --start-at ahead by more than the whole table can take: the table is built once and judged row by row, and
    /// under ThreadSanitizer on a loaded machine a minute ahead was in the past by the time some rows ran ("is 31.5 s
    /// in the past"), so they were refused for --start-at instead of the flag they test.
    static let ahead: Double = 3_600

    static var pushRows: [Row] {
        var r: [Row] = []
        r += rows("--connections", accept: ["1", "1024"], refuse: ["0", "1025", "-1", "1.5"] + absurd)
        r += rows("--streams", accept: ["1", "100000"], refuse: ["0", "100001", "-1"] + absurd)
        r += rows("--duration", accept: ["0.001", "1", "2592000"], refuse: ["0", "-1", "2592000.5"] + absurd)
        r += rows("--rate-scale", accept: ["0.001", "1000"], refuse: ["0", "-1", "1000.01"] + absurd)
        r += rows("--seed", accept: ["0", "18446744073709551615"], refuse: ["-1", "18446744073709551616", "1.5"])
        r += rows("--devices", accept: ["1", "50000000"], refuse: ["0", "-1", "50000001"] + absurd)
        r += rows(
            "--epoch", accept: ["0", "1700000000", "4102444800"],
            refuse: ["-1", "4102444801", "9223372036854775807", "9223372036854775808"] + absurd)
        r += rows(
            "--max-schedule-lag", accept: ["0.001", "10", "3600000"], refuse: ["0", "-1", "3600000.5"] + absurd)
        r += rows("--reconnects", accept: ["0", "1000000"], refuse: ["-1", "1000001"] + absurd)
        r += rows("--drain", accept: ["0", "10", "3600"], refuse: ["-1", "-0.5", "3600.5"] + absurd)
        r += rows("--shard", accept: ["0/1", "3/4", "65535/65536"], refuse: ["4/4", "-1/4", "0/0", "0/65537", "1", "x"])
        r += rows(
            "--start-at", accept: [inSeconds(ahead), inSeconds(6 * 86_400)],
            refuse: ["0", "-5", inSeconds(-60), inSeconds(8 * 86_400), "nan", "inf", "1e300", "yesterday"])
        r += rows(
            "--max-start-skew", accept: ["0.001", "3600"], refuse: ["0", "-1", "3600.5"] + absurd,
            with: ["--start-at=\(inSeconds(ahead))"])
        r.append(Row(arguments: ["--max-start-skew=0.1"], expect: .refused("--max-start-skew")))
        let barrier = ["--barrier=/nonexistent/barrier", "--shard=0/2"]
        r += rows(
            "--barrier-timeout", accept: ["0.001", "120", "86400"], refuse: ["0", "-1", "86400.5"] + absurd,
            with: barrier)
        r += rows(
            "--barrier-margin", accept: ["0", "0.5", "3600"], refuse: ["-0.001", "-1", "3600.5"] + absurd,
            with: barrier)
        r += [
            Row(arguments: barrier, expect: .accepted),
            Row(arguments: barrier + ["--max-start-skew=0.2"], expect: .accepted),
            Row(arguments: ["--barrier=/b"], expect: .refused("--barrier")),
            Row(arguments: ["--barrier=", "--shard=0/2"], expect: .refused("--barrier")),
            Row(arguments: barrier + ["--start-at=\(inSeconds(ahead))"], expect: .refused("--barrier")),
            Row(arguments: ["--barrier-timeout=5"], expect: .refused("--barrier-timeout")),
            Row(arguments: ["--barrier-margin=1"], expect: .refused("--barrier-margin")),
        ]
        r += rows(
            "--threshold", accept: ["latency.p99=50ms", "failures=0", "non200=100%"],
            refuse: ["latency.p99=1e300ms", "latency.p99=infms", "latency.p99=nanms", "failures=-1", "non200=101%",
                "x"])
        // TARGET: ports and schemes; more than 256 shards.
        r += ["http://127.0.0.1:0", "http://127.0.0.1:65536", "ftp://127.0.0.1:1", "http://127.0.0.1", ""].map {
            Row(arguments: ["TARGET=\($0)"], expect: .refused("TARGET"))
        }
        let many = (0..<257).map { _ in "http://127.0.0.1:1" }.joined(separator: ",")
        r.append(Row(arguments: ["TARGET=\(many)"], expect: .refused("TARGET")))
        // Combinations that would be ignored or contradict each other.
        r += [
            Row(arguments: ["--team=T"], expect: .refused("--team")),
            Row(arguments: ["--auth-key=K=/k.p8"], expect: .refused("--auth-key")),
            Row(arguments: ["--auth-key==/k.p8", "--team=T"], expect: .refused("--auth-key")),
            Row(arguments: ["--auth-key=K=", "--team=T"], expect: .refused("--auth-key")),
            Row(arguments: ["--auth-key=K", "--team=T"], expect: .refused("--auth-key")),
            Row(arguments: ["--ca=/dev/null"], expect: .refused("--ca")),
            Row(arguments: ["--insecure"], expect: .refused("--insecure")),
            Row(arguments: ["TARGET=https://127.0.0.1:1", "--ca=/dev/null", "--insecure"], expect: .refused("--ca")),
            Row(arguments: ["TARGET=https://127.0.0.1:1", "--ca=/nonexistent/ca.pem"], expect: .refused("--ca")),
            Row(arguments: ["TARGET=https://127.0.0.1:1", "--ca=/dev/null"], expect: .accepted),
            Row(arguments: ["TARGET=https://127.0.0.1:1", "--insecure"], expect: .accepted),
            Row(arguments: ["TARGET=http://127.0.0.1:1,https://127.0.0.1:2", "--insecure"], expect: .accepted),
        ]
        return r
    }

    static var serveRows: [Row] {
        var r: [Row] = []
        r += rows("--workers", accept: ["0", "256"], refuse: ["-1", "257"] + absurd)
        r += rows("--devices", accept: ["1", "50000000"], refuse: ["0", "50000001"] + absurd)
        r += rows("--duration", accept: ["0.001", "2592000"], refuse: ["0", "-1", "2592001"] + absurd)
        r += rows("--rate-scale", accept: ["0.001", "1000"], refuse: ["0", "1000.01"] + absurd)
        r += rows("--seed", accept: ["0", "18446744073709551615"], refuse: ["-1", "18446744073709551616"])
        r += rows("--epoch", accept: ["0", "4102444800"], refuse: ["-1", "4102444801", "9223372036854775807"] + absurd)
        r += rows("--state-at", accept: ["0", "1700000006", "4102444800"], refuse: ["-1", "4102444801"] + absurd)
        r.append(Row(arguments: ["--state-at=1700000006", "--state=none"], expect: .refused("--state-at")))
        r += rows("--epoch-from", accept: ["serving", "first-request"], refuse: ["", "first", "1"], with: ["--epoch=0"])
        r.append(Row(arguments: ["--epoch-from=first-request"], expect: .refused("--epoch-from")))
        r += rows("--max-streams", accept: ["1", "10000"], refuse: ["0", "10001", "-1", "4294967296"] + absurd)
        r += rows("--max-connections", accept: ["1", "1000000"], refuse: ["0", "1000001"] + absurd)
        r += rows("--max-open-streams", accept: ["1", "10000000"], refuse: ["0", "10000001"] + absurd)
        r += rows("--max-unsent-bytes", accept: ["65536", "1073741824"], refuse: ["65535", "1073741825"] + absurd)
        r += rows("--request-timeout", accept: ["0.001", "86400"], refuse: ["0", "86401"] + absurd)
        r += rows("--idle-timeout", accept: ["0.001", "2592000"], refuse: ["0", "2592001"] + absurd)
        r += rows("--preface-timeout", accept: ["0.001", "3600"], refuse: ["0", "3601"] + absurd)
        r += rows("--drain-timeout", accept: ["0", "3600"], refuse: ["-1", "3601"] + absurd)
        r += rows("--settle", accept: ["0", "3600"], refuse: ["-1", "3601"] + absurd)
        // A --settle as long as the time served: nothing would be due, nothing judged (a gate that passes anything).
        r.append(Row(arguments: ["--expect-events", "--duration=5", "--settle=5"], expect: .refused("--settle")))
        r.append(Row(arguments: ["--expect-events", "--duration=5", "--settle=4.9"], expect: .accepted))
        r += rows("--max-api-bundles", accept: ["0", "100000"], refuse: ["-1", "100001"] + absurd)
        r += rows("--max-listed-channels", accept: ["1", "10000"], refuse: ["0", "10001"] + absurd)
        let register = ["--register=http://127.0.0.1:1/r"]
        r += rows("--register-rate", accept: ["0.001", "1000000"], refuse: ["0", "1000001"] + absurd, with: register)
        r += rows("--register-attempts", accept: ["1", "20"], refuse: ["0", "21"] + absurd, with: register)
        r += rows("--register-deadline", accept: ["0.001", "86400"], refuse: ["0", "86401"] + absurd, with: register)
        r += rows("--trigger-concurrency", accept: ["1", "100000"], refuse: ["0", "100001"] + absurd, with: register)
        r += rows("--trigger-timeout", accept: ["0.001", "3600"], refuse: ["0", "3601"] + absurd, with: register)
        r += rows(
            "--trigger-max-lag", accept: ["0.001", "3600000"], refuse: ["0", "-1", "3600000.5"] + absurd,
            with: ["--trigger=http://127.0.0.1:1/t"])
        r.append(Row(arguments: ["--trigger-max-lag=100"] + register, expect: .refused("--trigger-max-lag")))
        return r
    }

    /// The row's command line: TARGET=… replaces push's default target.
    static func pushArguments(_ row: Row) -> [String] {
        let target = row.arguments.first { $0.hasPrefix("TARGET=") }.map { String($0.dropFirst(7)) }
        return [target ?? "http://127.0.0.1:1", "smoke"] + row.arguments.filter { !$0.hasPrefix("TARGET=") }
    }

    /// Checks one row's outcome: the error's exit status and message, or `accepted` (then `convert` runs).
    static func check(
        _ row: Row, command: String, _ parse: () throws -> Void, message: (Error) -> String,
        exitCode: (Error) -> Int32
    ) {
        do {
            try parse()
            if case .refused(let flag) = row.expect {
                Issue.record("\(command) \(row): accepted, expected a refusal naming \(flag)")
            }
        } catch {
            let text = message(error)
            switch row.expect {
            case .accepted:
                Issue.record("\(command) \(row): refused (\(exitCode(error))): \(text)")
            case .refused(let flag):
                #expect(exitCode(error) == 64, "\(command) \(row): exit \(exitCode(error)): \(text)")
                #expect(text.contains(flag), "\(command) \(row): the message does not name \(flag): \(text)")
            }
        }
    }

    @Test("push: every numeric flag at its bounds and beyond, and the ignored combinations")
    func push() throws {
        let rows = Self.pushRows
        #expect(rows.count > 150)
        for row in rows {
            Self.check(row, command: "push", {
                let push = try Push.parse(Self.pushArguments(row))
                // What run() makes of the flags (conversions that trapped once), without a connection or a file.
                if push.authKey == nil {
                    _ = try push.pushOptions(isTrace: false)
                    _ = try push.scenarioToSend()
                }
            }, message: { Push.message(for: $0) }, exitCode: { Push.exitCode(for: $0).rawValue })
        }
    }

    @Test("serve: every numeric flag at its bounds and beyond")
    func serve() throws {
        let rows = Self.serveRows
        #expect(rows.count > 150)
        for row in rows {
            Self.check(row, command: "serve", {
                let serve = try Serve.parse(["smoke", "--h2c"] + row.arguments)
                _ = try serve.serveOptions(seed: 1)
                _ = try serve.registerOptions()
            }, message: { Serve.message(for: $0) }, exitCode: { Serve.exitCode(for: $0).rawValue })
        }
    }
}
