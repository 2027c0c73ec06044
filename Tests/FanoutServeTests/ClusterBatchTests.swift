import FanoutAPNs
import FanoutCore
import Foundation
@testable import FanoutServe
import FanoutSim
import Testing

@Suite("Several workers: requests cross in batches, answers come back in one write")
struct ClusterBatchTests {
    /// Update tokens of com.example.scores activities that `service` owns.
    static func tokens(of service: APNsService, count: Int) throws -> [String] {
        var out: [String] = []
        for line in service.populationLines().split(separator: UInt8(ascii: "\n")) where out.count < count {
            let row = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
            if row["app"] as? String == "com.example.scores", let token = row["token"] as? String { out.append(token) }
        }
        try #require(out.count == count)
        return out
    }

    /// smoke with 40 devices on two workers in memory, as `fanout serve --workers 2` serves it.
    static func twoWorkers() throws -> ([APNsService], InMemoryServe) {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 40
        let now = InMemoryServeTests.now
        let services = (0..<2).map { k in APNsService(scenario: s, auth: nil, nowSeconds: now, worker: k, of: 2) { 0 } }
        return (services, try InMemoryServe(services: services, wallMillis: now * 1000))
    }

    /// Each loop times `--duration` from its own start; the first to end tells the others (ClusterMessage.shutdown),
    /// so no loop serves on after another sent GOAWAY (a client resending there what it had in flight applied it
    /// twice: 26 duplicates in a CI run of the example backend).
    @Test("one worker's shutdown is every worker's: the others send GOAWAY Shutdown at once")
    func shutdownTogether() throws {
        let (_, serve) = try Self.twoWorkers()
        defer { try? serve.close() }
        let output = InMemoryServeTests.Output()
        let connection = try serve.open(on: 1) { output.bytes.append(contentsOf: $0) }
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0]
        preface.withUnsafeBytes { connection.receive($0) }
        let goAways = { InMemoryServeTests.frames(output.bytes).filter { $0.type == 7 } }
        #expect(goAways().isEmpty)
        serve.servers[0].beginShutdown()
        #expect(serve.servers[1].stoppingSinceNanos == nil, "worker 1 has not read its inbox yet")
        serve.settle()
        #expect(serve.servers[1].stoppingSinceNanos != nil)
        let frame = try #require(goAways().first)
        #expect(String(decoding: frame.payload.dropFirst(8), as: UTF8.self) == #"{"reason":"Shutdown"}"#)
        #expect(goAways().count == 1)
    }

    /// Between one worker's shutdown and another's turn to read its inbox, a request that completes on the other is
    /// refused (RST_STREAM REFUSED_STREAM), not applied: a client's resend of what the first worker's GOAWAY failed
    /// (aioapns) is not applied twice. The other worker stops at once.
    @Test("after one worker's shutdown began, a request completing on another is refused, not applied")
    func refusedAfterShutdown() throws {
        let (services, serve) = try Self.twoWorkers()
        defer { try? serve.close() }
        let token = try Self.tokens(of: services[1], count: 1)[0]
        let output = InMemoryServeTests.Output()
        let connection = try serve.open(on: 1) { output.bytes.append(contentsOf: $0) }
        serve.servers[0].beginShutdown()
        let request = InMemoryServeTests.post(
            path: "/3/device/\(token)",
            headers: [
                ("apns-push-type", Array("liveactivity".utf8)),
                ("apns-topic", Array("com.example.scores.push-type.liveactivity".utf8)),
            ],
            body: InMemoryServeTests.payload)
        request.withUnsafeBytes { connection.receive($0) }
        let frames = InMemoryServeTests.frames(output.bytes)
        let reset = try #require(frames.first { $0.type == 3 && $0.stream == 1 }, "RST_STREAM on stream 1")
        #expect(Array(reset.payload) == [0, 0, 0, 7], "REFUSED_STREAM")
        #expect(!frames.contains { $0.type == 1 && $0.stream == 1 }, "no answer")
        #expect(connection.requestsRefused == 1)
        #expect(services[0].stats.requests == 0 && services[1].stats.requests == 0, "judged nowhere")
        #expect(services[1].pipeline.accounting.deliveries == 0)
        #expect(serve.servers[1].stoppingSinceNanos != nil)
        #expect(frames.contains { $0.type == 7 }, "and its GOAWAY")
    }

    @Test("five pushes for the other worker's devices in one read: one batch, one wakeup; their answers, one write")
    func oneBatchEachWay() throws {
        let (services, serve) = try Self.twoWorkers()
        defer { try? serve.close() }
        let cluster = try #require(serve.cluster)
        let tokens = try Self.tokens(of: services[1], count: 5)
        let output = InMemoryServeTests.Output()
        let connection = try serve.open(on: 0) { output.bytes.append(contentsOf: $0) }
        let batchesBefore = cluster.batchesHanded
        // One read: the client's five requests in one buffer (streams 1, 3, …, 9).
        let preface = 24 + 9  // the client preface and an empty SETTINGS frame, which `post` puts first
        var bytes: [UInt8] = []
        for (i, token) in tokens.enumerated() {
            let request = InMemoryServeTests.post(
                path: "/3/device/\(token)",
                headers: [
                    ("apns-push-type", Array("liveactivity".utf8)),
                    ("apns-topic", Array("com.example.scores.push-type.liveactivity".utf8)),
                ],
                body: InMemoryServeTests.payload)
            // `post` makes stream 1 after a preface; the later requests take streams 3, 5, … and no preface.
            let frames = Self.renumber(Array(request[preface...]), stream: UInt32(2 * i + 1))
            bytes += (i == 0 ? Array(request[..<preface]) : []) + frames
        }
        bytes.withUnsafeBytes { connection.receive($0) }
        #expect(connection.requestsReceived == 5)
        #expect(serve.forwardedWaiting == 5)
        #expect(cluster.batchesHanded == batchesBefore + 1, "the read's five requests went over in one batch")
        let writesBefore = connection.writes
        serve.settle()
        #expect(serve.forwardedWaiting == 0)
        #expect(cluster.batchesHanded == batchesBefore + 2, "their five answers came back in one batch")
        #expect(connection.writes == writesBefore + 1, "and were written to the client in one write")
        #expect(services[1].stats.byStatus[200] == 5)
        let answered = InMemoryServeTests.frames(output.bytes).filter { $0.type == 1 }.map(\.stream)
        #expect(answered == [1, 3, 5, 7, 9])
        connection.abort(reason: "done")
        #expect(serve.identitiesHold)
    }

    /// Frames of `bytes` with every non-zero stream id set to `stream`.
    static func renumber(_ bytes: [UInt8], stream: UInt32) -> [UInt8] {
        var out = bytes
        var i = 0
        while i + 9 <= out.count {
            let n = Int(out[i]) << 16 | Int(out[i + 1]) << 8 | Int(out[i + 2])
            let old = out[(i + 5)...(i + 8)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if old != 0 {
                for k in 0..<4 { out[i + 5 + k] = UInt8(truncatingIfNeeded: stream >> UInt32(24 - 8 * k)) }
            }
            i += 9 + n
        }
        return out
    }
}
