import Foundation
import Testing

// h2load and event loops, continued from ServeCommandTests.swift.
extension ServeCommandTests {
    @Test("h2load: 20,000 pushes on 4 connections × 100 streams, every answer accounted for")
    func h2load() throws {
        let serve = try ServeProcess(["--h2c"])
        let p = try serve.population().first!
        let body = serve.directory.appendingPathComponent("payload.json")
        let now = Int(Date().timeIntervalSince1970)
        try livePayload(timestamp: now).write(to: body, atomically: true, encoding: .utf8)
        let result = try Tool.run(
            "h2load",
            [
                "-n", "20000", "-c", "4", "-m", "100", "-d", body.path,
                "-H", "apns-push-type: liveactivity", "-H", "apns-topic: \(p["app"] as! String).push-type.liveactivity",
                "http://127.0.0.1:\(serve.port)/3/device/\(p["token"] as! String)",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("20000 succeeded"), "\(result.stdout)")
        #expect(serve.stop() == 0)
        let summary = try serve.summary()
        let requests = summary["requests"] as! [String: Any]
        #expect(requests["total"] as? Int == 20000)
        #expect((requests["byStatus"] as! [String: Int])["200"] == 20000)
        let accounting = summary["accounting"] as! [String: Any]
        let outcomes = accounting["outcomes"] as! [String: Int]
        // One timestamp, 20,000 times: the first applies, every retry is a duplicate the device ignores.
        #expect(outcomes["applied"] == 1 && outcomes["ignoredStaleTimestamp"] == 19_999, "\(outcomes)")
        #expect(accounting["deliveries"] as? Int == 20000)
        #expect(accounting["identitiesHold"] as? Bool == true)
        let latency = summary["latency"] as! [String: [String: Any]]
        #expect(latency["service"]?["count"] as? Int == 20000)
        // The wire identity, from two code paths: 20,000 answers judged by the service, 20,000 taken by nghttp2.
        let connections = summary["connections"] as! [String: Any]
        #expect(connections["responsesSubmitted"] as? Int == 20000 && connections["answersDropped"] as? Int == 0)
        #expect(requests["wireIdentityHolds"] as? Bool == true)
        let findings = summary["findings"] as! [String: [String: Any]]
        #expect(findings["staleTimestamp"]?["count"] as? Int == 19_999)
    }

    @Test("two event loops: pushes to every token reach the loop owning the device; counts add up across loops")
    func twoLoops() throws {
        let serve = try ServeProcess(["--h2c", "--workers", "2"])
        let population = try serve.population()
        let scores = population.filter { ($0["app"] as! String) == "com.example.scores" }
        let uris = serve.directory.appendingPathComponent("uris.txt")
        try scores.map { "http://127.0.0.1:\(serve.port)/3/device/\($0["token"] as! String)\n" }.joined()
            .write(to: uris, atomically: true, encoding: .utf8)
        let body = serve.directory.appendingPathComponent("payload.json")
        try livePayload(timestamp: Int(Date().timeIntervalSince1970)).write(to: body, atomically: true, encoding: .utf8)
        let n = scores.count * 3
        let result = try Tool.run(
            "h2load",
            [
                // h2load's clients each walk the URI list from the start: 3 clients × every token once.
                "-n", String(n), "-c", "3", "-m", "32", "-d", body.path, "-H", "apns-push-type: liveactivity",
                "-H", "apns-topic: com.example.scores.push-type.liveactivity", "-i", uris.path,
            ])
        #expect(result.stdout.contains("\(n) succeeded"), "\(result.stdout)")
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let summary = try serve.summary()
        #expect(summary["workers"] as? Int == 2)
        let requests = summary["requests"] as! [String: Any]
        #expect(requests["total"] as? Int == n && requests["identitiesHold"] as? Bool == true)
        #expect(requests["wireIdentityHolds"] as? Bool == true)
        let accounting = summary["accounting"] as! [String: Any]
        let outcomes = accounting["outcomes"] as! [String: Int]
        // Every token three times: the first push applies on the device's own loop, the other two are duplicates.
        #expect(outcomes["applied"] == scores.count && outcomes["ignoredStaleTimestamp"] == 2 * scores.count, "\(outcomes)")
        #expect(accounting["identitiesHold"] as? Bool == true)
        #expect((summary["connections"] as! [String: Any])["accepted"] as? Int == 3)
        // The two loops' dumps merged: every activity once, sorted, one totals line.
        let state = try String(contentsOf: serve.folder.appendingPathComponent("state.jsonl"), encoding: .utf8)
        let lines = state.split(separator: "\n")
        let activities = lines.filter { $0.hasPrefix("{\"activity\"") }
        #expect(activities.count == population.count)
        #expect(activities == activities.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        #expect(lines.last?.hasPrefix("{\"totals\"") == true && lines.filter { $0.hasPrefix("{\"totals\"") }.count == 1)
        // latency.hlog, read by HdrHistogram's Python reader: every sample of every metric, once.
        let script = [
            "import sys", "from hdrh.log import HistogramLogReader", "from hdrh.histogram import HdrHistogram",
            "reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600 * 10**9, 3))", "total = 0",
            "while True:", "    h = reader.get_next_interval_histogram()", "    if h is None:", "        break",
            "    total += h.get_total_count()", "print(total)",
        ].joined(separator: "\n")
        let read = try Tool.run("python3", ["-c", script, serve.folder.appendingPathComponent("latency.hlog").path])
        let latency = summary["latency"] as! [String: [String: Any]]
        let expected = ["service", "delivery", "fanout", "validate", "route"].reduce(0) {
            $0 + (latency[$1]?["count"] as? Int ?? -1)
        }
        #expect(Int(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == expected, "\(read.stderr)")
    }
}
