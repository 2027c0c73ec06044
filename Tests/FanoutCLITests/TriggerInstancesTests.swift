import Foundation
import Testing

/// FNV-1a (64-bit) of a source id, as `--trigger-spread hash` computes it (docs/BACKEND.md, *Several instances*),
/// written out here so that the test checks the documented rule, not fanout's own code.
func sourceHash(_ id: String) -> UInt64 {
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in id.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
    return h
}

/// summary.json's `byURL` rows of a section (`trigger`, `registration`), in the order given.
func byURL(_ section: [String: Any]) throws -> [[String: Any]] {
    try #require(section["byURL"] as? [[String: Any]], "no byURL in \(section.keys.sorted())")
}

/// The rows' counts added up equal the section's totals (the check `fanout serve` makes, made again here).
func rowsAddUp(_ rows: [[String: Any]], _ totals: [String: Any], sent: String, pairs: [(String, String)]) {
    func sum(_ key: String) -> Int { rows.map { $0[key] as! Int }.reduce(0, +) }
    #expect(sum("sent") == totals[sent] as! Int, "\(rows) \(totals)")
    #expect(sum("timeouts") == totals["timeouts"] as! Int)
    for (row, total) in pairs { #expect(sum(row) == totals[total] as! Int, "\(row) ≠ \(total)") }
    var statuses: [String: Int] = [:]
    for r in rows { for (k, n) in r["byStatus"] as! [String: Int] { statuses[k, default: 0] += n } }
    #expect(statuses == totals["byStatus"] as! [String: Int])
    var errors: [String: Int] = [:]
    for r in rows { for (k, n) in r["errors"] as! [String: Int] { errors[k, default: 0] += n } }
    #expect(errors == totals["errors"] as! [String: Int])
    #expect(rows.allSatisfy { $0["identityHolds"] as? Bool == true })
    #expect(totals["byURLAddsUp"] as? Bool == true)
}

@Suite("fanout serve --trigger A,B and --register A,B: several backend instances (Python backends on 127.0.0.1)",
       .serialized)
struct TriggerInstancesTests {
    static let triggerPairs = [
        ("cancelledAtShutdown", "cancelledAtShutdown"), ("unsentAtShutdown", "unsentAtShutdown"),
        ("waitedForSlot", "waitedForSlot"), ("neverLeft", "neverLeft"), ("successes", "successes"),
    ]

    @Test("hash (default): both instances get events, every event of a source goes to FNV-1a(source) mod 2")
    func hashSpread() throws {
        let a = try TriggerBackend("h1")
        let b = try TriggerBackend("h1")
        let (serve, trigger) = try triggerRun(["--workers", "2", "--trigger", a.url + "," + b.url])
        #expect(trigger["spread"] as? String == "hash")
        let rows = try byURL(trigger)
        #expect(rows.map { $0["url"] as? String } == [a.url, b.url])
        rowsAddUp(rows, trigger, sent: "sent", pairs: Self.triggerPairs)
        #expect((rows.map { $0["response"] as! [String: Any] }.map { $0["count"] as! Int }).reduce(0, +)
            == (trigger["response"] as! [String: Any])["count"] as! Int)
        var instanceOf: [String: Int] = [:]
        for (k, backend) in [a, b].enumerated() {
            let seen = try backend.requests()
            #expect(!seen.isEmpty, "instance \(k) got no event")
            #expect(arrivedAsSent(seen.count, rows[k]), "\(seen.count) seen, \(rows[k])")
            for request in seen {
                let source = (request["body"] as! [String: Any])["source"] as! String
                #expect(instanceOf[source, default: k] == k, "\(source) went to both instances")
                instanceOf[source] = k
                #expect(Int(sourceHash(source) % 2) == k, "\(source) at instance \(k)")
            }
        }
        #expect(instanceOf.count > 2)
        let md = CLI.text(of: serve.folder.appendingPathComponent("summary.md"))
        #expect(md.contains("| URL | sent | 2xx |") && md.contains("The per-URL counts add up to the totals: holds."))
        let html = CLI.text(of: serve.folder.appendingPathComponent("report.html"))
        #expect(html.contains("<th>URL</th>") && html.contains("The per-URL counts add up to the totals: holds"))
        let flags = try #require(try serve.summary()["flags"] as? [String: String])
        #expect(flags["trigger"] == "2 URLs, hash")
    }

    @Test("--trigger-spread round-robin: event k of the schedule to URL k mod 2, so the two differ by at most one")
    func roundRobin() throws {
        let a = try TriggerBackend("h1")
        let b = try TriggerBackend("h1")
        let (_, trigger) = try triggerRun(["--trigger", a.url + "," + b.url, "--trigger-spread", "round-robin"])
        #expect(trigger["spread"] as? String == "round-robin")
        let rows = try byURL(trigger)
        rowsAddUp(rows, trigger, sent: "sent", pairs: Self.triggerPairs)
        let released = rows.map { ($0["sent"] as! Int) + ($0["unsentAtShutdown"] as! Int) }
        #expect(released[0] - released[1] == 0 || released[0] - released[1] == 1, "\(released)")
        #expect(released[1] > 5)
        // Round robin, not by source: some source's events went to both.
        var instances: [String: Set<Int>] = [:]
        for (k, backend) in [a, b].enumerated() {
            for request in try backend.requests() {
                instances[(request["body"] as! [String: Any])["source"] as! String, default: []].insert(k)
            }
        }
        #expect(instances.values.contains { $0.count == 2 })
    }

    @Test("HTTP/2 (--trigger-http 2): two h2c instances on one libcurl multi handle, each over its own connections")
    func http2() throws {
        let a = try TriggerBackend("h2c")
        let b = try TriggerBackend("h2c")
        let (_, trigger) = try triggerRun(["--trigger", a.url + "," + b.url, "--trigger-http", "2"], seconds: 2)
        let rows = try byURL(trigger)
        rowsAddUp(rows, trigger, sent: "sent", pairs: Self.triggerPairs)
        for (k, backend) in [a, b].enumerated() {
            let seen = try backend.requests()
            #expect(!seen.isEmpty && seen.allSatisfy { $0["version"] as? String == "2" }, "instance \(k)")
            #expect(arrivedAsSent(seen.count, rows[k]), "\(seen.count) seen, \(rows[k])")
            let cancelled = rows[k]["cancelledAtShutdown"] as! Int
            #expect((rows[k]["byStatus"] as! [String: Int]) == ["200": (rows[k]["sent"] as! Int) - cancelled])
        }
    }

    @Test("one instance answers 500: its failures counted under its URL only, the run fails on trigger.failures")
    func oneInstanceFails() throws {
        let a = try TriggerBackend("h1")
        let b = try TriggerBackend("h1", ["--status", "500"])
        let (serve, trigger) = try triggerRun(["--trigger", a.url + "," + b.url], status: 2)
        let rows = try byURL(trigger)
        rowsAddUp(rows, trigger, sent: "sent", pairs: Self.triggerPairs)
        let (ok, failing) = (rows[0], rows[1])
        #expect(ok["failures"] as? Int == 0 && (ok["byStatus"] as! [String: Int]).keys.allSatisfy { $0 == "200" })
        let refused = (failing["byStatus"] as! [String: Int])["500"] ?? 0
        #expect(refused > 0 && failing["successes"] as? Int == 0 && failing["failures"] as? Int == refused)
        #expect((trigger["byStatus"] as! [String: Int])["500"] == refused)
        #expect(serve.stderr.contains("by URL: \(a.url) none; \(b.url) \(refused) answered 500"), "\(serve.stderr)")
        let html = CLI.text(of: serve.folder.appendingPathComponent("report.html"))
        #expect(html.contains("by URL: \(a.url) none; \(b.url) \(refused) answered 500"))
        // fanout compare shows each URL's counts and judges none (the totals are gated): against a baseline whose
        // failing instance refused nothing (its row edited, the totals left as they are) it exits 0.
        var edited = try serve.summary()
        var section = edited["trigger"] as! [String: Any]
        var editedRows = section["byURL"] as! [[String: Any]]
        editedRows[1]["failures"] = 0
        section["byURL"] = editedRows
        edited["trigger"] = section
        let baseline = serve.directory.appendingPathComponent("baseline.json")
        try JSONSerialization.data(withJSONObject: edited).write(to: baseline)
        let compared = try CLI.run(["compare", baseline.path, serve.folder.path, "--format", "json"])
        #expect(compared.status == 0, "\(compared.stdout)\n\(compared.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(compared.stdout.utf8)) as? [String: Any])
        let shown = (json["counts"] as! [[String: Any]]).filter { ($0["name"] as! String).hasPrefix("trigger.byURL.") }
        #expect(shown.count == 6 && shown.allSatisfy { $0["verdict"] as? String == "info" }, "\(shown)")
        let row = shown.first { $0["name"] as? String == "trigger.byURL.\(b.url).failures" }
        #expect(row?["baseline"] as? Int == 0 && row?["current"] as? Int == refused, "\(shown)")
    }

    @Test("an instance nothing listens on: its connection errors (and never-left requests) under its URL only")
    func refusedInstance() throws {
        let a = try TriggerBackend("h1")
        let refused = "http://127.0.0.1:\(try closedPort())/t"
        let (_, trigger) = try triggerRun(["--trigger", refused + "," + a.url], seconds: 2, status: 2)
        let rows = try byURL(trigger)
        rowsAddUp(rows, trigger, sent: "sent", pairs: Self.triggerPairs)
        let errors = (rows[0]["errors"] as! [String: Int]).values.reduce(0, +)
        #expect(errors > 0 && (rows[0]["byStatus"] as! [String: Int]).isEmpty, "\(rows[0])")
        #expect(errors + (rows[0]["cancelledAtShutdown"] as! Int) == rows[0]["sent"] as! Int)
        #expect((rows[0]["errors"] as! [String: Int]).keys.allSatisfy { $0.contains("connect") }, "\(rows[0])")
        #expect((rows[0]["neverLeft"] as! Int) >= errors, "a refused request never left")
        #expect((rows[1]["errors"] as! [String: Int]).isEmpty && rows[1]["failures"] as? Int == 0, "\(rows[1])")
        #expect((rows[1]["successes"] as! Int) > 0)
    }

    @Test("a hanging instance fills only its own --trigger-concurrency slots: the other's events never wait")
    func boundPerURL() throws {
        let hanging = try TriggerBackend("h1", ["--delay", "30"])
        let healthy = try TriggerBackend("h1")
        // Not judged (exit 3): events waited for a slot, the hanging instance's.
        let (serve, trigger) = try triggerRun(
            ["--trigger", hanging.url + "," + healthy.url, "--trigger-concurrency", "4", "--trigger-spread",
             "round-robin"], status: 3)
        let rows = try byURL(trigger)
        rowsAddUp(rows, trigger, sent: "sent", pairs: Self.triggerPairs)
        #expect(rows[0]["peakInFlight"] as? Int == 4 && (rows[0]["waitedForSlot"] as! Int) > 0, "\(rows[0])")
        #expect(rows[1]["waitedForSlot"] as? Int == 0 && rows[1]["unsentAtShutdown"] as? Int == 0, "\(rows[1])")
        let waited = rows[0]["waitedForSlot"] as! Int
        #expect(serve.stderr.contains("per URL; \(hanging.url): \(waited))"), "\(serve.stderr)")
        let answered = rows[1]["successes"] as! Int
        #expect(answered > 5 && answered + (rows[1]["cancelledAtShutdown"] as! Int) == rows[1]["sent"] as! Int)
    }

    @Test("--register A,B: line k to URL k mod 2, a refused line retried on the other URL, counted per URL")
    func registration() throws {
        let a = try TriggerBackend("h1")
        let b = try TriggerBackend("h1", ["--status", "500"])
        let serve = try ServeProcess([
            "--h2c", "--duration", "1", "--devices", "50", "--register", a.url + "," + b.url, "--register-rate",
            "2000", "--register-attempts", "2",
        ])
        serve.process.waitUntilExit()
        #expect(serve.process.terminationStatus == 0, "every activity registered: \(serve.stderr)")
        let g = try #require(try serve.summary()["registration"] as? [String: Any])
        let population = try serve.population()
        let n = population.count
        #expect(n > 10 && g["activities"] as? Int == n && g["registered"] as? Int == n, "\(g)")
        #expect(g["requests"] as? Int == n + n / 2 && g["retries"] as? Int == n / 2)
        let rows = try byURL(g)
        rowsAddUp(rows, g, sent: "requests", pairs: [])
        #expect((rows[0]["byStatus"] as! [String: Int]) == ["200": n])
        #expect((rows[1]["byStatus"] as! [String: Int]) == ["500": n / 2])
        // The odd lines of population.jsonl went to the second URL first, and only those.
        let odd = Set(population.enumerated().filter { $0.offset % 2 == 1 }.map { $0.element["activity"] as! String })
        let atB = try b.requests().map { ($0["body"] as! [String: Any])["activity"] as! String }
        #expect(atB.count == n / 2 && Set(atB) == odd)
        #expect(try a.requests().count == n)
        let md = CLI.text(of: serve.folder.appendingPathComponent("summary.md"))
        #expect(md.contains("## Registration") && md.contains("The per-URL counts add up to the totals: holds."))
        let flags = try #require(try serve.summary()["flags"] as? [String: String])
        #expect(flags["register"] == "2 URLs, round-robin")
    }

    @Test("bad lists refused before anything starts (exit 64): a URL twice, an empty one, a bad one, 65, a bad spread")
    func refusals() throws {
        let (u, v) = ("http://127.0.0.1:1/a", "http://127.0.0.1:2/a")
        let many = (1...65).map { "http://127.0.0.1:\($0)/a" }.joined(separator: ",")
        let cases: [([String], String)] = [
            (["--trigger", "\(u),\(u)"], "--trigger: \(u) given twice"),
            (["--register", "\(u),\(v),\(u)"], "--register: \(u) given twice"),
            (["--trigger", "\(u),,\(v)"], "--trigger: URL 2 of 3 is empty"),
            (["--trigger", "\(u),"], "--trigger: URL 2 of 2 is empty"),
            (["--register", ",\(u)"], "--register: URL 1 of 2 is empty"),
            (["--trigger", "\(u),ftp://127.0.0.1/a"], "--trigger (URL 2 of 2): ftp://127.0.0.1/a: expected an http"),
            (["--trigger", many], "--trigger: at most 64 URLs, got 65"),
            (["--trigger", "\(u),\(v)", "--trigger-spread", "random"], "expected hash or round-robin, got random"),
            (["--register", u, "--trigger-spread", "hash"], "--trigger-spread: how --trigger's URLs share the events"),
        ]
        for (flags, message) in cases {
            let result = try CLI.run(["serve", "smoke", "--listen", "127.0.0.1:0", "--h2c", "--duration", "1"] + flags)
            #expect(result.status == 64 && result.stderr.contains(message), "\(flags): \(result.stderr)")
        }
    }
}
