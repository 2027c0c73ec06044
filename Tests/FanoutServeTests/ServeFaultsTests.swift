import FanoutCore
@testable import FanoutAPNs
@testable import FanoutServe
import FanoutMetrics
import FanoutSim
import FanoutWire
import Foundation
import Testing

/// `--faults` and `--latency` read from their flags, drawn from the seed, and served by the real server delegate in
/// the in-memory harness on its virtual clock: exact counts per seed, held answers, stalls, GOAWAY, the bounds.
@Suite("ServeFaults: APNs's bad days, seeded, in memory")
struct ServeFaultsTests {
    typealias M = InMemoryServeTests
    static let now = InMemoryServeTests.now
    static let ms: UInt64 = 1_000_000

    // MARK: Flags

    @Test("--latency: a fixed delay, or lognormal with mu = ln p50 and sigma = ln(p99/p50)/2.3263")
    func latencyFlag() throws {
        #expect(try ServeFaults.parseLatency("30ms") == .fixed(nanos: 30 * Self.ms))
        #expect(try ServeFaults.parseLatency("1.5s") == .fixed(nanos: 1_500 * Self.ms))
        #expect(try ServeFaults.parseLatency("250us") == .fixed(nanos: 250_000))
        #expect(try ServeFaults.parseLatency("0ms") == ServeFaults.Latency.none)
        guard case .lognormal(let mu, let sigma) = try ServeFaults.parseLatency("p50=20ms,p99=250ms") else {
            Issue.record("not lognormal")
            return
        }
        #expect(abs(mu - log(20e6)) < 1e-9)
        #expect(abs(sigma - log(250.0 / 20) / 2.3263) < 1e-9)
    }

    @Test(
        "bad --latency and --faults text is refused with what was expected",
        arguments: [
            ("latency", "30", "expected a duration"), ("latency", "30xs", "expected a duration"),
            ("latency", "p50=20ms", "give both"), ("latency", "p50=20ms,p99=10ms", "0 < p50 < p99"),
            ("latency", "p50=20ms,p90=30ms", "expected p50=DURATION"), ("latency", "2h", "expected a duration"),
            ("faults", "503=60%,429=50%", "over 100%"), ("faults", "503=1", "share from 0% to 100%"),
            ("faults", "503=101%", "share from 0% to 100%"), ("faults", "418=1%", "unknown kind"),
            ("faults", "503=1%,503=2%", "given twice"), ("faults", "stall-every=1s:2s", "FOR < EVERY"),
            ("faults", "stall-every=10s", "EVERY:FOR"), ("faults", "goaway-every=0s", "at least 1ms"),
            ("faults", "503", "KIND=VALUE"), ("faults", "503=0.00001%", "finer than"),
        ])
    func badFlags(flag: String, text: String, expected: String) {
        do {
            if flag == "latency" {
                _ = try ServeFaults.parseLatency(text)
            } else {
                var f = ServeFaults()
                try ServeFaults.parseFaults(text, into: &f)
            }
            Issue.record("--\(flag) \(text) was accepted")
        } catch {
            #expect(error.description.contains(expected), "\(error.description)")
            #expect(error.description.hasPrefix("--\(flag)"), "\(error.description)")
        }
    }

    @Test("--faults reads every kind: shares in parts per million, periods, and nothing else is active by default")
    func faultsFlag() throws {
        #expect(!ServeFaults().isActive, "the default injects nothing")
        var f = ServeFaults()
        let text = "503=1%,429=0.5%,500=0.1%,reset=0.0001%,goaway-every=30s,stall-every=10s:1s"
        try ServeFaults.parseFaults(text, into: &f)
        #expect(f.faultsText == text)
        #expect(f.serviceUnavailablePPM == 10_000 && f.tooManyRequestsPPM == 5_000)
        #expect(f.internalServerErrorPPM == 1_000 && f.resetPPM == 1)
        #expect(f.goAwayEveryNanos == 30_000 * Self.ms)
        #expect(f.stallEveryNanos == 10_000 * Self.ms && f.stallNanos == 1_000 * Self.ms)
        #expect(f.isActive && f.holdsAnswers)
        var all = ServeFaults()
        try ServeFaults.parseFaults("503=25%,429=25%,500=25%,reset=25%", into: &all)
        #expect(all.sharePPM == 1_000_000, "exactly 100% is allowed")
    }

    @Test("lognormal draws from a seed: median and 99th percentile as asked (±5%), the same for the same seed")
    func lognormalDraws() throws {
        var f = ServeFaults()
        f.latency = try ServeFaults.parseLatency("p50=20ms,p99=250ms")
        f.seed = 42
        let draws = (1...40_000).map { f.delayNanos(loop: 0, draw: UInt64($0)) }.sorted()
        let p50 = Double(draws[20_000]) / 1e6
        let p99 = Double(draws[39_600]) / 1e6
        #expect(abs(p50 - 20) / 20 < 0.05, "p50 \(p50) ms")
        #expect(abs(p99 - 250) / 250 < 0.05, "p99 \(p99) ms")
        #expect(f.delayNanos(loop: 0, draw: 7) == f.delayNanos(loop: 0, draw: 7))
        #expect(f.delayNanos(loop: 0, draw: 7) != f.delayNanos(loop: 1, draw: 7), "each loop its own stream")
        f.latency = .fixed(nanos: 30 * Self.ms)
        #expect(f.delayNanos(loop: 3, draw: 9) == 30 * Self.ms)
    }

    @Test("stall windows: [k·EVERY, k·EVERY + FOR) for k ≥ 1, ending at the window's end")
    func stallWindows() throws {
        var f = ServeFaults()
        try ServeFaults.parseFaults("stall-every=10s:1s", into: &f)
        let s: UInt64 = 1_000 * Self.ms
        #expect(f.stallEnd(elapsedNanos: 500 * Self.ms) == nil, "not in the first period")
        #expect(f.stallEnd(elapsedNanos: 10 * s) == 11 * s)
        #expect(f.stallEnd(elapsedNanos: 10 * s + 999 * Self.ms) == 11 * s)
        #expect(f.stallEnd(elapsedNanos: 11 * s) == nil)
        #expect(f.stallEnd(elapsedNanos: 25 * s) == nil)
        #expect(f.stallEnd(elapsedNanos: 30 * s + 1) == 31 * s)
    }

    // MARK: In memory

    /// The preface with SETTINGS opening the client's windows wide (INITIAL_WINDOW_SIZE, the connection's window).
    static let preface: [UInt8] =
        Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        + M.frame(type: 4, flags: 0, stream: 0, [0, 4, 0x7F, 0xFF, 0xFF, 0xFF])
        + M.frame(type: 8, flags: 0, stream: 0, [0x7F, 0xFF, 0x00, 0x00])

    static func push(_ token: String, stream: UInt32, apnsId: String? = nil, body: [UInt8] = M.payload) -> [UInt8] {
        var block = M.literal(":method", Array("POST".utf8)) + M.literal(":path", Array("/3/device/\(token)".utf8))
        block += M.literal(":scheme", Array("https".utf8)) + M.literal(":authority", Array("localhost".utf8))
        block += M.literal("apns-push-type", Array("liveactivity".utf8))
        block += M.literal("apns-topic", Array("com.example.scores.push-type.liveactivity".utf8))
        if let apnsId { block += M.literal("apns-id", Array(apnsId.utf8)) }
        return M.frame(type: 1, flags: 0x4, stream: stream, block) + M.frame(type: 0, flags: 0x1, stream: stream, body)
    }

    static func rstStream(_ stream: UInt32) -> [UInt8] { M.frame(type: 3, flags: 0, stream: stream, [0, 0, 0, 8]) }

    /// The identity a token push's fault draw is keyed by (its token and its body's aps.timestamp).
    static func identity(_ token: String, _ body: [UInt8]) -> UInt64? {
        var tape = JSONTape()
        return ServeFaults.identity(
            RequestInput(method: "POST", path: "/3/device/\(token)", headers: [], body: body), tape: &tape)
    }

    struct Harness {
        var serve: InMemoryServe
        var server: APNsServer { serve.servers[0] }
        var token: String
        var output = M.Output()
        var connection: H2ServerConnection

        init(_ configure: (inout ServeOptions) throws -> Void) throws {
            var s = BuiltinScenarios.named("smoke")!
            s.population.devices = 40
            var options = ServeOptions()
            options.faults.seed = s.seed
            try configure(&options)
            let service = APNsService(scenario: s, auth: nil, nowSeconds: ServeFaultsTests.now) { 0 }
            serve = try InMemoryServe(services: [service], options: options, wallMillis: ServeFaultsTests.now * 1000)
            token = try M.token(of: service)
            let output = self.output
            connection = try serve.open(on: 0) { output.bytes.append(contentsOf: $0) }
            ServeFaultsTests.preface.withUnsafeBytes { connection.receive($0) }
        }

        func send(_ bytes: [UInt8]) { bytes.withUnsafeBytes { connection.receive($0) } }

        var frames: [M.Frame] { M.frames(output.bytes) }

        /// Whether stream `id` got its answer's HEADERS.
        func answered(_ id: UInt32) -> Bool { frames.contains { $0.type == 1 && $0.stream == id } }

        /// The wire identity of the loop, once every connection has ended.
        var wireIdentityHolds: Bool {
            server.connectionStats.answersAccountedFor(requests: server.service.stats.requests)
        }
    }

    /// What each of `count` pushes got, stream by stream: a reason (from the JSON body), "200", or "reset <code>".
    static func outcomes(seed: UInt64, count: Int) throws -> (seen: [String], expected: [String], h: Harness) {
        let h = try Harness {
            try ServeFaults.parseFaults("503=10%,429=5%,500=2%,reset=3%", into: &$0.faults)
            $0.faults.seed = seed
        }
        for k in 0..<count { h.send(Self.push(h.token, stream: UInt32(2 * k + 1))) }
        var bodies: [UInt32: [UInt8]] = [:]
        var seen: [UInt32: String] = [:]
        for f in h.frames {
            if f.type == 0 { bodies[f.stream, default: []] += f.payload }
            if f.type == 1 && f.payload.first == 0x88 { seen[f.stream] = "200" }
            if f.type == 3 { seen[f.stream] = "reset \(f.payload.reduce(UInt32(0)) { $0 << 8 | UInt32($1) })" }
        }
        for (stream, body) in bodies { seen[stream] = String(decoding: body, as: UTF8.self) }
        let faults = h.server.faults
        // Every push is the same (token, aps.timestamp): its n-th arrival draws attempt n − 1 of that identity.
        let key = try #require(Self.identity(h.token, M.payload))
        let expected = (1...count).map { n -> String in
            switch faults.fault(forDraw: faults.faultDraw(key: key, attempt: UInt64(n - 1))) {
            case nil: "200"
            case .reset: "reset 2"
            case .answer(let reason): #"{"reason":"\#(reason.rawValue)"}"#
            }
        }
        return ((0..<count).map { seen[UInt32(2 * $0 + 1)] ?? "nothing" }, expected, h)
    }

    @Test("fault shares with a fixed seed: each push gets exactly the fault its draw names, counted by kind")
    func exactCounts() throws {
        let count = 1_000
        let (seen, expected, h) = try Self.outcomes(seed: 7, count: count)
        defer { try? h.serve.close() }
        #expect(seen == expected)
        let n = { (text: String) in seen.filter { $0 == text }.count }
        let f = h.server.connectionStats.faults
        #expect(f[.serviceUnavailable] == n(#"{"reason":"ServiceUnavailable"}"#))
        #expect(f[.tooManyRequests] == n(#"{"reason":"TooManyRequests"}"#))
        #expect(f[.internalServerError] == n(#"{"reason":"InternalServerError"}"#))
        #expect(f[.reset] == n("reset 2"), "RST_STREAM INTERNAL_ERROR")
        // The shares, within a wide binomial band (the counts themselves are exact for the seed).
        #expect((60...140).contains(f[.serviceUnavailable]) && (25...75).contains(f[.tooManyRequests]), "\(f)")
        #expect((5...35).contains(f[.internalServerError]) && (10...50).contains(f[.reset]), "\(f)")
        let stats = h.server.service.stats
        #expect(stats.byReason[.serviceUnavailable] == f[.serviceUnavailable])
        #expect(stats.byStatus[503] == f[.serviceUnavailable] && stats.byStatus[429] == f[.tooManyRequests])
        #expect(stats.byStatus[500] == f[.internalServerError])
        #expect(stats.requests == count - f[.reset], "a reset push is not answered")
        #expect(stats.byStatus[200] == n("200"))
        #expect(h.server.service.pipeline.accounting.pushes == n("200"), "an injected failure reaches no device")
        h.connection.abort(reason: "done")
        #expect(h.wireIdentityHolds)
        #expect(h.serve.identitiesHold)
        let (again, _, h2) = try Self.outcomes(seed: 7, count: 200)
        defer { try? h2.serve.close() }
        #expect(again == Array(seen.prefix(200)), "the same seed, the same faults")
        let (other, _, h3) = try Self.outcomes(seed: 8, count: 200)
        defer { try? h3.serve.close() }
        #expect(other != again, "another seed, other faults")
    }

    @Test("two workers: the fault is drawn where the request arrives; an answer from the owner is held there too")
    func twoWorkers() throws {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 40
        var options = ServeOptions()
        options.faults.latency = .fixed(nanos: 50 * Self.ms)
        try ServeFaults.parseFaults("503=30%", into: &options.faults)
        let services = (0..<2).map { k in
            APNsService(scenario: s, auth: nil, nowSeconds: Self.now, worker: k, of: 2) { 0 }
        }
        let serve = try InMemoryServe(services: services, options: options, wallMillis: Self.now * 1000)
        defer { try? serve.close() }
        let token = try M.token(of: services[1])
        let output = M.Output()
        let connection = try serve.open(on: 0) { output.bytes.append(contentsOf: $0) }
        Self.preface.withUnsafeBytes { connection.receive($0) }
        let count = 40
        for k in 0..<count { Self.push(token, stream: UInt32(2 * k + 1)).withUnsafeBytes { connection.receive($0) } }
        serve.settle()
        let faults = serve.servers[0].faults
        let key = try #require(Self.identity(token, M.payload))
        let injected = (1...count).filter {
            faults.fault(forDraw: faults.faultDraw(key: key, attempt: UInt64($0 - 1))) != nil
        }.count
        #expect(serve.servers[0].connectionStats.faults[.serviceUnavailable] == injected)
        #expect(services[0].stats.requests == injected, "the 503s, answered where they arrived")
        #expect(services[1].stats.requests == count - injected, "the rest judged by the owner")
        #expect(serve.servers[0].held.count == count && serve.servers[1].held.count == 0, "held at arrival")
        #expect(!M.frames(output.bytes).contains { $0.type == 1 && $0.stream == 1 })
        serve.advance(toNanos: 50 * Self.ms)
        #expect(M.frames(output.bytes).filter { $0.type == 1 && $0.stream % 2 == 1 }.count == count)
        connection.abort(reason: "done")
        var stats = ConnectionStats()
        for server in serve.servers { stats += server.connectionStats }
        #expect(stats.answersAccountedFor(requests: services[0].stats.requests + services[1].stats.requests))
        #expect(serve.identitiesHold)
    }

    /// The shutdown race `ServeWorkers.run` accounts for: a worker whose connections are gone closes up at
    /// `.allDrained`, and the owner's answer to a request it forwarded before lands behind that in its inbox, never
    /// read. Found by the example-backend test under AddressSanitizer ("1719 answers produced, 1694 submitted + 0
    /// dropped"); the answers left in the inboxes are counted dropped once every worker has stopped.
    @Test("two workers shutting down: an owner's answer behind .allDrained is left in the inbox, counted dropped")
    func answerAfterCloseUp() throws {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 40
        let services = (0..<2).map { k in
            APNsService(scenario: s, auth: nil, nowSeconds: Self.now, worker: k, of: 2) { 0 }
        }
        let serve = try InMemoryServe(services: services, wallMillis: Self.now * 1000)
        let token = try M.token(of: services[1])
        let connection = try serve.open(on: 0) { _ in }
        Self.preface.withUnsafeBytes { connection.receive($0) }
        Self.push(token, stream: 1).withUnsafeBytes { connection.receive($0) }
        #expect(serve.forwardedWaiting == 1, "sent to the token's owner, worker 1, not judged yet")
        connection.abort(reason: "the client went away")
        serve.servers[0].beginShutdown()
        serve.servers[1].beginShutdown()  // both drained now: .allDrained sent to both
        serve.step(0)  // worker 0 reads .allDrained and closes up
        serve.step(1)  // worker 1 judges the forwarded request, answers worker 0, reads .allDrained
        serve.step(0)
        #expect(serve.judged == 1)
        var stats = ConnectionStats()
        for server in serve.servers { stats += server.connectionStats }
        #expect(stats[.responsesSubmitted] == 0 && stats[.answersDropped] == 0)
        #expect(!stats.answersAccountedFor(requests: serve.judged), "the answer is in worker 0's closed inbox")
        stats[.answersDropped] += serve.cluster!.answersLeftInInboxes()
        #expect(stats[.answersDropped] == 1 && stats.answersAccountedFor(requests: serve.judged))
        #expect(serve.cluster!.answersLeftInInboxes() == 0, "taken once")
        try serve.close()
    }

    @Test("lognormal delays: answers leave in due order, each when due, also after another connection's answers left")
    func dueOrder() throws {
        let h = try Harness { $0.faults.latency = try ServeFaults.parseLatency("p50=20ms,p99=250ms") }
        defer { try? h.serve.close() }
        let other = try h.serve.open(on: 0) { _ in }
        Self.preface.withUnsafeBytes { other.receive($0) }
        // One identity (token, aps.timestamp) on both connections: its attempts alternate, this one gets the even
        // ones, the other the odd ones; each attempt's delay is keyed by the identity and the attempt.
        let count = 100
        for k in 0..<count {
            h.send(Self.push(h.token, stream: UInt32(2 * k + 1)))
            Self.push(h.token, stream: UInt32(2 * k + 1)).withUnsafeBytes { other.receive($0) }
        }
        #expect(h.serve.heldAnswers == 2 * count)
        other.abort(reason: "gone")  // its answers leave the heap, which is rebuilt
        #expect(h.serve.heldAnswers == count)
        let faults = h.server.faults
        let key = try #require(Self.identity(h.token, M.payload))
        let delays = (0..<count).map { faults.delayNanos(key: ServeFaults.drawKey(key, attempt: UInt64(2 * $0))) }
        let expected = (0..<count).sorted { (delays[$0], $0) < (delays[$1], $1) }.map { UInt32(2 * $0 + 1) }
        let sorted = delays.sorted()
        for step in [sorted[10], sorted[50] - 1, sorted[50], sorted[99]] {
            h.serve.advance(toNanos: step)
            let answered = h.frames.filter { $0.type == 1 }.map(\.stream)
            #expect(answered == Array(expected.prefix(delays.filter { $0 <= step }.count)), "at \(step) ns")
        }
        #expect(h.serve.heldAnswers == 0)
        h.connection.abort(reason: "done")
        #expect(h.wireIdentityHolds)
    }

    @Test("--latency 50ms: the answer is held on the loop's clock and sent when due, not before")
    func latencyHolds() throws {
        let h = try Harness { $0.faults.latency = .fixed(nanos: 50 * Self.ms) }
        defer { try? h.serve.close() }
        h.serve.advance(toNanos: 1_000 * Self.ms)
        h.send(Self.push(h.token, stream: 1))
        #expect(h.server.service.stats.requests == 1, "judged and applied at arrival")
        #expect(h.server.service.pipeline.accounting.pushes == 1)
        #expect(!h.answered(1) && h.serve.heldAnswers == 1)
        h.serve.advance(toNanos: 1_049 * Self.ms)
        #expect(!h.answered(1), "not before it is due")
        h.serve.advance(toNanos: 1_050 * Self.ms)
        #expect(h.answered(1) && h.serve.heldAnswers == 0)
        #expect(h.server.connectionStats.faults[.held] == 1)
        let heldFor = h.server.connectionStats.faults.heldNanos
        #expect(heldFor.totalCount == 1 && heldFor.min <= 50 * Self.ms && heldFor.max >= 50 * Self.ms, "50 ms")
        h.connection.abort(reason: "done")
        #expect(h.server.connectionStats[.responsesSubmitted] == 1)
        #expect(h.wireIdentityHolds)
    }

    @Test("stall-every=10s:1s: answers due inside a window wait for its end; outside, none waits")
    func stallHolds() throws {
        let h = try Harness { try ServeFaults.parseFaults("stall-every=10s:1s", into: &$0.faults) }
        defer { try? h.serve.close() }
        h.serve.advance(toNanos: 5_000 * Self.ms)
        h.send(Self.push(h.token, stream: 1))
        #expect(h.answered(1), "no stall at 5 s: answered at once")
        h.serve.advance(toNanos: 10_500 * Self.ms)
        h.send(Self.push(h.token, stream: 3))
        h.send(Self.push(h.token, stream: 5))
        #expect(!h.answered(3) && !h.answered(5) && h.serve.heldAnswers == 2)
        h.serve.advance(toNanos: 10_999 * Self.ms)
        #expect(!h.answered(3), "held to the window's end")
        h.serve.advance(toNanos: 11_000 * Self.ms)
        #expect(h.answered(3) && h.answered(5))
        let first = try #require(h.frames.firstIndex { $0.type == 1 && $0.stream == 3 })
        let second = try #require(h.frames.firstIndex { $0.type == 1 && $0.stream == 5 })
        #expect(first < second, "in the order they were held")
        #expect(h.server.connectionStats.faults[.stalled] == 2)
        #expect(h.server.connectionStats.faults.heldNanos.max >= 500 * Self.ms, "held for the window's last 0.5 s")
        #expect(h.server.openConnections == 1, "connections are kept")
    }

    @Test("a connection closed, and a stream reset, while answers are held: each answer counted dropped")
    func droppedWhileHeld() throws {
        let h = try Harness { $0.faults.latency = .fixed(nanos: 50 * Self.ms) }
        defer { try? h.serve.close() }
        for k in 0..<4 { h.send(Self.push(h.token, stream: UInt32(2 * k + 1))) }
        h.send(Self.rstStream(1))  // the client gives up on one of them
        #expect(h.serve.heldAnswers == 4)
        h.serve.advance(toNanos: 50 * Self.ms)
        #expect(!h.answered(1) && h.answered(3), "the reset stream is not answered")
        #expect(h.connection.answersDropped == 1)
        for k in 4..<7 { h.send(Self.push(h.token, stream: UInt32(2 * k + 1))) }
        #expect(h.serve.heldAnswers == 3)
        h.connection.abort(reason: "the client went away")
        #expect(h.serve.heldAnswers == 0, "released with the connection")
        let c = h.server.connectionStats
        #expect(c[.answersDropped] == 1 + 3 && c[.responsesSubmitted] == 3, "\(c)")
        #expect(h.server.service.stats.requests == 7)
        #expect(h.wireIdentityHolds)
        h.serve.advance(toNanos: 200 * Self.ms)
        #expect(h.wireIdentityHolds, "nothing sent or counted later")
    }

    @Test("held answers are bounded by --max-open-streams: beyond it (reset streams' answers), sent at once, counted")
    func heldBound() throws {
        let h = try Harness {
            $0.faults.latency = .fixed(nanos: 50 * Self.ms)
            $0.maxOpenStreamsPerLoop = 2
        }
        defer { try? h.serve.close() }
        h.send(Self.push(h.token, stream: 1) + Self.push(h.token, stream: 3))
        h.send(Self.rstStream(1) + Self.rstStream(3))  // streams gone, answers still held: the budget is free again
        h.send(Self.push(h.token, stream: 5) + Self.push(h.token, stream: 7))
        #expect(h.serve.heldAnswers == 2, "no more than the bound")
        #expect(h.answered(5) && h.answered(7), "sent at once")
        #expect(h.server.connectionStats.faults[.heldOverflow] == 2)
    }

    @Test("goaway-every: a graceful GOAWAY {\"reason\":\"Shutdown\"}; the held stream is answered, then it closes")
    func goAway() throws {
        let h = try Harness {
            try ServeFaults.parseFaults("goaway-every=1s", into: &$0.faults)
            $0.faults.latency = .fixed(nanos: 50 * Self.ms)
        }
        defer { try? h.serve.close() }
        h.send(Self.push(h.token, stream: 1))
        h.server.goAwayTick()
        h.server.goAwayTick()
        let goaway = try #require(h.frames.first { $0.type == 7 })
        #expect(h.frames.filter { $0.type == 7 }.count == 1 && h.server.connectionStats.faults[.goAway] == 1)
        let p = Array(goaway.payload)
        #expect(p[4..<8] == [0, 0, 0, 0], "NO_ERROR")
        #expect(String(decoding: p[8...], as: UTF8.self) == #"{"reason":"Shutdown"}"#)
        #expect(p[0..<4] == [0, 0, 0, 1], "last stream: the one in flight")
        #expect(h.server.openConnections == 1, "open while its stream is in flight")
        h.serve.advance(toNanos: 50 * Self.ms)
        #expect(h.answered(1))
        #expect(h.server.openConnections == 0, "closed once its streams finished")
        #expect(h.server.connectionStats.endReasons[ServeFaults.goAwayEndReason] == 1)
        #expect(h.wireIdentityHolds)
    }

    @Test("at shutdown every held answer goes at once (what beginShutdown does before its GOAWAY)")
    func shutdownReleases() throws {
        let h = try Harness { $0.faults.latency = .fixed(nanos: 10_000 * Self.ms) }
        defer { try? h.serve.close() }
        h.send(Self.push(h.token, stream: 1) + Self.push(h.token, stream: 3))
        #expect(!h.answered(1) && !h.answered(3))
        h.server.stopFaults()
        #expect(h.answered(1) && h.answered(3) && h.serve.heldAnswers == 0)
        h.connection.abort(reason: "done")
        #expect(h.server.connectionStats[.responsesSubmitted] == 2)
        #expect(h.wireIdentityHolds)
    }
}
