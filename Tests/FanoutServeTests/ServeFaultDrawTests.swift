import FanoutCore
@testable import FanoutAPNs
@testable import FanoutServe
import FanoutMetrics
import FanoutSim
import Foundation
import Testing

/// `--faults` draws are keyed by the push (its token or channel, its aps.timestamp) and its attempt, not by arrival
/// order on a loop: the same seed refuses the same pushes whatever the connections, loops and order.
@Suite struct ServeFaultDrawTests {
    typealias M = InMemoryServeTests
    typealias F = ServeFaultsTests

    /// Sends `pushes` (token, timestamp) in that order through loop `loop` of a 2-worker in-memory serve with
    /// `options`; `then` moves its clock before the streams are read; returns the pushes whose stream got a frame of
    /// type `frame` (1 HEADERS: answered; 0 DATA: a body) with a payload containing `containing` (any when empty).
    static func through(
        _ pushes: [(String, Int64)], loop: Int, options: ServeOptions, frame: UInt8, containing: String = "",
        then: (InMemoryServe) -> Void = { _ in }
    ) throws -> Set<String> {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 40
        let services = (0..<2).map { k in
            APNsService(scenario: s, auth: nil, nowSeconds: F.now, worker: k, of: 2) { 0 }
        }
        let serve = try InMemoryServe(services: services, options: options, wallMillis: F.now * 1000)
        defer { try? serve.close() }
        let output = M.Output()
        let connection = try serve.open(on: loop) { output.bytes.append(contentsOf: $0) }
        F.preface.withUnsafeBytes { connection.receive($0) }
        for (k, (token, ts)) in pushes.enumerated() {
            F.push(token, stream: UInt32(2 * k + 1), body: APNsServiceTests.payload(ts)).withUnsafeBytes {
                connection.receive($0)
            }
        }
        serve.settle()
        then(serve)
        var payloads: [UInt32: [UInt8]] = [:]
        for f in M.frames(output.bytes) where f.type == frame { payloads[f.stream, default: []] += f.payload }
        connection.abort(reason: "done")
        return Set(
            pushes.enumerated().filter { k, _ in
                guard let p = payloads[UInt32(2 * k + 1)] else { return false }
                return containing.isEmpty || String(decoding: p, as: UTF8.self).contains(containing)
            }.map { "\($1.0) \($1.1)" })
    }

    /// The pushes refused through loop `loop` with `503=30%`.
    static func refused(_ pushes: [(String, Int64)], through loop: Int, seed: UInt64) throws -> Set<String> {
        var options = ServeOptions()
        try ServeFaults.parseFaults("503=30%", into: &options.faults)
        options.faults.seed = seed
        return try through(pushes, loop: loop, options: options, frame: 0, containing: "ServiceUnavailable")
    }

    /// 60 pushes: a token of each loop, 30 timestamps each.
    static func pushes() throws -> [(String, Int64)] {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 40
        let services = (0..<2).map { k in
            APNsService(scenario: s, auth: nil, nowSeconds: F.now, worker: k, of: 2) { 0 }
        }
        let tokens = try services.map { try M.token(of: $0) }
        var pushes: [(String, Int64)] = []
        for ts in 0..<30 { for token in tokens { pushes.append((token, Int64(F.now) + Int64(ts))) } }
        return pushes
    }

    @Test("the same seed refuses the same (token, timestamp), through either loop, in any order")
    func reproducible() throws {
        let pushes = try Self.pushes()
        let a = try Self.refused(pushes, through: 0, seed: 7)
        let b = try Self.refused(pushes.reversed(), through: 1, seed: 7)
        #expect(!a.isEmpty && a.count < pushes.count, "\(a.count) of \(pushes.count) refused")
        #expect(a == b, "the same pushes refused through loop 0 in order and through loop 1 reversed")
        let other = try Self.refused(pushes, through: 0, seed: 8)
        #expect(other != a, "another seed refuses others")
    }

    @Test("a retry is the identity's next attempt, on any loop: its own draw, not the refused one again")
    func attempts() {
        let attempts = FaultAttempts(capacity: 2)
        #expect(attempts.next(1) == 0 && attempts.next(1) == 1 && attempts.next(2) == 0 && attempts.next(1) == 2)
        #expect(attempts.next(3) == 0 && attempts.overCapacity == 1, "past the bound: attempt 0, counted")
        var faults = ServeFaults()
        faults.seed = 7
        let draws = Set((0..<20).map { faults.faultDraw(key: 42, attempt: UInt64($0)) })
        #expect(draws.count == 20, "each attempt draws anew")
    }

    @Test("a push refused on one loop and resent on another loop's connection is matched: one ledger for the loops")
    func retryOnAnotherLoop() throws {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 40
        let services = (0..<2).map { k in
            APNsService(scenario: s, auth: nil, nowSeconds: F.now, worker: k, of: 2) { 0 }
        }
        var options = ServeOptions()
        try ServeFaults.parseFaults("503=100%", into: &options.faults)  // the retry is refused too
        options.faults.seed = 7
        let serve = try InMemoryServe(services: services, options: options, wallMillis: F.now * 1000)
        defer { try? serve.close() }
        let outputs = [M.Output(), M.Output()]
        let connections = try (0..<2).map { k in try serve.open(on: k) { outputs[k].bytes.append(contentsOf: $0) } }
        for c in connections { F.preface.withUnsafeBytes { c.receive($0) } }
        let id = "11111111-2222-4333-8444-555555555555"
        let token = try M.token(of: services[0])  // owned by loop 0
        F.push(token, stream: 1, apnsId: id).withUnsafeBytes { connections[0].receive($0) }
        serve.settle()
        F.push(token, stream: 1, apnsId: id).withUnsafeBytes { connections[1].receive($0) }  // the retry, on loop 1
        serve.settle()
        for o in outputs {
            #expect(M.frames(o.bytes).contains { $0.type == 1 && $0.stream == 1 }, "each attempt answered")
        }
        #expect(serve.servers[0].retries === serve.servers[1].retries, "the cluster's one ledger")
        let r = try #require(serve.cluster).retries.final
        #expect(r.refused == [2, 0, 0, 0] && r.retried == [1, 0, 0, 0], "the retry on loop 1 matched: \(r)")
        #expect(r.neverRetried == [1, 0, 0, 0] && r.unresent.count == 1 && r.identityHolds, "\(r)")
        for c in connections { c.abort(reason: "done") }
    }

    /// The pushes through loop `loop` with `--latency p50=20ms,p99=250ms` answered once the clock reaches 20 ms.
    static func answeredBy20ms(_ pushes: [(String, Int64)], through loop: Int, seed: UInt64) throws -> Set<String> {
        var options = ServeOptions()
        options.faults.latency = try ServeFaults.parseLatency("p50=20ms,p99=250ms")
        options.faults.seed = seed
        return try through(pushes, loop: loop, options: options, frame: 1) { $0.advance(toNanos: 20_000_000) }
    }

    @Test("--latency draws are keyed too: the same seed holds the same pushes as long, through either loop, any order")
    func latencyReproducible() throws {
        let pushes = try Self.pushes()
        let a = try Self.answeredBy20ms(pushes, through: 0, seed: 7)
        let b = try Self.answeredBy20ms(pushes.reversed(), through: 1, seed: 7)
        #expect(!a.isEmpty && a.count < pushes.count, "\(a.count) of \(pushes.count) answered within 20 ms")
        #expect(a == b, "the same pushes held at most 20 ms through loop 0 in order and through loop 1 reversed")
        #expect(try Self.answeredBy20ms(pushes, through: 0, seed: 8) != a, "another seed holds others")
    }
}
