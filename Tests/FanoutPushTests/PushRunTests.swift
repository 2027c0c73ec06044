import FanoutPush
import FanoutReport
import FanoutSim
import Foundation
import Testing

/// Python h2 (Tests/FanoutCLITests/Resources/h2_hostile.py, nobody here wrote its HTTP/2 side) in `mode`.
final class HostileServer {
    let process = Process()
    let port: Int

    init(_ mode: String) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FanoutCLITests/Resources/h2_hostile.py").path
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, mode]
        process.standardOutput = output
        try process.run()
        port = Int(String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

@Suite("PushRun: open loop, coordinated omission accounted for")
struct PushRunTests {
    /// One token source that every activity follows: each event is a burst of pushes due at the same instant.
    static func oneSource() -> Scenario {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 40
        s.sources.count = 1
        s.sources.broadcastShare = 0
        s.arrival.phases[0].ratePerSecond = 1
        s.arrival.bursts = []
        s.faults.malformedShare = 0
        s.faults.oversizedShare = 0
        s.lifecycle.endFractionMin = nil
        s.lifecycle.endFractionMax = nil
        s.durationSeconds = 3
        return s
    }

    /// The server held the schedule up (server-limited), not the generator (not saturated): thresholds judged.
    @Test("one stream, 5 ms per answer: the k-th push waits k × 5 ms; server-limited, not saturated, judged")
    func waitsCount() throws {
        let server = try HostileServer("slow")
        var scenario = Self.oneSource()
        scenario.population.devices = 80
        var options = PushOptions(target: PushTarget(tls: false, host: "127.0.0.1", port: server.port))
        options.drainSeconds = 20
        // ~1,450 pushes behind one stream at 5 ms an answer take the server 7 s or more: on a loaded machine the
        // script's answers come slower and the last of them waited past the default 10 s request timeout (20 of
        // 1,448 under ThreadSanitizer with a build beside it). Every push must be answered; how long the server
        // holds them is what the test measures, so the timeout is set above what the drain allows.
        options.requestTimeoutSeconds = 60
        // A bound well above a loaded machine's loop stalls (the generator's own lateness) and well below the
        // server's waits (a burst of 80 behind one stream: the last waits ~400 ms).
        // The generator's own lateness bound far above what a sanitizer's build makes of it (its dispatchLag p99 was
        // 159 ms under ThreadSanitizer): the test is about who held the schedule up, not how fast the build is.
        options.maxScheduleLagNanos = 2_000_000_000
        let push = try PushRun(scenario: scenario, options: options, nowSeconds: 1_800_000_000)
        let burst = push.followers(of: 0)
        #expect(burst >= 40)
        let r = try push.run()
        #expect(r.events >= 1)
        #expect(r.tokenPushes == r.events * burst && r.broadcasts == 0)
        #expect(r.byStatus == [200: r.sent] && r.identityHolds, "by status \(r.byStatus), failures \(r.failures)")
        // Measured from the answer's submission, each would be about 5 ms. From the intended time, the last of a
        // burst waited for the burst − 1 before it.
        let floor = UInt64(Double(burst - 1) * 5e6 * 0.9)
        #expect(r.latency.max >= floor, "latency max \(r.latency.max) below \(floor)")
        #expect(r.scheduleLag.max >= UInt64(Double(burst - 2) * 5e6 * 0.9))
        #expect(r.latency.valueAtPercentile(50) > 20_000_000)
        // The wait is the server's: handed to the connection at once, then queued for its one stream.
        #expect(r.dispatchLag.totalCount == UInt64(r.sent) && r.streamWait.totalCount == UInt64(r.sent))
        #expect(r.streamWait.max >= UInt64(Double(burst - 2) * 5e6 * 0.9))
        #expect(!r.saturated, "dispatchLag p99 \(r.dispatchLag.valueAtPercentile(99)) ns: the generator kept up")
        #expect(r.serverLimited, "the schedule could not be held because of the server: the summary must say so")
        let gates = [try PushThreshold(parsing: "latency.p99=5ms"), try PushThreshold(parsing: "latency.p99=60s")]
        let judged = PushGate(gates, r)
        #expect(judged.notJudged == nil && judged.exitCode(r) == 2)
        #expect(judged.broken.map(\.threshold) == ["latency.p99=5ms"])
        let summary = try #require(try PushReport.files(r, gitRevision: nil)["summary.md"])
        #expect(summary.contains("**Server-limited**") && !summary.contains("Generator saturated"))
    }

    @Test("GOAWAY after 5 answers per connection: a new connection takes over, every push is answered")
    func reconnects() throws {
        let server = try HostileServer("goaway")
        var options = PushOptions(target: PushTarget(tls: false, host: "127.0.0.1", port: server.port))
        options.drainSeconds = 30  // a bound, not a wait: the run ends once every push is answered
        options.maxStreamsPerConnection = 4
        var scenario = Self.oneSource()
        scenario.population.devices = 10
        let push = try PushRun(scenario: scenario, options: options, nowSeconds: 1_800_000_000)
        let r = try push.run()
        // Each connection answers 5, then its GOAWAY refuses the rest: they are sent again on the next connection,
        // so every push is answered in the end, 5 per connection.
        #expect(r.reconnects >= 2 && !r.connectionsLost)
        #expect(r.byStatus == [200: r.sent] && r.failed == 0 && r.identityHolds)
        #expect(r.sent == r.tokenPushes && r.sent > 10)
        #expect(r.reconnects + 1 == (r.sent + 4) / 5, "5 answers per connection")
        #expect(r.retries > 0)
        #expect(r.connectionEnds.keys.contains { $0.contains("GOAWAY") })
        // Each replacement was opened when its predecessor's GOAWAY arrived (it drained), not when it closed.
        #expect(r.connectionsDrained == r.reconnects, "\(r.connectionsDrained) drained, \(r.reconnects) reconnects")
        #expect(r.drainedForStreamIds == 0, "a GOAWAY's drain is not the stream ids'")

        // With one reconnect allowed, the second GOAWAY leaves no connection: the run stops there, and says so.
        options.maxReconnects = 1
        let short = try PushRun(scenario: scenario, options: options, nowSeconds: 1_800_000_000).run()
        #expect(short.connectionsLost && short.reconnects == 1)
        #expect(short.byStatus == [200: 10] && short.identityHolds)
        #expect(short.failures["no connection"] ?? 0 == short.sent - 10, "\(short.failures)")
    }

    /// A server that allows no stream at all (SETTINGS_MAX_CONCURRENT_STREAMS 0) must not hang the run: every push
    /// waits in the queue, the run ends at its drain bound, and the summary says the generator could not send.
    /// Every request is in latency, censored at the end; the server is at fault (server-limited), not the generator.
    @Test("SETTINGS_MAX_CONCURRENT_STREAMS 0: nothing sent, nothing hangs; queued to the end, server-limited")
    func zeroStreams() throws {
        let server = try HostileServer("zero")
        var options = PushOptions(target: PushTarget(tls: false, host: "127.0.0.1", port: server.port))
        options.drainSeconds = 1
        options.maxScheduleLagNanos = 2_000_000_000  // a sanitizer's slow build is not the generator saturating
        var scenario = Self.oneSource()
        scenario.population.devices = 10
        scenario.durationSeconds = 2
        let r = try PushRun(scenario: scenario, options: options, nowSeconds: 1_800_000_000).run()
        #expect(r.tokenPushes > 0 && r.byStatus.isEmpty, "\(r.byStatus)")
        // Not one stream opened: had the client opened one, the server would end the connection (its h2 refuses a
        // stream beyond the limit) and the pushes would fail, not wait.
        #expect(
            r.failed == 0 && r.connectionEnds == ["closed at the end of the run": 1],
            "\(r.failures) \(r.connectionEnds)")
        #expect(r.unansweredAtEnd == r.sent && r.peakQueued == r.sent, "\(r.unansweredAtEnd) of \(r.sent)")
        #expect(!r.saturated && r.serverLimited && r.identityHolds)
        // Unanswered, yet in latency (at the run's end: censored), not in the answered-only histogram.
        #expect(r.latency.totalCount == UInt64(r.sent) && r.answeredLatency.totalCount == 0)
        #expect(r.streamWait.totalCount == UInt64(r.sent))
    }
}
