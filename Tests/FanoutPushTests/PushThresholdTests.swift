import FanoutMetrics
import FanoutPush
import FanoutReport
import Testing

/// `fanout push --threshold`: what parses, what each judges on results made here, and the exit status's order.
@Suite("PushThreshold: absolute objectives of a push run")
struct PushThresholdTests {
    static func results(latencies: [UInt64] = [1_000_000, 2_000_000, 40_000_000]) -> PushResults {
        var r = PushResults()
        r.maxScheduleLagNanos = 10_000_000
        for v in latencies {
            r.latency.record(v)
            r.answeredLatency.record(v)
            r.scheduleLag.record(v / 100)
            r.dispatchLag.record(v / 200)
            r.streamWait.record(v / 200)
        }
        r.sent = 200
        r.byStatus = [200: 190, 400: 6, 500: 1]
        r.byReason = ["BadRequestPayload": 6, "InternalServerError": 1]
        r.failures = ["reset": 2]
        r.unansweredAtEnd = 1
        return r
    }

    static func judge(_ text: String, _ r: PushResults = results()) throws -> PushThresholdResult {
        try PushThreshold(parsing: text).judge(r)
    }

    @Test("durations: a percentile at most that long, in ns, us, µs, ms or s")
    func durations() throws {
        // HdrHistogram's values (3 significant digits): 2 ms is recorded as 2.001 ms.
        #expect(try Self.judge("latency.p50=2.01ms").met)
        #expect(try !Self.judge("latency.p50=1.99ms").met)
        #expect(try Self.judge("latency.max=40.1ms").met && !(try Self.judge("latency.max=39ms").met))
        #expect(try Self.judge("scheduleLag.p99=401us").met && !(try Self.judge("scheduleLag.p99=399µs").met))
        let limit = try Self.judge("latency.p99.9=1.5s")
        #expect(limit.limit == "≤ 1.50 s" && limit.met && limit.measured == "40.0 ms")
        #expect(try !Self.judge("latency.p99=1s", PushResults()).met, "no values meet nothing")
    }

    @Test("counts: at most N, or N% of the requests sent")
    func counts() throws {
        #expect(try !Self.judge("failures=0").met && (try Self.judge("failures=2").met))
        #expect(try Self.judge("failures.reset=2").met && (try Self.judge("failures.GOAWAY=0").met))
        #expect(try !Self.judge("unanswered=0").met)
        #expect(try Self.judge("non200=7").met && !(try Self.judge("non200=6").met))
        #expect(try Self.judge("non200=3.5%").met && !(try Self.judge("non200=3%").met), "7 of 200 sent")
        #expect(try !Self.judge("status.500=0").met && (try Self.judge("status.429=0").met))
        #expect(try !Self.judge("reason.InternalServerError=0").met)
        #expect(try Self.judge("reason.BadRequestPayload=6").measured == "6")
    }

    @Test("what does not parse is refused with the reason")
    func refused() {
        for text in [
            "latency.p99", "latency.p99=50", "latency.p98=5ms", "endToEnd.p99=5ms", "failures=-1", "failures=x",
            "status.abc=0", "non200=101%", "=5ms", "latency.p99=+10%",
        ] {
            #expect(throws: ComparisonError.self, "\(text)") { try PushThreshold(parsing: text) }
        }
    }

    /// A server-limited run is judged.
    @Test("exit status: saturation wins over a broken threshold (never judged); broken 2; met 0; interrupted 130")
    func exitCodes() throws {
        let broken = [try PushThreshold(parsing: "latency.p50=1ns")]
        let met = [try PushThreshold(parsing: "latency.p99=1s"), try PushThreshold(parsing: "failures=5")]
        let r = Self.results()
        #expect(PushGate(met, r).exitCode(r) == 0 && PushGate(met, r).broken.isEmpty)
        #expect(PushGate(broken, r).exitCode(r) == 2 && PushGate(broken, r).broken.count == 1)
        #expect(PushGate([], r).exitCode(r) == 0)
        var saturated = r
        saturated.maxScheduleLagNanos = 1
        #expect(saturated.saturated)
        let gate = PushGate(broken, saturated)
        #expect(gate.exitCode(saturated) == 3 && gate.broken.isEmpty && gate.notJudged != nil)
        // The server's back-pressure (streamWait above the bound, requests queued for a stream at the end) is not the
        // generator's: server-limited, and judged.
        var queued = r
        queued.queuedAtEnd = 1
        #expect(!queued.saturated && queued.serverLimited)
        #expect(PushGate(met, queued).exitCode(queued) == 0 && PushGate(met, queued).notJudged == nil)
        #expect(PushGate(broken, queued).exitCode(queued) == 2)
        var waited = r
        waited.streamWait.record(2_000_000_000)
        waited.streamWait.record(2_000_000_000)
        #expect(waited.streamWait.valueAtPercentile(99) > waited.maxScheduleLagNanos)
        #expect(!waited.saturated && waited.serverLimited && PushGate(broken, waited).exitCode(waited) == 2)
        // Held up while the generator's loop never waited: its own slowness (it read answers and wrote requests
        // late), saturated.
        var busy = queued
        busy.loopBusyShare = 0.97
        #expect(busy.saturated && !busy.serverLimited && PushGate(met, busy).exitCode(busy) == 3)
        busy.loopBusyShare = 0.2
        #expect(!busy.saturated && busy.serverLimited)
        var late = waited
        late.dispatchLag.record(2_000_000_000)
        late.dispatchLag.record(2_000_000_000)
        #expect(late.saturated && PushGate(broken, late).exitCode(late) == 3)
        var interrupted = queued
        interrupted.interrupted = true
        #expect(PushGate(broken, interrupted).exitCode(interrupted) == 130)
        var lost = r
        lost.connectionsLost = true
        #expect(PushGate(broken, lost).exitCode(lost) == 1)
    }
}
