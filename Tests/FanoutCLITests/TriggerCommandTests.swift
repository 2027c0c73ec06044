import Foundation
import Testing

/// A backend on 127.0.0.1 (Resources/trigger_backend.py: http.server for HTTP/1.1, Python's `h2` for HTTP/2; or
/// another script of Resources, e.g. hostile_backend.py), started and killed by the test; each request it received
/// is a JSON line.
final class TriggerBackend {
    let process = Process()
    let directory: URL
    let log: URL
    let port: Int

    init(_ mode: String, _ options: [String] = [], script name: String = "trigger_backend") throws {
        directory = try CLI.temporaryDirectory()
        log = directory.appendingPathComponent("requests.jsonl")
        let portFile = directory.appendingPathComponent("port")
        let script = Bundle.module.url(forResource: "Resources/\(name)", withExtension: "py")!.path
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, mode, portFile.path, log.path] + options
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let p = Int(CLI.text(of: portFile)) {
                port = p
                return
            }
            if !process.isRunning { break }
            Thread.sleep(forTimeInterval: 0.02)
        }
        if process.isRunning { process.terminate() }
        throw CLIFailure("the test backend (\(mode)) did not start")
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    var url: String { "http://127.0.0.1:\(port)/trigger" }

    func requests() throws -> [[String: Any]] {
        try CLI.text(of: log).split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
    }
}

/// `fanout serve --trigger` run for `seconds` (it stops itself); its summary's `trigger` object. `status`: the exit
/// status its verdict gives (2: an objective broken, e.g. trigger.failures=0; 3: the trigger fell behind, not judged),
/// its last stderr line saying so.
func triggerRun(
    _ arguments: [String], seconds: Int = 3, status: Int32 = 0
) throws -> (serve: ServeProcess, trigger: [String: Any]) {
    let serve = try ServeProcess(["--h2c", "--duration", String(seconds)] + arguments)
    serve.process.waitUntilExit()
    #expect(serve.process.terminationStatus == status, "\(serve.stderr)")
    let verdict = ["fanout serve: verdict: passed", "", "fanout serve: verdict: FAILED", "fanout serve: verdict: NOT JUDGED"]
    #expect(serve.stderr.contains(status == 0 ? "fanout serve: verdict: " : verdict[Int(status)]), "\(serve.stderr)")
    let summary = try serve.summary()
    let trigger = try #require(summary["trigger"] as? [String: Any], "no trigger in summary.json")
    #expect(trigger["identityHolds"] as? Bool == true)
    return (serve, trigger)
}

/// The backend saw every request the trigger sent, but for some of those cancelled at shutdown: a request counts as
/// sent when it is started, and one cancelled a moment later may not have reached the backend (how many did is a
/// matter of timing; that none went missing otherwise is not).
func arrivedAsSent(_ seen: Int, _ trigger: [String: Any]) -> Bool {
    let (sent, cancelled) = (trigger["sent"] as! Int, trigger["cancelledAtShutdown"] as! Int)
    return seen <= sent && seen >= sent - cancelled
}

func intendedSeconds(_ text: String) -> Double {
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return f.date(from: text)!.timeIntervalSince1970
}

@Suite("fanout serve --trigger (real backends on 127.0.0.1)", .serialized)
struct TriggerCommandTests {
    @Test("HTTP/1.1: every event POSTed once in INGEST §5's shape, at its intended time, answers counted")
    func bodies() throws {
        let backend = try TriggerBackend("h1")
        let (serve, trigger) = try triggerRun(["--workers", "2", "--trigger", backend.url])
        let seen = try backend.requests()
        let sent = trigger["sent"] as! Int
        #expect(sent > 20)
        #expect(arrivedAsSent(seen.count, trigger), "\(seen.count) seen, \(trigger)")
        // Once each: no (source, timestamp) POSTed twice (a duplicate and a skipped event would keep the count).
        let events = seen.map { r -> String in
            let body = r["body"] as! [String: Any]
            return "\(body["source"] as! String) \(body["timestamp"] as! Int)"
        }
        #expect(Set(events).count == seen.count, "an event POSTed twice")
        // Answered, but for those still in flight when serving stopped (cancelled then): never more than were in
        // flight at once.
        let cancelled = trigger["cancelledAtShutdown"] as! Int
        #expect(cancelled <= trigger["peakInFlight"] as! Int)
        #expect((trigger["byStatus"] as! [String: Int]) == ["200": sent - cancelled])
        #expect(trigger["successes"] as? Int == sent - cancelled)
        let keys: Set<String> = [
            "source", "app", "event", "timestamp", "content-state", "stale-date", "relevance-score", "dismissal-date",
            "channel", "intendedAt",
        ]
        let apps = Set(try serve.population().map { $0["app"] as! String })
        var latest = 0.0
        for request in seen {
            #expect(request["path"] as? String == "/trigger" && request["version"] as? String == "1.1")
            let body = request["body"] as! [String: Any]
            #expect(Set(body.keys) == keys)
            #expect((body["source"] as! String).hasPrefix("source-"))
            #expect(apps.contains(body["app"] as! String))
            #expect(["update", "end"].contains(body["event"] as! String))
            #expect(body["timestamp"] is Int && body["stale-date"] is Int && body["content-state"] is [String: Any])
            #expect(body["relevance-score"] is Double || body["relevance-score"] is Int)
            #expect(body["dismissal-date"] is NSNull || body["dismissal-date"] is Int)
            #expect(body["channel"] is NSNull || body["channel"] is String)
            // Never sent before its intended time (how late is the schedule lag summary.json measures, not a
            // test's business: a loaded machine sends late). intendedAt is in whole milliseconds.
            let intended = intendedSeconds(body["intendedAt"] as! String)
            latest = max(latest, intended)
            #expect((request["t"] as! Double) >= intended - 0.001)
        }
        #expect(latest > 0)
        let response = trigger["response"] as! [String: Any]
        #expect(response["count"] as? Int == sent - cancelled)
        #expect((trigger["scheduleLag"] as! [String: Any])["count"] as? Int == sent, "each request's lag measured")
        for file in ["trigger-response.hgrm", "trigger-schedule-lag.hgrm"] {
            #expect(FileManager.default.fileExists(atPath: serve.folder.appendingPathComponent(file).path))
        }
        let md = CLI.text(of: serve.folder.appendingPathComponent("summary.md"))
        #expect(md.contains("## Trigger") && md.contains("sent = answered + timeouts + errors + cancelled: holds."))
    }

    @Test("open loop: 1 s answers do not slow the schedule; --trigger-concurrency bounds what is in flight, waits counted")
    func openLoop() throws {
        // Slots enough: every event goes out at its time although each answer takes a second.
        let wide = try TriggerBackend("h1", ["--delay", "1"])
        let (_, free) = try triggerRun(["--trigger", wide.url])
        let seenFree = try wide.requests()
        #expect(arrivedAsSent(seenFree.count, free), "\(seenFree.count) seen, \(free)")
        for request in seenFree {
            let body = request["body"] as! [String: Any]
            #expect((request["t"] as! Double) >= intendedSeconds(body["intendedAt"] as! String) - 0.001)
        }
        // Not waiting for answers: more at the backend at once than the bounded run below allows (a slower machine
        // sends later, in bunches: more at once, not fewer), and no event waited for a slot.
        #expect((seenFree.compactMap { $0["inflight"] as? Int }.max() ?? 0) > 4)
        #expect(free["waitedForSlot"] as? Int == 0 && free["unsentAtShutdown"] as? Int == 0)
        // Four slots: never more than four at the backend, the rest wait (counted, their wait measured), none lost.
        let narrow = try TriggerBackend("h1", ["--delay", "1"])
        let (_, bounded) = try triggerRun(["--trigger", narrow.url, "--trigger-concurrency", "4"], status: 3)
        let seen = try narrow.requests()
        #expect(arrivedAsSent(seen.count, bounded), "\(seen.count) seen, \(bounded)")
        #expect((seen.compactMap { $0["inflight"] as? Int }.max() ?? 0) <= 4)
        #expect(bounded["peakInFlight"] as? Int == 4)
        #expect((bounded["waitedForSlot"] as! Int) > 0)
        let lag = bounded["scheduleLag"] as! [String: Any]
        #expect((lag["maxNanos"] as! Int) > 500_000_000)
        // None lost, none out of turn: the bounded run sent the schedule's first events in order (the free run's
        // first ones, by their offsets from the first event: the same schedule), the rest still waiting at shutdown.
        #expect((bounded["unsentAtShutdown"] as! Int) > 0)
        func offsets(_ requests: [[String: Any]]) -> [Int] {
            let times = requests.map { intendedSeconds(($0["body"] as! [String: Any])["intendedAt"] as! String) }
            let first = times.min() ?? 0
            return times.map { Int((($0 - first) * 1000).rounded()) }.sorted()
        }
        // The answered ones (all but those cancelled at shutdown, the last sent) were the schedule's first.
        let answered = (bounded["sent"] as! Int) - (bounded["cancelledAtShutdown"] as! Int)
        let boundedOffsets = offsets(seen).prefix(answered)
        let freeOffsets = offsets(seenFree).prefix(answered)
        #expect(answered > 0 && seen.count < seenFree.count, "4 slots of 1 s answers send fewer than the open loop")
        #expect(boundedOffsets == freeOffsets, "the schedule's first events")
    }

    @Test("a backend slower than --trigger-timeout: every request counted as a timeout (or cancelled at shutdown)")
    func timeouts() throws {
        let backend = try TriggerBackend("h1", ["--delay", "5"])
        let (_, trigger) = try triggerRun(["--trigger", backend.url, "--trigger-timeout", "0.3"], seconds: 2, status: 2)
        let sent = trigger["sent"] as! Int
        #expect(sent > 10)
        #expect((trigger["byStatus"] as! [String: Int]).isEmpty)
        #expect((trigger["timeouts"] as! Int) + (trigger["cancelledAtShutdown"] as! Int) == sent)
        #expect((trigger["timeouts"] as! Int) > 0)
        #expect((trigger["response"] as! [String: Any])["count"] as? Int == 0)
    }

    @Test("HTTP/2 (h2c) with --trigger-http 2; a refused connection counted as an error")
    func http2AndErrors() throws {
        let backend = try TriggerBackend("h2c")
        let (_, trigger) = try triggerRun(["--trigger", backend.url, "--trigger-http", "2"], seconds: 2)
        let seen = try backend.requests()
        #expect(arrivedAsSent(seen.count, trigger), "\(seen.count) seen, \(trigger)")
        #expect(seen.allSatisfy { $0["version"] as? String == "2" })
        let cancelled = trigger["cancelledAtShutdown"] as! Int
        #expect((trigger["byStatus"] as! [String: Int]) == ["200": (trigger["sent"] as! Int) - cancelled])
        // Nothing listens on port 1.
        let (_, refused) = try triggerRun(["--trigger", "http://127.0.0.1:1/t"], seconds: 1, status: 2)
        let errors = refused["errors"] as! [String: Int]
        #expect(errors.values.reduce(0, +) + (refused["cancelledAtShutdown"] as! Int) == refused["sent"] as! Int)
        #expect(errors.keys.contains { $0.contains("connect") })
    }

    @Test("--register: every population line POSTed as it is, a refusal retried, the events only after registration")
    func registration() throws {
        let backend = try TriggerBackend("h1", ["--fail-first", "3"])
        let base = "http://127.0.0.1:\(backend.port)"
        let serve = try ServeProcess([
            "--h2c", "--duration", "2", "--register", base + "/register", "--register-rate", "2000", "--trigger",
            base + "/trigger",
        ])
        serve.process.waitUntilExit()
        #expect(serve.process.terminationStatus == 0, "\(serve.stderr)")
        let summary = try serve.summary()
        let g = try #require(summary["registration"] as? [String: Any])
        let population = try serve.population()
        #expect(g["activities"] as? Int == population.count)
        #expect(g["registered"] as? Int == population.count)
        #expect(g["retries"] as? Int == 3 && g["failed"] as? Int == 0 && g["identityHolds"] as? Bool == true)
        #expect((g["byStatus"] as! [String: Int]) == ["200": population.count, "503": 3])
        let seen = try backend.requests()
        let registrations = seen.filter { $0["path"] as? String == "/register" }
        #expect(registrations.count == population.count + 3)
        // The same objects as population.jsonl (INGEST §5), each activity at least once.
        func key(_ o: [String: Any]) -> String { o["activity"] as! String }
        var bodies: [String: NSDictionary] = [:]
        for r in registrations { let b = r["body"] as! [String: Any]; bodies[key(b)] = b as NSDictionary }
        #expect(bodies.count == population.count)
        for line in population { #expect(bodies[key(line)] == line as NSDictionary) }
        let triggers = seen.filter { $0["path"] as? String == "/trigger" }
        #expect(!triggers.isEmpty)
        let lastRegistration = registrations.map { $0["t"] as! Double }.max()!
        #expect(triggers.allSatisfy { ($0["t"] as! Double) >= lastRegistration })
        #expect(CLI.text(of: serve.folder.appendingPathComponent("summary.md")).contains("## Registration"))
    }

    @Test("--register against a backend refusing everything: every attempt made, every activity counted failed")
    func registrationFailures() throws {
        let backend = try TriggerBackend("h1", ["--status", "500"])
        let serve = try ServeProcess([
            "--h2c", "--duration", "1", "--devices", "50", "--register", backend.url, "--register-rate", "2000",
            "--register-attempts", "2",
        ])
        serve.process.waitUntilExit()
        #expect(serve.process.terminationStatus == 2, "\(serve.stderr)")
        #expect(serve.stderr.contains("verdict: FAILED: unregistered=0 broken"), "\(serve.stderr)")
        let g = try #require(try serve.summary()["registration"] as? [String: Any])
        let activities = g["activities"] as! Int
        #expect(activities > 0)
        #expect(g["failed"] as? Int == activities && g["registered"] as? Int == 0)
        #expect(g["requests"] as? Int == 2 * activities && g["retries"] as? Int == activities)
        #expect((g["byStatus"] as! [String: Int]) == ["500": 2 * activities])
        #expect(try backend.requests().count == 2 * activities)
    }

    @Test("--register-deadline: a backend too slow to finish; the rest counted unregistered, serving starts anyway")
    func registrationDeadline() throws {
        let backend = try TriggerBackend("h1", ["--delay", "3"])
        let serve = try ServeProcess([
            "--h2c", "--duration", "1", "--devices", "50", "--register", backend.url, "--register-deadline", "0.5",
        ])
        serve.process.waitUntilExit()
        #expect(serve.process.terminationStatus == 2, "\(serve.stderr)")
        #expect(serve.stderr.contains("verdict: FAILED: unregistered=0 broken"), "\(serve.stderr)")
        let g = try #require(try serve.summary()["registration"] as? [String: Any])
        // The deadline ended it, not an answer or a timeout: none of the 3 s answers, no 10 s timeout counted.
        #expect((g["byStatus"] as? [String: Int])?.isEmpty == true && g["timeouts"] as? Int == 0, "\(g)")
        let activities = g["activities"] as! Int
        #expect(g["unregisteredAtDeadline"] as? Int == activities && g["registered"] as? Int == 0)
        #expect(g["identityHolds"] as? Bool == true)
    }

    @Test("TLS: https:// with --trigger-ca and --trigger-http 2 (ALPN h2); without the CA every request fails")
    func tls() throws {
        let dir = try CLI.temporaryDirectory()
        let cert = dir.appendingPathComponent("cert.pem").path
        let key = dir.appendingPathComponent("key.pem").path
        let made = try Tool.run("openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out",
            cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ])
        try #require(made.status == 0, "\(made.stderr)")
        let backend = try TriggerBackend("h2tls", ["--cert", cert, "--key", key])
        let url = "https://127.0.0.1:\(backend.port)/trigger"
        let (_, trigger) = try triggerRun(["--trigger", url, "--trigger-http", "2", "--trigger-ca", cert], seconds: 2)
        let seen = try backend.requests()
        #expect(arrivedAsSent(seen.count, trigger) && seen.count > 10, "\(seen.count) seen, \(trigger)")
        #expect(seen.allSatisfy { $0["version"] as? String == "2" })
        let cancelled = trigger["cancelledAtShutdown"] as! Int
        #expect((trigger["byStatus"] as! [String: Int]) == ["200": (trigger["sent"] as! Int) - cancelled])
        // Failing handshakes hold the trigger's loop up on a slow build (ThreadSanitizer's: not judged, exit 3); the
        // failures are what is checked here, the lag bound in openLoop.
        let (_, untrusted) = try triggerRun(
            ["--trigger", url, "--trigger-http", "2", "--trigger-max-lag", "5000"], seconds: 1, status: 2)
        // Every request fails its handshake, but for those still handshaking when serving stopped (cancelled).
        let failed = (untrusted["errors"] as! [String: Int]).values.reduce(0, +)
        #expect(failed > 0 && failed + (untrusted["cancelledAtShutdown"] as! Int) == untrusted["sent"] as! Int)
        #expect((untrusted["byStatus"] as! [String: Int]).isEmpty)
    }

    @Test("SIGINT during registration: it ends, serving ends at once, the run folder is written")
    func registrationInterrupted() throws {
        let backend = try TriggerBackend("h1", ["--delay", "5"])
        let serve = try ServeProcess(["--h2c", "--devices", "50", "--register", backend.url])
        let deadline = Date().addingTimeInterval(20)
        while !serve.stderr.contains("registering") && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        Thread.sleep(forTimeInterval: 0.3)
        serve.process.interrupt()
        serve.process.waitUntilExit()
        #expect(serve.process.terminationStatus == 2, "nothing registered: \(serve.stderr)")
        let g = try #require(try serve.summary()["registration"] as? [String: Any])
        #expect(g["interrupted"] as? Bool == true)
        let activities = try #require(g["activities"] as? Int)
        #expect(g["unregisteredAtDeadline"] as? Int == activities && activities > 0)
        #expect(g["identityHolds"] as? Bool == true)
    }

    @Test("--trigger with --expect-events: each event sent is one of events.jsonl, at its offset from the same t0")
    func sameEventsAsExpected() throws {
        let backend = try TriggerBackend("h1")
        // --settle 0: every event sent before shutdown is due, and missing (this backend pushes nothing): exit 2.
        let (serve, trigger) = try triggerRun(
            ["--workers", "2", "--expect-events", "--settle", "0", "--trigger", backend.url], seconds: 2, status: 2)
        let expected = try CLI.text(of: serve.folder.appendingPathComponent("events.jsonl")).split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
        var offsets: [String: Int] = [:]
        for e in expected { offsets["\(e["source"] as! String) \(e["timestamp"] as! Int)"] = e["offsetNanos"] as? Int }
        let sent = try backend.requests().map { $0["body"] as! [String: Any] }
        #expect(sent.count == trigger["sent"] as! Int && sent.count > 10)
        // intendedAt − offset is t0 on the wall clock: the same for every event (to the millisecond).
        var t0s: [Double] = []
        for body in sent {
            let offset = offsets["\(body["source"] as! String) \(body["timestamp"] as! Int)"]
            #expect(offset != nil, "\(body) is not in events.jsonl")
            if let offset { t0s.append(intendedSeconds(body["intendedAt"] as! String) - Double(offset) / 1e9) }
        }
        #expect((t0s.max() ?? 0) - (t0s.min() ?? 0) < 0.0015)
        // Each sent once, and every event due before the last one sent was sent (none skipped).
        let keys = sent.map { "\($0["source"] as! String) \($0["timestamp"] as! Int)" }
        #expect(Set(keys).count == sent.count, "an event POSTed twice")
        let lastOffset = keys.compactMap { offsets[$0] }.max() ?? 0
        let due = Set(offsets.filter { $0.value < lastOffset }.keys)
        #expect(due.isSubset(of: Set(keys)), "events due before the last one sent were not sent")
    }

    /// `--rate-scale` scales the scenario's arrival rates, as `fanout run --rate-scale` does: the events expected
    /// (events.jsonl) over the scenario's duration double with a factor of 2.
    @Test("--rate-scale 2: about twice the events in events.jsonl, over the same span")
    func rateScale() throws {
        func events(_ extra: [String]) throws -> [Int] {
            // --settle 0: a half-second serve with the default 2 s would have nothing due (refused, exit 64). No
            // backend pushes: the events due are missing, and the verdict says so (exit 2).
            let serve = try ServeProcess(["--h2c", "--duration", "0.5", "--expect-events", "--settle", "0"] + extra)
            serve.process.waitUntilExit()
            #expect(serve.process.terminationStatus == 2, "\(serve.stderr)")
            #expect(serve.stderr.contains("verdict: FAILED: missing=0 broken"), "\(serve.stderr)")
            return CLI.text(of: serve.folder.appendingPathComponent("events.jsonl")).split(separator: "\n").map {
                let o = try! JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
                return o["offsetNanos"] as! Int
            }
        }
        let base = try events([])
        let doubled = try events(["--rate-scale", "2"])
        let ratio = Double(doubled.count) / Double(max(base.count, 1))
        #expect(base.count > 100 && ratio > 1.8 && ratio < 2.2, "\(base.count) → \(doubled.count)")
        #expect(abs(Double(doubled.max()! - base.max()!)) < 2e9, "the same span")
    }
}
