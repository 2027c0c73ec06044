import FanoutCore
import Testing

@testable import FanoutWire

/// Bytes a client would send, made by hand (frames of RFC 9113 §4, HPACK literals of RFC 7541 §6.2.2).
enum Client {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    static let endStream: UInt8 = 0x1
    static let endHeaders: UInt8 = 0x4

    static func frame(_ type: UInt8, _ flags: UInt8, _ stream: Int32, _ payload: [UInt8]) -> [UInt8] {
        let n = UInt32(payload.count)
        let s = UInt32(stream)
        var head: [UInt8] = []
        for shift: UInt32 in [16, 8, 0] { head.append(UInt8(truncatingIfNeeded: n >> shift)) }
        head += [type, flags]
        for shift: UInt32 in [24, 16, 8, 0] { head.append(UInt8(truncatingIfNeeded: s >> shift)) }
        return head + payload
    }

    /// A literal field without indexing, new name (names and values under 127 bytes).
    static func block(_ fields: [(String, String)]) -> [UInt8] {
        var out: [UInt8] = []
        for (name, value) in fields {
            out += [0x00, UInt8(name.utf8.count)] + Array(name.utf8)
            out += [UInt8(value.utf8.count)] + Array(value.utf8)
        }
        return out
    }

    static func request(_ stream: Int32, path: String = "/3/device/aa", extra: [(String, String)] = [], end: Bool)
        -> [UInt8]
    {
        let fields = [(":method", "POST"), (":scheme", "https"), (":path", path), (":authority", "x")] + extra
        return frame(0x1, endHeaders | (end ? endStream : 0), stream, block(fields))
    }

    static func data(_ stream: Int32, _ bytes: [UInt8], end: Bool) -> [UInt8] {
        frame(0x0, end ? endStream : 0, stream, bytes)
    }

    static func rst(_ stream: Int32, code: UInt32 = 8) -> [UInt8] {
        frame(0x3, 0, stream, [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: code >> UInt32($0)) })
    }

    static let settings = frame(0x4, 0, 0, [])
    static let ping = frame(0x6, 0, 0, [1, 2, 3, 4, 5, 6, 7, 8])
    static let goAway = frame(0x7, 0, 0, [0, 0, 0, 0, 0, 0, 0, 0])
}

/// Frames the server wrote: (type, flags, stream, payload).
func frames(_ bytes: [UInt8]) -> [(type: UInt8, flags: UInt8, stream: Int32, payload: [UInt8])] {
    var out: [(UInt8, UInt8, Int32, [UInt8])] = []
    var i = 0
    while i + 9 <= bytes.count {
        let n = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
        var stream: Int32 = 0
        for k in 5...8 { stream = stream << 8 | Int32(bytes[i + k] & (k == 5 ? 0x7f : 0xff)) }
        guard i + 9 + n <= bytes.count else { break }
        out.append((bytes[i + 3], bytes[i + 4], stream, Array(bytes[(i + 9)..<(i + 9 + n)])))
        i += 9 + n
    }
    return out
}

/// Resets sent by the server: stream → error code.
func resets(_ bytes: [UInt8]) -> [Int32: UInt32] {
    var out: [Int32: UInt32] = [:]
    for f in frames(bytes) where f.type == 0x3 {
        out[f.stream] = f.payload.prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }
    return out
}

/// A delegate that keeps the requests it is given, answering them only when told.
final class Keeper: H2ServerDelegate {
    var requests: [H2Request] = []
    var answerAtOnce = false
    var closed = 0

    func connection(_ connection: H2ServerConnection, received request: H2Request) {
        requests.append(request)
        if answerAtOnce {
            connection.respond(to: request, with: H2Response(status: 404, body: Array("{\"reason\":\"BadPath\"}".utf8)))
        } else {
            request.retained = true
        }
    }

    func connectionClosed(_ connection: H2ServerConnection) { closed += 1 }
}

/// An in-memory server connection, its delegate and what it wrote.
final class Harness {
    var written: [UInt8] = []
    let keeper = Keeper()
    var connection: H2ServerConnection!

    init(settings: H2ServerSettings = H2ServerSettings(), budget: StreamBudget? = nil, preface: Bool = true) throws {
        connection = H2ServerConnection(output: { [unowned self] in self.written += $0 }, settings: settings)
        connection.delegate = keeper
        connection.budget = budget
        try connection.start()
        if preface { send(Client.preface + Client.settings) }
    }

    func send(_ bytes: [UInt8]) { bytes.withUnsafeBytes { connection.receive($0) } }
}

@Suite("H2ServerConnection (in memory: bounds, deadlines, counts)")
struct H2ServerConnectionTests {
    @Test("a trailer is not merged into the request's headers (it would read as a duplicate apns-topic)")
    func trailers() throws {
        let h = try Harness()
        h.send(Client.request(1, extra: [("apns-topic", "a")], end: false))
        h.send(Client.data(1, Array("{}".utf8), end: false))
        h.send(Client.frame(0x1, Client.endHeaders | Client.endStream, 1, Client.block([("apns-topic", "b")])))
        #expect(h.keeper.requests.count == 1)
        let r = try #require(h.keeper.requests.first)
        #expect(r.headers.count == 1 && !r.headers.hasDuplicates)
        #expect(r.headers.value("apns-topic").map(Array.init) == Array("a".utf8))
        #expect(h.connection.trailerFields == 1)
    }

    @Test("the loop's open-stream budget: a stream over it gets RST_STREAM REFUSED_STREAM and is counted")
    func budget() throws {
        let budget = StreamBudget(limit: 2)
        let h = try Harness(budget: budget)
        h.send(Client.request(1, end: false) + Client.request(3, end: false) + Client.request(5, end: true))
        #expect(h.connection.streamsRefused == 1 && budget.refused == 1 && budget.open == 2)
        #expect(resets(h.written)[5] == 7, "REFUSED_STREAM on stream 5: \(resets(h.written))")
        #expect(h.keeper.requests.isEmpty, "a refused stream's request never reaches the delegate")
        // A stream that ends frees its share of the budget.
        h.send(Client.rst(1))
        #expect(budget.open == 1)
        h.send(Client.request(7, end: true))
        #expect(h.keeper.requests.map(\.streamId) == [7] && budget.open == 2)
    }

    @Test("the request deadline resets (CANCEL) streams still incomplete, oldest first, and only those")
    func requestDeadline() throws {
        let h = try Harness()
        h.keeper.answerAtOnce = true
        h.send(Client.request(1, end: false))
        h.send(Client.request(3, end: true) + Client.request(5, end: false))
        #expect(h.connection.incompleteRequests == 2)
        // Stream 1 opened before any cutoff after it: a cutoff of 0 expires nothing.
        #expect(h.connection.expireRequests(openedBeforeNanos: 0) == 0)
        #expect(h.connection.expireRequests(openedBeforeNanos: .max) == 2)
        #expect(h.connection.requestTimeouts == 2 && h.connection.incompleteRequests == 0)
        let r = resets(h.written)
        #expect(r[1] == 8 && r[5] == 8 && r[3] == nil, "\(r)")
        #expect(h.connection.responsesSubmitted == 1)
        // Their body arriving afterwards is ignored (the streams are closed).
        h.send(Client.data(1, [1], end: true))
        #expect(h.keeper.requests.map(\.streamId) == [3])
    }

    @Test("idle is measured by streams, not bytes: PINGs do not reset it, a request does")
    func idleByRequests() throws {
        let h = try Harness()
        h.keeper.answerAtOnce = true
        let c = h.connection!
        #expect(c.idleNanos(now: 1_000) == 0)  // the first look starts the clock
        h.send(Client.ping)
        #expect(c.idleNanos(now: 5_000) == 4_000)
        h.send(Client.ping + Client.ping)
        #expect(c.idleNanos(now: 9_000) == 8_000, "PINGs keep nothing alive")
        h.send(Client.request(1, end: true))
        #expect(c.idleNanos(now: 10_000) == 0, "a request is progress")
        #expect(c.idleNanos(now: 12_000) == 2_000)
        h.send(Client.request(3, end: false))
        #expect(c.idleNanos(now: 20_000) == 0, "an open stream is not idle")
    }

    @Test("the wire identity's counts: submitted answers, answers dropped for a reset stream, streams reset")
    func answerCounts() throws {
        let h = try Harness()
        h.send(Client.request(1, end: true) + Client.request(3, end: true))
        #expect(h.keeper.requests.count == 2)
        // The client resets stream 3 before its answer: the answer given later is dropped and counted.
        h.send(Client.rst(3))
        let answer = H2Response(status: 200)
        for r in h.keeper.requests { h.connection.respond(to: r, with: answer) }
        #expect(h.connection.responsesSubmitted == 1)
        #expect(h.connection.answersDropped == 1)
        #expect(h.connection.streamsReset == 1)
        // Answering twice is one more drop, not a second response.
        h.connection.respond(to: h.keeper.requests[0], with: answer)
        #expect(h.connection.responsesSubmitted == 1 && h.connection.answersDropped == 2)
    }

    @Test("the owner resets a request (RST_STREAM with its code): not an answer, not a stream reset by the client")
    func ownerReset() throws {
        let h = try Harness()
        h.send(Client.request(1, end: true))
        let r = try #require(h.keeper.requests.first)
        h.connection.reset(r, code: .internalError)
        #expect(resets(h.written)[1] == 2, "INTERNAL_ERROR on stream 1: \(resets(h.written))")
        #expect(h.connection.streamsReset == 0 && h.connection.responsesSubmitted == 0)
        h.connection.respond(to: r, with: H2Response(status: 200))
        #expect(h.connection.answersDropped == 1, "an answer after the reset is dropped, and counted")
    }

    @Test("GOAWAY with an end reason of the owner's: counted under it, the streams in flight still answered")
    func goAwayLabel() throws {
        let h = try Harness()
        h.send(Client.request(1, end: true))
        h.connection.goAway(reason: "Shutdown", endReason: "retired")
        #expect(h.connection.goingAway && h.keeper.closed == 0)
        h.connection.respond(to: h.keeper.requests[0], with: H2Response(status: 200))
        #expect(h.connection.responsesSubmitted == 1 && h.keeper.closed == 1)
        #expect(h.connection.endReason == "retired")
        let goaway = try #require(frames(h.written).first { $0.type == 7 })
        #expect(String(decoding: goaway.payload[8...], as: UTF8.self) == #"{"reason":"Shutdown"}"#)
    }

    @Test("how a session ended: the client's GOAWAY and a protocol error nghttp2 found are told apart")
    func endReasons() throws {
        let clean = try Harness()
        clean.send(Client.goAway)
        #expect(clean.connection.endReason == "closed by the client (GOAWAY)")
        let broken = try Harness()
        broken.send(Client.frame(0x0, 0, 0, Array("hey!".utf8)))  // DATA on stream 0
        let reason = try #require(broken.connection.endReason)
        #expect(reason.hasPrefix("protocol error"), "\(reason)")
        #expect(frames(broken.written).contains { $0.type == 0x7 && $0.payload[7] == 1 }, "GOAWAY PROTOCOL_ERROR")
    }

    @Test("a finished request returns to the pool only if its buffers stayed small (path and headers too)")
    func poolAdmission() throws {
        var settings = H2ServerSettings()
        settings.pooledRequestBytes = 4096
        let h = try Harness(settings: settings)
        h.keeper.answerAtOnce = true
        h.send(Client.request(1, end: true))
        #expect(h.connection.pool.count == 1)
        let long = String(repeating: "a", count: 100)
        let big = (0..<60).map { ("x-\($0)", long) }
        h.send(Client.request(3, extra: big, end: true))
        #expect(h.keeper.requests.count == 2 && h.connection.pool.count == 0, "a request holding 6 kB of headers")
    }

    @Test("nghttp2's memory for a connection: what a burst of streams freed is kept for reuse up to a bound")
    func memoryBound() throws {
        var settings = H2ServerSettings()
        settings.memoryCacheBytes = 8 << 10
        let h = try Harness(settings: settings)
        let pad = String(repeating: "p", count: 120)
        for k in 0..<1000 { h.send(Client.request(Int32(2 * k + 1), extra: [("x-pad", pad)], end: true)) }
        #expect(h.keeper.requests.count == 1000)
        let memory = h.connection.memory
        for k in 0..<1000 { h.send(Client.rst(Int32(2 * k + 1))) }
        #expect(h.connection.openStreams == 0)
        #expect(memory.cacheLimit == 8 << 10 && memory.cachedBytes <= 8 << 10)
        #expect(memory.uncached > 0, "the burst freed more than the bound: \(memory.cachedBytes) bytes kept")
    }
}
