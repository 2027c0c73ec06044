import FanoutMetrics
import FanoutPush
import FanoutReport
import Foundation
import Testing

/// latency.hlog's intervals of a push run go to disk each second (a run's memory must not grow with its length), and
/// the folder written from the spool is the folder written from the same intervals in memory, byte for byte.
@Suite("PushIntervalSpool: a run's intervals on disk, not in memory")
struct PushIntervalsTests {
    @Test("every second of a real run spools its five intervals and holds none; the folder's log adds up to the totals")
    func spooledNotHeld() throws {
        let server = try HostileServer("apns")  // Python h2: 200 to every push
        var scenario = PushRunTests.oneSource()
        scenario.durationSeconds = 4
        var options = PushOptions(target: PushTarget(tls: false, host: "127.0.0.1", port: server.port))
        options.drainSeconds = 20
        let push = try PushRun(scenario: scenario, options: options, nowSeconds: 1_800_000_000)
        var seen: [(seconds: Int, held: Int, spooled: Int)] = []
        let r = try push.run { p in seen.append((p.seconds, push.intervalsHeld, push.intervalsSpooled)) }
        #expect(r.byStatus == [200: r.sent] && r.sent > 0 && r.identityHolds)
        #expect(seen.count >= 4, "a progress line per second")
        for s in seen.dropLast() {  // the last (final) second spools only a histogram that has values
            #expect(s.held == 0 && s.spooled == 5 * s.seconds, "second \(s.seconds): \(s.held) held, \(s.spooled)")
        }
        #expect(r.intervals.isEmpty && push.intervalsHeld == 0)
        let spooled = try #require(r.spooled).count
        #expect(spooled >= 5 * (seen.count - 1) && spooled == push.intervalsSpooled)

        // The folder, its log written from the spool: PushFolder.read (the merge's reader) checks that the log's
        // intervals add up to summary.json's counts.
        let folder = NSTemporaryDirectory() + "push-intervals-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try PushReport.write(folder: folder, r, gitRevision: nil)
        let read = try PushFolder.read(folder)
        #expect(read.intervals.count == spooled)
        #expect(read.latency.totalCount == r.latency.totalCount && read.latency.totalCount == UInt64(r.answered))
        #expect(read.scheduleLag.totalCount == r.scheduleLag.totalCount)
        // Every request in latency, dispatchLag and streamWait; the answered ones in answeredLatency.
        #expect(read.answeredLatency.totalCount == UInt64(r.answered) && read.dispatchLag.totalCount == UInt64(r.sent))
        #expect(read.streamWait.totalCount == UInt64(r.sent))
        // Each second k starts at t0 + k s.
        #expect(read.intervals.allSatisfy { $0.startSeconds == $0.startSeconds.rounded() })
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == [
            "answered-latency.hgrm", "dispatch-lag.hgrm", "latency.hgrm", "latency.hlog", "report.html",
            "schedule-lag.hgrm", "stream-wait.hgrm", "summary.json", "summary.md",
        ])
    }

    @Test("the same intervals spooled or held in memory: every file byte for byte, written whole or a piece at a time")
    func sameBytes() throws {
        let held = PushReportHTMLTests.results()
        var spooled = held
        spooled.intervals = []
        let spool = try PushIntervalSpool()
        for (k, i) in held.intervals.enumerated() {
            try spool.append(
                tag: PushIntervalSpool.tags.firstIndex(of: i.tag)!, index: k / 2,
                startNanos: UInt64(i.startSeconds * 1e9),
                lengthNanos: UInt64(i.lengthSeconds * 1e9), histogram: try LatencyHistogram(decoding: i.compressed))
        }
        spooled.spooled = spool
        #expect(spool.count == held.intervals.count && held.intervals.count == 12)
        let gates = try PushReportHTMLTests.thresholds(["latency.p99=20ms"])
        let expected = try PushReport.files(held, gitRevision: "0123456789ab", thresholds: gates)
        let fromSpool = try PushReport.files(spooled, gitRevision: "0123456789ab", thresholds: gates)
        #expect(fromSpool.keys.sorted() == expected.keys.sorted())
        for (name, text) in expected { #expect(fromSpool[name] == text, "\(name) differs") }
        #expect(expected["latency.hlog"]!.split(separator: "\n").filter { $0.hasPrefix("Tag=") }.count == 12)

        let folder = NSTemporaryDirectory() + "push-intervals-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try PushReport.write(folder: folder, spooled, gitRevision: "0123456789ab", thresholds: gates)
        for (name, text) in expected {
            let written = try String(contentsOfFile: folder + "/" + name, encoding: .utf8)
            #expect(written == text, "\(name) as written differs")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(names.count == expected.count, "no temporary left: \(names)")
    }
}
