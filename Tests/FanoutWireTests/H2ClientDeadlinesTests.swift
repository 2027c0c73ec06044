@testable import FanoutWire
import Foundation
import Testing
import UVLoop

/// Frames a server sends, by hand (the in-memory connection's input).
enum ServerFrames {
    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8] = []) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags] + be32(stream) + payload
    }

    static func be32(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }

    /// SETTINGS, with SETTINGS_MAX_CONCURRENT_STREAMS when given.
    static func settings(maxStreams: UInt32? = nil) -> [UInt8] {
        frame(4, maxStreams.map { [0, 3] + be32($0) } ?? [])
    }

    /// HEADERS `:status 200` (HPACK static index 8), END_STREAM | END_HEADERS.
    static func ok(_ stream: UInt32) -> [UInt8] { frame(1, flags: 5, stream: stream, [0x88]) }
    static func reset(_ stream: UInt32, code: UInt32) -> [UInt8] { frame(3, stream: stream, be32(code)) }
    static func goAway(last: UInt32, code: UInt32 = 0) -> [UInt8] { frame(7, be32(last) + be32(code)) }
    static func pingAck() -> [UInt8] { frame(6, flags: 1, [UInt8](repeating: 0, count: 8)) }
}

/// An in-memory client connection and what it handed back.
final class MemoryClient {
    let connection: H2ClientConnection
    var outcomes: [H2ClientResponse] = []
    var drains = 0
    var closed = 0

    init(loop: EventLoop, settings: H2ClientSettings = H2ClientSettings()) {
        connection = H2ClientConnection(loop: loop, output: { _ in }, settings: settings)
        connection.onResponse = { [unowned self] _, response in self.outcomes.append(response) }
        connection.onDraining = { [unowned self] _ in self.drains += 1 }
        connection.onClosed = { [unowned self] _ in self.closed += 1 }
    }

    func receive(_ bytes: [UInt8]) { bytes.withUnsafeBytes { connection.receive($0) } }
    func failures(_ f: H2ClientFailure) -> [H2ClientResponse] { outcomes.filter { $0.failure == f } }
}

/// The client connection's deadlines (request, connect, PING), its queue bound, its stream ids' end and the
/// server's REFUSED_STREAM and GOAWAY, driven frame by frame on an in-memory connection, the deadlines on a virtual
/// clock (``H2ClientConnection/sweep(now:_:)`` takes the time): counts and order, no wall clock.
@Suite("H2ClientConnection deadlines, queue bound and stream ids")
struct H2ClientDeadlinesTests {
    static let seconds: UInt64 = 1_000_000_000
    static let deadlines = ClientDeadlines(connectSeconds: 5, requestSeconds: 10, pingIntervalSeconds: 0)

    @Test("request deadline: open streams reset (RST_STREAM CANCEL) and queued ones failed as timeout, not handed back")
    func requestTimeout() throws {
        let loop = try EventLoop()
        do {
            let client = MemoryClient(loop: loop)
            client.receive(ServerFrames.settings(maxStreams: 2))
            for r in requests(5) { client.connection.submit(r) }
            #expect(client.connection.openStreams == 2 && client.connection.queuedRequests == 3)
            let handed = client.connection.openedNanos
            // Before the deadline: nothing.
            #expect(client.connection.sweep(now: EventLoop.hrtimeNanos + 1, Self.deadlines) == .none)
            #expect(client.outcomes.isEmpty)
            // One answer (a queued request takes its stream), then the deadline: the two open are reset, the two
            // queued fail at once.
            client.receive(ServerFrames.ok(1))
            #expect(client.outcomes.count == 1 && client.outcomes[0].status == 200)
            #expect(client.connection.openStreams == 2 && client.connection.queuedRequests == 2)
            let late = max(EventLoop.hrtimeNanos, handed) + 11 * Self.seconds
            #expect(client.connection.sweep(now: late, Self.deadlines) == .expired(4))
            #expect(client.outcomes.count == 5)
            let timeouts = client.failures(.timeout)
            #expect(timeouts.count == 4 && client.connection.requestTimeouts == 4)
            #expect(timeouts.allSatisfy { $0.unprocessed == nil && $0.status == 0 })
            #expect(timeouts.filter { $0.submittedNanos > 0 }.count == 2, "the two sent were reset")
            #expect(client.connection.openStreams == 0 && client.connection.queuedRequests == 0)
            #expect(H2ClientFailure.timeout.description == "timeout")
            // Streams freed by the deadline take queued requests at once, with no read from the server: two sent
            // (handed over at t), two queued (handed over 20 s later); at t + 11 s the two sent are reset and the
            // two queued go out.
            let t = EventLoop.hrtimeNanos
            for var r in requests(4) {
                r.handedNanos = r.tag < 2 ? t : t + 20 * Self.seconds
                client.connection.submit(r)
            }
            #expect(client.connection.openStreams == 2 && client.connection.queuedRequests == 2)
            #expect(client.connection.sweep(now: t + 5 * Self.seconds, Self.deadlines) == .none)
            #expect(client.connection.sweep(now: t + 11 * Self.seconds, Self.deadlines) == .expired(2))
            #expect(client.connection.openStreams == 2 && client.connection.queuedRequests == 0)
            // A later answer for a reset stream is ignored: each request ended once.
            client.receive(ServerFrames.ok(3))
            #expect(client.outcomes.count == 7)
            #expect(client.outcomes.map(\.tag).sorted() == [0, 0, 1, 1, 2, 3, 4])
            client.connection.close()
        }
        try loop.close()
    }

    @Test("connect deadline: no SETTINGS by then ends the connection; its queued requests are handed back")
    func connectDeadline() throws {
        let loop = try EventLoop()
        do {
            let client = MemoryClient(loop: loop)
            for r in requests(3) { client.connection.submit(r) }
            let opened = client.connection.openedNanos
            #expect(client.connection.sweep(now: opened + 4 * Self.seconds, Self.deadlines) == .none)
            #expect(client.closed == 0)
            #expect(client.connection.sweep(now: opened + 5 * Self.seconds, Self.deadlines) == .ended)
            #expect(client.closed == 1)
            #expect(client.connection.endReason?.hasPrefix("no HTTP/2 connection within 5.0 s") == true)
            #expect(client.outcomes.count == 3 && client.outcomes.allSatisfy { $0.unprocessed != nil })
        }
        try loop.close()
    }

    @Test("PING: sent when due; an ACK keeps the connection; none by the next one ends it as lost")
    func ping() throws {
        let loop = try EventLoop()
        let d = ClientDeadlines(connectSeconds: 5, requestSeconds: 0, pingIntervalSeconds: 2)
        do {
            let client = MemoryClient(loop: loop)
            client.receive(ServerFrames.settings(maxStreams: 1))
            for r in requests(2) { client.connection.submit(r) }
            let t = EventLoop.hrtimeNanos
            #expect(client.connection.sweep(now: t, d) == .none)
            #expect(client.connection.pingsSent == 1)
            client.receive(ServerFrames.pingAck())
            #expect(client.connection.pingsAnswered == 1)
            // Answered: the next PING at the interval, not the end.
            #expect(client.connection.sweep(now: t + 1 * Self.seconds, d) == .none && client.connection.pingsSent == 1)
            #expect(client.connection.sweep(now: t + 2 * Self.seconds, d) == .none && client.connection.pingsSent == 2)
            #expect(client.closed == 0)
            // Not answered by the next interval: a half-open connection, ended as lost.
            #expect(client.connection.sweep(now: t + 4 * Self.seconds, d) == .ended)
            #expect(client.closed == 1 && client.connection.endReason?.hasPrefix("no PING answer") == true)
            // The open request may have been processed: failed, not handed back; the queued one is handed back.
            #expect(client.outcomes.count == 2)
            #expect(client.outcomes.filter { $0.failure == .connectionEnded && $0.unprocessed == nil }.count == 1)
            #expect(client.outcomes.filter { $0.unprocessed != nil }.count == 1)
        }
        try loop.close()
    }

    @Test("queue bound: past maxQueued a request fails at once as 'dropped (queue full)', not handed back")
    func queueBound() throws {
        let loop = try EventLoop()
        do {
            var settings = H2ClientSettings()
            settings.maxQueued = 2
            let client = MemoryClient(loop: loop, settings: settings)
            for r in requests(5) { client.connection.submit(r) }
            #expect(client.connection.queuedRequests == 2)
            #expect(client.outcomes.map(\.tag) == [2, 3, 4])
            #expect(client.failures(.queueFull).count == 3 && client.connection.droppedQueueFull == 3)
            #expect(client.outcomes.allSatisfy { $0.unprocessed == nil })
            #expect(H2ClientFailure.queueFull.description == "dropped (queue full)")
            client.receive(ServerFrames.settings())
            #expect(client.connection.openStreams == 2 && client.connection.queuedRequests == 0)
            client.connection.close()
        }
        try loop.close()
    }

    @Test("stream ids near their end: the connection drains once, hands back what it did not send, then closes")
    func streamIdsDrain() throws {
        let loop = try EventLoop()
        do {
            var settings = H2ClientSettings()
            settings.streamIdMargin = 2
            // Drains once the next id passes 2^31 − 1 − 4: after the 4th request (ids F, F+2, F+4, F+6).
            let first = Int32.max - 10
            settings.firstStreamId = first
            let client = MemoryClient(loop: loop, settings: settings)
            client.receive(ServerFrames.settings())
            for r in requests(10) { client.connection.submit(r) }
            #expect(client.connection.requestsSubmitted == 4, "\(client.connection.requestsSubmitted)")
            #expect(client.drains == 1 && client.connection.isDraining && !client.connection.isUsable)
            let handedBack = client.failures(.streamIdsExhausted)
            #expect(handedBack.map(\.tag) == Array(4..<10))
            #expect(handedBack.allSatisfy { $0.unprocessed?.tag == $0.tag && $0.submittedNanos == 0 })
            #expect(client.connection.handedBackAtStreamIds == 6)
            #expect(client.closed == 0, "its open streams still run")
            for k in 0..<4 { client.receive(ServerFrames.ok(UInt32(first) + UInt32(2 * k))) }
            #expect(client.outcomes.filter { $0.status == 200 }.count == 4)
            #expect(client.closed == 1 && client.connection.endReason == "stream ids used up (drained)")
            #expect(client.outcomes.count == 10 && client.drains == 1)
        }
        try loop.close()
    }

    @Test("the last stream id (2^31 − 1, margin 0): sent, then the connection drains; the next is handed back")
    func lastStreamId() throws {
        let loop = try EventLoop()
        do {
            var settings = H2ClientSettings()
            settings.streamIdMargin = 0
            let client = MemoryClient(loop: loop, settings: settings)
            client.receive(ServerFrames.settings())
            #expect(client.connection.setNextStreamId(Int32.max))
            client.connection.submit(requests(1)[0])
            #expect(client.connection.requestsSubmitted == 1 && client.connection.nextStreamId > UInt32(Int32.max))
            #expect(client.drains == 1)
            client.connection.submit(requests(2)[1])
            #expect(client.outcomes.map(\.failure) == [.streamIdsExhausted])
            #expect(client.outcomes[0].unprocessed?.tag == 1)
            client.receive(ServerFrames.ok(UInt32(Int32.max)))
            #expect(client.outcomes.count == 2 && client.outcomes[1].status == 200 && client.closed == 1)
        }
        try loop.close()
    }

    @Test("a protocol error in the read that made the connection ready: its queue handed back as the end, not the ids'")
    func protocolErrorIsNotTheIdsEnd() throws {
        let loop = try EventLoop()
        do {
            let client = MemoryClient(loop: loop)
            for r in requests(3) { client.connection.submit(r) }
            #expect(client.connection.queuedRequests == 3)
            // SETTINGS, then an answer on a stream never opened (the requests wait for the read's end): nghttp2 ends
            // the session with GOAWAY PROTOCOL_ERROR and takes no new stream, its ids far from their end.
            client.receive(ServerFrames.settings() + ServerFrames.ok(1))
            #expect(client.connection.handedBackAtStreamIds == 0 && client.drains == 0)
            #expect(client.outcomes.count == 3)
            #expect(client.outcomes.allSatisfy { $0.failure == .connectionEnded && $0.unprocessed != nil })
            client.connection.close()
        }
        try loop.close()
    }

    @Test("REFUSED_STREAM without GOAWAY: handed back for another try (RFC 9113 §8.7); CANCEL is not")
    func refusedStream() throws {
        let loop = try EventLoop()
        do {
            let client = MemoryClient(loop: loop)
            client.receive(ServerFrames.settings())
            for r in requests(2) { client.connection.submit(r) }
            client.receive(ServerFrames.reset(1, code: 7) + ServerFrames.reset(3, code: 8))
            #expect(client.outcomes.count == 2)
            #expect(client.outcomes[0].failure == .reset(7) && client.outcomes[0].unprocessed?.tag == 0)
            #expect(client.outcomes[1].failure == .reset(8) && client.outcomes[1].unprocessed == nil)
            #expect(client.connection.streamsRefused == 1 && client.drains == 0)
            client.connection.close()
        }
        try loop.close()
    }

    @Test("nghttp2's memory as the server's: freed blocks kept at most memoryCacheBytes; a 65-entry SETTINGS ends it")
    func nghttp2Bounds() throws {
        let loop = try EventLoop()
        do {
            var settings = H2ClientSettings()
            settings.memoryCacheBytes = 2048
            let client = MemoryClient(loop: loop, settings: settings)
            #expect(client.connection.pool.cacheLimit == 2048)
            client.receive(ServerFrames.settings())
            for r in requests(50) { client.connection.submit(r) }
            for k in 0..<50 { client.receive(ServerFrames.ok(UInt32(2 * k + 1))) }
            #expect(client.outcomes.count == 50 && client.outcomes.allSatisfy { $0.status == 200 })
            #expect(client.connection.pool.cachedBytes <= 2048 && client.connection.pool.uncached > 0)
            // More SETTINGS entries in one frame than a server needs: a protocol error, the connection ends.
            let flood = ServerFrames.frame(4, [UInt8]((0..<65).flatMap { _ in [0, 3] + ServerFrames.be32(100) }))
            client.receive(flood)
            #expect(client.closed == 1, "\(client.connection.endReason ?? "")")
        }
        try loop.close()
    }

    @Test("GOAWAY: the owner is told at once and the queue handed back at once, while the open stream finishes")
    func goAwayDrains() throws {
        let loop = try EventLoop()
        do {
            let client = MemoryClient(loop: loop)
            client.receive(ServerFrames.settings(maxStreams: 1))
            for r in requests(3) { client.connection.submit(r) }
            client.receive(ServerFrames.goAway(last: 1))
            #expect(client.drains == 1 && client.closed == 0)
            #expect(client.outcomes.map(\.tag) == [1, 2])
            #expect(client.outcomes.allSatisfy { $0.failure == .goAway && $0.unprocessed != nil })
            client.receive(ServerFrames.ok(1))
            #expect(client.outcomes.count == 3 && client.outcomes[2].status == 200)
            #expect(client.closed == 1 && client.drains == 1)
        }
        try loop.close()
    }
}
