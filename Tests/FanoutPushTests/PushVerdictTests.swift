import FanoutMetrics
import FanoutPush
import FanoutReport
import Foundation
import Testing

/// Push's verdict fails closed and names the side at fault: a request the server reset is in `latency` (not in
/// `answeredLatency`); `fanout merge` takes each shard's own verdict, ORs them and names the saturated shards; shards
/// of another `--start-at` or `--epoch` are refused; each second k is t0 + k s in every shard.
@Suite("Push verdicts: failures in latency, shards' verdicts merged, seconds aligned")
struct PushVerdictTests {
    @Test("every other push reset by the server: in latency at its end, not in answeredLatency; counts add up")
    func resetIsInLatency() throws {
        let server = try HostileServer("reset")
        var scenario = PushRunTests.oneSource()
        scenario.population.devices = 10
        scenario.durationSeconds = 2
        var options = PushOptions(target: PushTarget(tls: false, host: "127.0.0.1", port: server.port))
        options.drainSeconds = 20
        let r = try PushRun(scenario: scenario, options: options, nowSeconds: 1_800_000_000).run()
        let resets = r.failures["reset (8)"] ?? 0
        #expect(resets > 0 && r.answered > 0 && r.identityHolds, "\(r.failures) \(r.byStatus)")
        // Every request sent ends in latency once: the answered ones and the reset ones (fail closed).
        #expect(r.latency.totalCount == UInt64(r.sent))
        #expect(r.answeredLatency.totalCount == UInt64(r.answered))
        #expect(r.latency.totalCount - r.answeredLatency.totalCount == UInt64(r.failed + r.unansweredAtEnd))
        let md = try #require(try PushReport.files(r, gitRevision: nil)["summary.md"])
        #expect(md.contains("| answeredLatency | \(r.answered) |") && md.contains("| latency | \(r.sent) |"))
    }

    /// Shard `k` of `n` as a folder holds it: `samples` requests, `late` of them handed over `lateNanos` after their
    /// intended time, every histogram also in one interval per second from `firstSecond` (at t0 + k s + `jitter`).
    static func shard(
        _ k: Int, of n: Int, samples: Int, late: Int = 0, lateNanos: UInt64 = 0, firstSecond: Int = 0,
        jitter: Double = 0, startAt: Double? = 1_800_000_000, epoch: Int64? = nil
    ) -> PushResults {
        var r = PushMergeTests.shard(k, of: n, latencies: [])
        r.intervals = []
        r.maxScheduleLagNanos = 10_000_000
        r.requestedStartSeconds = startAt
        r.epochSeconds = epoch
        r.sent = samples
        r.submitted = samples
        r.byStatus = [200: samples]
        r.byReason = [:]
        r.failures = [:]
        r.events = samples
        r.tokenPushes = samples
        for i in 0..<samples {
            let second = firstSecond + i % 2
            var hs: [String: LatencyHistogram] = [:]
            for tag in PushIntervalSpool.tags { hs[tag] = LatencyHistogram() }
            hs["latency"]!.record(1_000_000)
            hs["answeredLatency"]!.record(1_000_000)
            hs["scheduleLag"]!.record(i < late ? lateNanos : 10_000)
            hs["dispatchLag"]!.record(i < late ? lateNanos : 10_000)
            hs["streamWait"]!.record(1_000)
            for tag in PushIntervalSpool.tags {
                let h = hs[tag]!
                r.intervals.append(PushInterval(
                    tag: tag, startSeconds: Double(second) + jitter, lengthSeconds: 1,
                    compressed: h.encodedCompressed(), maxValue: h.max))
            }
            r.latency.add(hs["latency"]!)
            r.answeredLatency.add(hs["answeredLatency"]!)
            r.scheduleLag.add(hs["scheduleLag"]!)
            r.dispatchLag.add(hs["dispatchLag"]!)
            r.streamWait.add(hs["streamWait"]!)
        }
        return r
    }

    /// `r` written as a folder and read back (PushFolder.read, as `fanout merge` reads it).
    static func roundTrip(_ r: PushResults) throws -> PushResults {
        let folder = NSTemporaryDirectory() + "push-verdict-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try PushReport.write(folder: folder, r, gitRevision: nil)
        return try PushFolder.read(folder)
    }

    @Test("4 shards, one saturated (its own verdict): the merged folder is saturated and names it, exit 3")
    func mergedSaturation() throws {
        // Shard 2's 2 requests, one of them 50 ms late: its dispatchLag p99 is above the 10 ms bound. Among the
        // 302 of the four, that one is below the merged p99: judged again from the merged histogram, the run would
        // pass.
        let written = [
            Self.shard(0, of: 4, samples: 100), Self.shard(1, of: 4, samples: 100),
            Self.shard(2, of: 4, samples: 2, late: 1, lateNanos: 50_000_000), Self.shard(3, of: 4, samples: 100),
        ]
        #expect(written.map(\.saturated) == [false, false, true, false])
        let parts = try written.enumerated().map { ("shard-\($0.offset)", try Self.roundTrip($0.element)) }
        #expect(parts.map(\.1.saturated) == [false, false, true, false], "each shard's own verdict, read back")
        let m = try PushMerge.merge(parts.map { (folder: $0.0, results: $0.1) })
        #expect(m.dispatchLag.valueAtPercentile(99) <= m.maxScheduleLagNanos, "the merged histogram alone passes")
        #expect(m.saturated && m.saturatedShards == ["2/4"] && !m.serverLimited)
        #expect(PushGate([try PushThreshold(parsing: "latency.p99=1s")], m).exitCode(m) == PushReport.saturatedExitCode)
        let files = try PushReport.files(m, gitRevision: nil)
        #expect(files["summary.md"]!.contains("**Generator saturated**: shard 2/4 saturated"))
        #expect(files["summary.json"]!.contains("\"saturatedShards\" : [\n      \"2\\/4\""))
        #expect(files["summary.json"]!.contains("\"verdict\" : \"saturated\""))
    }

    @Test("a shard saturated by its busy loop: its summary's verdict, not its histograms, makes the merge saturated")
    func mergedRecordedVerdict() throws {
        // Held up (a request queued at the end) while its loop was busy: saturated by its own measure, which its
        // histograms alone do not show (the busy share is not in latency.hlog).
        var busy = Self.shard(1, of: 2, samples: 10)
        busy.queuedAtEnd = 1
        busy.unansweredAtEnd = 1
        busy.byStatus = [200: 9]
        busy.loopBusyShare = 0.97
        #expect(busy.saturated && !busy.serverLimited)
        let parts = [("a", try Self.roundTrip(Self.shard(0, of: 2, samples: 10))), ("b", try Self.roundTrip(busy))]
        let m = try PushMerge.merge(parts.map { (folder: $0.0, results: $0.1) })
        #expect(m.saturated && m.saturatedShards == ["1/2"] && !m.serverLimited)
    }

    @Test("a server-limited shard makes the merged folder server-limited (judged), not saturated")
    func mergedServerLimited() throws {
        var limited = Self.shard(1, of: 2, samples: 10)
        limited.queuedAtEnd = 1
        limited.unansweredAtEnd = 1
        limited.byStatus = [200: 9]
        let parts = [("a", try Self.roundTrip(Self.shard(0, of: 2, samples: 10))), ("b", try Self.roundTrip(limited))]
        let m = try PushMerge.merge(parts.map { (folder: $0.0, results: $0.1) })
        #expect(!m.saturated && m.serverLimited && m.serverLimitedShards == ["1/2"])
        #expect(PushGate([try PushThreshold(parsing: "latency.p99=1s")], m).exitCode(m) == 0)
    }

    @Test("shards of another --start-at or --epoch: refused, saying which")
    func mismatchedStart() throws {
        func refusal(_ a: PushResults, _ b: PushResults) -> ReportReadError? {
            do {
                _ = try PushMerge.merge([(folder: "a", results: a), (folder: "b", results: b)])
                return nil
            } catch {
                return error
            }
        }
        let a = Self.shard(0, of: 2, samples: 4)
        #expect(refusal(a, Self.shard(1, of: 2, samples: 4)) == nil)
        let later = try #require(refusal(a, Self.shard(1, of: 2, samples: 4, startAt: 1_800_000_001)))
        #expect(later.refusal == .notOneRun && "\(later)".contains("--start-at"), "\(later)")
        let none = try #require(refusal(a, Self.shard(1, of: 2, samples: 4, startAt: nil)))
        #expect(none.refusal == .notOneRun && "\(none)".contains("--start-at"), "\(none)")
        let epoch = try #require(refusal(a, Self.shard(1, of: 2, samples: 4, epoch: 1_700_000_000)))
        #expect(epoch.refusal == .notOneRun && "\(epoch)".contains("--epoch"), "\(epoch)")
        // Read back from a folder: the epoch is in summary.json.
        let read = try Self.roundTrip(Self.shard(1, of: 2, samples: 4, epoch: 1_700_000_000))
        #expect(read.epochSeconds == 1_700_000_000 && read.requestedStartSeconds == 1_800_000_000)
    }

    @Test("second k of every shard is t0 + k s: a shard with nothing in second 0 adds into second 1, not 0")
    func alignedSeconds() throws {
        let a = Self.shard(0, of: 2, samples: 4)  // seconds 0 and 1, 2 requests each
        let b = Self.shard(1, of: 2, samples: 2, firstSecond: 1, jitter: 0.004)  // seconds 1 and 2, a loop turn late
        let m = try PushMerge.merge([(folder: "a", results: a), (folder: "b", results: b)])
        let latency = m.intervals.filter { $0.tag == "latency" }
        #expect(latency.map(\.startSeconds) == [0, 1, 2])
        #expect(try latency.map { try LatencyHistogram(decoding: $0.compressed).totalCount } == [2, 3, 1])
        #expect(m.intervals.filter { $0.tag == "dispatchLag" }.count == 3)
    }
}
