import FanoutMetrics
@testable import FanoutPush
import FanoutReport
import FanoutSim
import Foundation
import FanoutWire
import Testing

/// `PushRun` against servers that fail (Python h2, Tests/FanoutCLITests/Resources/h2_hostile.py, on 127.0.0.1): the
/// request deadline, the queue bound, the stream ids' end, REFUSED_STREAM, a server restart. Counts and order only;
/// the drain bounds are hang guards, not waits.
@Suite("PushRun: deadlines, bounded queues, stream ids, reconnects")
struct PushConnectionTests {
    static func options(_ server: HostileServer) -> PushOptions {
        var options = PushOptions(target: PushTarget(tls: false, host: "127.0.0.1", port: server.port))
        options.drainSeconds = 60  // a bound, not a wait: the run ends once every push ended
        options.maxScheduleLagNanos = 10_000_000_000
        return options
    }

    static func scenario(devices: Int = 10, seconds: Double = 2) -> Scenario {
        var s = PushRunTests.oneSource()
        s.population.devices = devices
        s.durationSeconds = seconds
        return s
    }

    @Test("a server's strings never become keys without bound: byReason's APNs reasons or other, reset codes capped")
    func keysCapped() {
        #expect(PushRun.reasonKey(Array(#"{"reason":"BadDeviceToken"}"#.utf8)) == "BadDeviceToken")
        #expect(PushRun.reasonKey(Array(#"{"reason":"x-1234"}"#.utf8)) == "other")
        #expect(PushRun.reasonKey(Array("<html>".utf8)) == "unparsed body")
        #expect(PushRun.failureKey(.reset(7)) == "reset (7)" && PushRun.failureKey(.reset(13)) == "reset (13)")
        #expect(PushRun.failureKey(.reset(14)) == "reset (other)")
        #expect(PushRun.failureKey(.reset(.max)) == "reset (other)")
        #expect(PushRun.failureKey(.queueFull) == PushResults.droppedQueueFullKey)
    }

    @Test("a server that never answers: every request fails as timeout, reset, censored in latency, the run ends")
    func requestTimeout() throws {
        let server = try HostileServer("silent")
        var options = Self.options(server)
        options.requestTimeoutSeconds = 0.3
        let r = try PushRun(scenario: Self.scenario(), options: options, nowSeconds: 1_800_000_000).run()
        #expect(r.sent > 0 && r.identityHolds)
        #expect(r.failures == ["timeout": r.sent], "\(r.failures)")
        #expect(r.unansweredAtEnd == 0 && r.byStatus.isEmpty)
        // Every one in latency (at its deadline: censored), none in the answered-only histogram.
        #expect(r.latency.totalCount == UInt64(r.sent) && r.answeredLatency.totalCount == 0)
        #expect(r.latency.valueAtPercentile(1) >= 300_000_000, "none ended before its deadline")
    }

    @Test("no stream ever free: past --max-queued requests are dropped (queue full), counted, the run server-limited")
    func queueBound() throws {
        let server = try HostileServer("zero")
        var options = Self.options(server)
        options.maxQueued = 5
        options.drainSeconds = 0.5
        let r = try PushRun(scenario: Self.scenario(devices: 40), options: options, nowSeconds: 1_800_000_000).run()
        #expect(r.sent > 5 && r.identityHolds)
        #expect(r.failures == [PushResults.droppedQueueFullKey: r.sent - 5], "\(r.failures)")
        #expect(r.unansweredAtEnd == 5 && r.queuedAtEnd == 5 && r.peakQueued == 5)
        #expect(r.droppedQueueFull == r.sent - 5)
        #expect(r.serverLimited && !r.saturated)
        #expect(PushReport.serverLimitCause(r).contains("dropped (queue full)"), "\(PushReport.serverLimitCause(r))")
    }

    @Test("a connection started near the end of its stream ids drains, is replaced at once, and no request fails")
    func streamIdsDrain() throws {
        let server = try HostileServer("apns")
        var options = Self.options(server)
        // 10,000 requests' ids are the margin (H2ClientSettings.streamIdMargin): 6 more are sent before it drains.
        options.firstStreamId = Int32.max - 2 * 10_000 - 10
        let scenario = Self.scenario(devices: 20)
        let r = try PushRun(scenario: scenario, options: options, nowSeconds: 1_800_000_000).run()
        #expect(r.sent > 6 && r.identityHolds)
        #expect(r.failed == 0 && r.byStatus == [200: r.sent], "\(r.failures) \(r.byStatus)")
        #expect(r.connectionsDrained == 1 && r.reconnects == 1 && !r.connectionsLost)
        #expect(r.drainedForStreamIds == 1, "the drain is counted as the stream ids'")
        #expect(r.connectionEnds["stream ids used up (drained)"] == 1, "\(r.connectionEnds)")
    }

    @Test("RST_STREAM REFUSED_STREAM without GOAWAY: sent again (not processed), every push answered")
    func refusedRetried() throws {
        let server = try HostileServer("refuse")
        let r = try PushRun(scenario: Self.scenario(), options: Self.options(server), nowSeconds: 1_800_000_000).run()
        #expect(r.sent > 0 && r.identityHolds)
        #expect(r.failed == 0 && r.byStatus == [200: r.sent], "\(r.failures)")
        #expect(r.retries >= r.sent / 2, "\(r.retries) retries of \(r.sent)")
    }

    @Test("the server goes away for 1 s (connection closed, port refused): reconnected with backoff, the run completes")
    func serverRestart() throws {
        let server = try HostileServer("restart")
        var options = Self.options(server)
        options.reconnectBudgetSeconds = 60
        let r = try PushRun(scenario: Self.scenario(seconds: 4), options: options, nowSeconds: 1_800_000_000).run()
        #expect(r.identityHolds && !r.connectionsLost)
        #expect(r.reconnectBackoffs >= 1, "refused attempts were followed by a backoff")
        // Exponential from 50 ms: a handful of attempts in the gap, not one per loop turn.
        #expect(r.reconnects >= 2 && r.reconnects <= 40, "\(r.reconnects)")
        // The first connection's 5 answers, and what came after the gap; what was open at the loss failed.
        let answered = r.byStatus[200] ?? 0
        #expect(answered >= 5 && answered + (r.failures["connection ended"] ?? 0) == r.sent, "\(r.failures)")
        #expect(r.failures.keys.allSatisfy { $0 == "connection ended" }, "\(r.failures)")
    }

    @Test("reconnects have the connect deadline too: ones that never get SETTINGS end, back off, and the budget ends")
    func reconnectsConnectDeadline() throws {
        let server = try HostileServer("mute")
        var options = Self.options(server)
        options.connectTimeoutSeconds = 0.3
        options.reconnectBudgetSeconds = 2
        let r = try PushRun(scenario: Self.scenario(seconds: 30), options: options, nowSeconds: 1_800_000_000).run()
        #expect(r.identityHolds && r.connectionsLost)
        let deadlineEnds = r.connectionEnds.filter { $0.key.hasPrefix("no HTTP/2 connection within 0.3 s") }
        #expect(deadlineEnds.values.reduce(0, +) >= 1, "\(r.connectionEnds)")
        #expect(r.reconnectBackoffs >= 1 && r.events < 30)
    }

    @Test("a half-open connection (its PINGs never answered): closed as lost and replaced; what it held failed once")
    func halfOpen() throws {
        let server = try HostileServer("deaf")
        var options = Self.options(server)
        options.pingIntervalSeconds = 0.2
        options.reconnectBudgetSeconds = 60
        let r = try PushRun(scenario: Self.scenario(seconds: 1), options: options, nowSeconds: 1_800_000_000).run()
        #expect(r.identityHolds && !r.connectionsLost && r.sent > 0)
        let lost = r.connectionEnds.filter { $0.key.hasPrefix("no PING answer") }
        #expect(lost.values.reduce(0, +) >= 1 && r.reconnects >= 1, "\(r.connectionEnds)")
        // Sent on a connection that never answers: each failed once when its connection was closed.
        #expect(r.failures.keys.allSatisfy { $0 == "connection ended" } && r.failed == r.sent, "\(r.failures)")
    }

    @Test("a server that is gone for good: attempts back off, the budget runs out, every connection lost")
    func budgetSpent() throws {
        let server = try HostileServer("restart")
        var options = Self.options(server)
        options.reconnectBudgetSeconds = 0.3
        let r = try PushRun(scenario: Self.scenario(seconds: 30), options: options, nowSeconds: 1_800_000_000).run()
        #expect(r.identityHolds && r.connectionsLost)
        #expect(r.reconnects >= 1 && r.reconnects <= 20, "\(r.reconnects)")
        // What was open at the loss failed; nothing else did (the run stopped when the budget ran out).
        #expect(r.failures.keys.allSatisfy { $0 == "connection ended" || $0 == "no connection" }, "\(r.failures)")
        #expect(r.byStatus[200] == 5 && r.events < 30, "the first connection's 5 answers; stopped before the end")
    }
}
