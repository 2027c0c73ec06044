import Foundation
import Testing

/// A backend that misbehaves one way (the issue's "bad input" for `--trigger` and `--register`).
enum BadBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// Nothing listens on the port (a socket bound and closed by the test).
    case refused
    /// http.server answering 500 to everything.
    case status500
    /// Reads each request, never answers (past a short `--trigger-timeout`).
    case hang
    /// `200 OK`, `Content-Length: 100`, 10 bytes of the body, then the connection closes.
    case partialBody
    /// Reads the request and closes the connection without a byte.
    case closedAfterRequest
    /// Reads the request and resets the connection (an RST).
    case reset
    /// https:// to a server whose certificate does not chain to `--trigger-ca`.
    case untrustedTLS
    /// https:// to a plain-HTTP port.
    case tlsToPlainHTTP

    var testDescription: String { rawValue }

    /// The trigger's timeout for this case (seconds): short where the backend hangs, else long enough that a
    /// slow machine never turns a failure into a timeout.
    var timeout: String { self == .hang ? "0.4" : "5" }
}

/// What a bad backend is, for one run: its URL base, the flags it needs, what keeps it alive.
struct BadBackendSetup {
    var base: String
    var flags: [String] = []
    var keep: [AnyObject] = []

    init(_ bad: BadBackend) throws {
        switch bad {
        case .refused:
            base = "http://127.0.0.1:\(try closedPort())"
        case .status500:
            let b = try TriggerBackend("h1", ["--status", "500"])
            base = "http://127.0.0.1:\(b.port)"
            keep = [b]
        case .hang, .partialBody, .closedAfterRequest, .reset:
            let mode = ["hang": "hang", "partialBody": "partial", "closedAfterRequest": "close", "reset": "reset"][
                bad.rawValue]!
            let b = try TriggerBackend(mode, script: "hostile_backend")
            base = "http://127.0.0.1:\(b.port)"
            keep = [b]
        case .untrustedTLS:
            let (cert, key) = try selfSignedCertificate()
            let (otherCA, _) = try selfSignedCertificate()
            let b = try TriggerBackend("close", ["--cert", cert, "--key", key], script: "hostile_backend")
            base = "https://127.0.0.1:\(b.port)"
            flags = ["--trigger-ca", otherCA]
            keep = [b]
        case .tlsToPlainHTTP:
            let b = try TriggerBackend("plain", script: "hostile_backend")
            base = "https://127.0.0.1:\(b.port)"
            keep = [b]
        }
    }
}

/// A port on 127.0.0.1 nothing listens on: bound to a fresh socket, which is closed at once.
func closedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw CLIFailure("socket: \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard ok else { throw CLIFailure("bind: \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A P-256 certificate for 127.0.0.1 signed by its own key (openssl req -x509): (certificate, key) PEM paths.
func selfSignedCertificate() throws -> (String, String) {
    let dir = try CLI.temporaryDirectory()
    let cert = dir.appendingPathComponent("cert.pem").path
    let key = dir.appendingPathComponent("key.pem").path
    let made = try Tool.run("openssl", [
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out",
        cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
    ])
    guard made.status == 0 else { throw CLIFailure("openssl req: \(made.stderr)") }
    return (cert, key)
}

/// Waits for `serve` to end by itself; one still running after `seconds` is killed (and the test fails).
func exitStatus(of serve: ServeProcess, within seconds: Double) -> Int32 {
    let deadline = Date().addingTimeInterval(seconds)
    while serve.process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
    let hung = serve.process.isRunning
    if hung { kill(serve.process.processIdentifier, SIGKILL) }
    serve.process.waitUntilExit()
    #expect(!hung, "fanout serve still running after \(seconds) s: \(serve.stderr)")
    return serve.process.terminationStatus
}

/// summary.md's section `## title`, up to the next.
func section(_ md: String, _ title: String) -> String {
    guard let start = md.range(of: "## \(title)\n") else { return "" }
    let rest = md[start.upperBound...]
    return String(rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)])
}

func sum(_ counts: Any?) -> Int { (counts as? [String: Int] ?? [:]).values.reduce(0, +) }

@Suite("fanout serve --trigger and --register against misbehaving backends")
struct BackendFailureTests {
    /// Every failure of this backend, as summary.json counts it: the status it answered, or the words an error
    /// key must hold (a clear libcurl message), or nil for timeouts.
    static func expectedFailure(_ bad: BadBackend) -> (status: String?, words: [String]) {
        switch bad {
        case .refused: (nil, ["Connection refused"])
        case .status500: ("500", [])
        case .hang: (nil, [])
        case .partialBody: (nil, ["partial"])
        case .closedAfterRequest: (nil, ["Server returned nothing"])
        case .reset: (nil, ["(Connection reset by peer)"])
        case .untrustedTLS: (nil, ["SSL", "certificate"])
        case .tlsToPlainHTTP: (nil, ["SSL", "wrong version number"])
        }
    }

    /// Each bad backend, for --register and --trigger in one run: exit 0, the folder written, every attempt and
    /// event counted under its failure, the identities hold, summary.md and stderr name the failure.
    @Test("a bad backend for --register and --trigger: counted, named, identities hold", arguments: BadBackend.allCases)
    func matrix(_ bad: BadBackend) throws {
        let setup = try BadBackendSetup(bad)
        let serve = try ServeProcess([
            "--h2c", "--workers", "1", "--devices", "50", "--duration", "1.5", "--state", "none",
            "--register", setup.base + "/register", "--register-rate", "5000", "--register-attempts", "2",
            "--trigger", setup.base + "/trigger", "--trigger-timeout", bad.timeout,
            // What is judged here is the failures, not fanout's lag (149 ms under AddressSanitizer, load 10).
            "--trigger-max-lag", "60000",
        ] + setup.flags)
        // Every activity failed to register: the verdict fails the run (exit 2) and says why.
        #expect(exitStatus(of: serve, within: 40) == 2, "\(serve.stderr)")
        #expect(serve.stderr.contains("verdict: FAILED: unregistered=0 broken"), "\(serve.stderr)")
        let summary = try serve.summary()
        let md = CLI.text(of: serve.folder.appendingPathComponent("summary.md"))
        let stderr = serve.stderr
        let (status, words) = Self.expectedFailure(bad)

        // Registration: every activity failed after both attempts, each attempt counted once under the failure.
        let g = try #require(summary["registration"] as? [String: Any])
        let activities = g["activities"] as! Int
        let requests = g["requests"] as! Int
        #expect(activities > 20)
        #expect(g["identityHolds"] as? Bool == true)
        #expect(g["failed"] as? Int == activities && g["registered"] as? Int == 0, "\(g)")
        #expect(requests == 2 * activities && g["retries"] as? Int == activities)
        #expect(sum(g["byStatus"]) + (g["timeouts"] as! Int) + sum(g["errors"]) == requests, "\(g)")

        // Trigger: every event sent ended as the failure, or was cancelled at shutdown.
        let t = try #require(summary["trigger"] as? [String: Any])
        let sent = t["sent"] as! Int
        let cancelled = t["cancelledAtShutdown"] as! Int
        #expect(sent > 5)
        #expect(t["identityHolds"] as? Bool == true)
        #expect(t["successes"] as? Int == 0)
        #expect(sum(t["byStatus"]) + (t["timeouts"] as! Int) + sum(t["errors"]) + cancelled == sent, "\(t)")
        #expect((t["response"] as! [String: Any])["count"] as? Int == sum(t["byStatus"]))

        // Each failure under its key, named in its summary.md section and in its stderr line.
        let lines = stderr.split(separator: "\n")
        let registrationLine = String(lines.first { $0.hasPrefix("fanout serve: registered ") } ?? "")
        let triggerLine = String(lines.first { $0.hasPrefix("fanout serve: trigger \(setup.base)/trigger: ") } ?? "")
        #expect(registrationLine.contains("registered 0 of \(activities) activities (\(activities) failed"))
        #expect(triggerLine.contains("0 of \(sent) events answered 2xx"), "\(stderr)")
        for (name, counts, title, line) in [
            ("registration", g, "Registration", registrationLine), ("trigger", t, "Trigger", triggerLine),
        ] {
            let byStatus = counts["byStatus"] as! [String: Int]
            let errors = counts["errors"] as! [String: Int]
            let timeouts = counts["timeouts"] as! Int
            let part = section(md, title)
            if let status {
                #expect(Array(byStatus.keys) == [status] && errors.isEmpty && timeouts == 0, "\(name): \(counts)")
                #expect(part.contains("| \(status) | \(byStatus[status] ?? -1) |"), "\(name): \(part)")
                #expect(line.contains(": \(byStatus[status] ?? -1) answered \(status)"), "\(name): \(line)")
            } else if words.isEmpty {
                #expect(byStatus.isEmpty && errors.isEmpty && timeouts > 0, "\(name): \(counts)")
                #expect(line.contains(": \(timeouts) timed out"), "\(name): \(line)")
            } else {
                // One key, or two where the failure meets a send or a receive (a reset): each names it.
                #expect(byStatus.isEmpty && timeouts == 0 && (1...2).contains(errors.count), "\(name): \(counts)")
                for (message, n) in errors {
                    #expect(words.allSatisfy { message.contains($0) }, "\(name): \(message) does not name \(words)")
                    #expect(part.contains("| \(message) | \(n) |"), "\(name): summary.md does not name it: \(part)")
                    #expect(line.contains(" \(n) \(message)"), "\(name): \(line)")
                }
            }
        }
        #expect(md.contains("activities = registered + failed + unregistered: holds."))
        #expect(md.contains("sent = answered + timeouts + errors + cancelled: holds."))
    }

    @Test("HTTP/2 (h2c) answering in 0.2 s, within --trigger-timeout: every registration and event answered 200")
    func slowHTTP2() throws {
        let backend = try TriggerBackend("h2c", ["--delay", "0.2"])
        let base = "http://127.0.0.1:\(backend.port)"
        let serve = try ServeProcess([
            "--h2c", "--workers", "1", "--devices", "50", "--duration", "1.5", "--state", "none",
            "--register", base + "/register", "--register-rate", "5000", "--trigger", base + "/trigger",
            "--trigger-http", "2", "--trigger-timeout", "3",
        ])
        #expect(exitStatus(of: serve, within: 40) == 0, "\(serve.stderr)")
        let summary = try serve.summary()
        let g = try #require(summary["registration"] as? [String: Any])
        let activities = g["activities"] as! Int
        #expect(g["registered"] as? Int == activities && g["requests"] as? Int == activities, "\(g)")
        #expect((g["byStatus"] as! [String: Int]) == ["200": activities] && g["identityHolds"] as? Bool == true)
        let t = try #require(summary["trigger"] as? [String: Any])
        let sent = t["sent"] as! Int
        let cancelled = t["cancelledAtShutdown"] as! Int
        // Cancelled: in flight when serving stopped, never more than were in flight at once.
        #expect(sent > 5 && cancelled <= t["peakInFlight"] as! Int)
        #expect((t["byStatus"] as! [String: Int]) == ["200": sent - cancelled], "\(t)")
        #expect(t["identityHolds"] as? Bool == true && sum(t["errors"]) == 0 && t["timeouts"] as? Int == 0)
        let seen = try backend.requests()
        #expect(arrivedAsSent(seen.count - activities, t) && seen.allSatisfy { $0["version"] as? String == "2" })
        // Answered in 0.2 s or a little more, never near the timeout.
        let response = t["response"] as! [String: Any]
        #expect((response["p50Nanos"] as? Int ?? 0) >= 200_000_000, "\(response)")
    }

    /// A backend that hangs, serving stopped before --trigger-timeout: what is in flight is cancelled at shutdown,
    /// what waits for a slot is unsent, the identity holds.
    @Test("a hanging backend at shutdown: in flight cancelled, waiting unsent, the identity holds")
    func shutdownWhileHanging() throws {
        let backend = try TriggerBackend("hang", script: "hostile_backend")
        let serve = try ServeProcess([
            "--h2c", "--workers", "1", "--devices", "50", "--duration", "1.5", "--state", "none",
            "--trigger", backend.url, "--trigger-concurrency", "3", "--trigger-timeout", "30",
        ])
        // Events left unsent: fanout's trigger held the run up, so it is not judged (exit 3) and says so.
        #expect(exitStatus(of: serve, within: 20) == 3, "\(serve.stderr)")
        #expect(serve.stderr.contains("verdict: NOT JUDGED: fanout held the run up"), "\(serve.stderr)")
        let t = try #require(try serve.summary()["trigger"] as? [String: Any])
        #expect(t["sent"] as? Int == 3 && t["peakInFlight"] as? Int == 3, "\(t)")
        #expect(t["cancelledAtShutdown"] as? Int == 3 && t["timeouts"] as? Int == 0 && sum(t["errors"]) == 0)
        #expect((t["unsentAtShutdown"] as! Int) > 5 && (t["waitedForSlot"] as! Int) > 5, "\(t)")
        #expect(t["identityHolds"] as? Bool == true && t["completed"] as? Bool == false)
        #expect(try backend.requests().count == 3)
        let md = CLI.text(of: serve.folder.appendingPathComponent("summary.md"))
        #expect(md.contains("3 cancelled at shutdown; \(t["unsentAtShutdown"] as! Int) due but unsent at shutdown"))
    }

    /// Ctrl-C while failed attempts keep coming back and wait for their retries: each activity, waiting, in
    /// flight or not started, counted unregistered once, the identity holding. (It did not catch, in six runs,
    /// the race Registrar.deadlinePassed now closes — an answer completed by libcurl's timer between the signal
    /// and the client's deferred close, retried into a queue nobody counted — seen by hand once in six runs
    /// against a slower http.server.)
    @Test("SIGINT amid a storm of 500s during registration: every activity counted, identity holds")
    func interruptedAmidFailures() throws {
        let backend = try TriggerBackend("500", script: "hostile_backend")
        let serve = try ServeProcess([
            "--h2c", "--workers", "1", "--devices", "2000", "--state", "none", "--register", backend.url,
            "--register-rate", "5000", "--register-attempts", "20",
        ])
        // Amid the storm: once the backend has read 150 registrations (a fixed wait was too short on a loaded
        // machine, where reading population.jsonl took it; the count does not depend on the machine's speed).
        let deadline = Date().addingTimeInterval(60)
        while (try? backend.requests().count) ?? 0 < 150 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        serve.process.interrupt()
        #expect(exitStatus(of: serve, within: 30) == 2, "nothing registered: \(serve.stderr)")
        let g = try #require(try serve.summary()["registration"] as? [String: Any])
        #expect(g["interrupted"] as? Bool == true && (g["requests"] as! Int) > 100, "\(g)")
        #expect(g["registered"] as? Int == 0 && g["failed"] as? Int == 0, "\(g)")
        let activities = try #require(g["activities"] as? Int)
        #expect(g["unregisteredAtDeadline"] as? Int == activities && activities > 0, "\(g)")
        #expect(g["identityHolds"] as? Bool == true)
        #expect((g["byStatus"] as! [String: Int]).keys.sorted() == ["500"])
    }
}
