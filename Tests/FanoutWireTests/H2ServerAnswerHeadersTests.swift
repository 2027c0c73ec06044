import FanoutCore
import Testing

@testable import FanoutWire

/// The answer's header fields as a client decodes them. Most go to nghttp2 without a copy (static text, or the
/// request's own `answerValues`), so each answer must still carry its own values when several are written
/// together, after all were submitted.
@Suite("H2ServerConnection: answer headers (status, ids, headers, content-length)")
struct H2ServerAnswerHeadersTests {
    static func id(_ name: StaticString, _ text: String) -> UniqueHeader {
        let bytes = Array(text.utf8)
        return UniqueHeader(name: name, count: bytes.count) { $0.copyBytes(from: bytes) }
    }

    /// Every HEADERS block the server wrote, decoded in order: stream → fields.
    static func answers(_ written: [UInt8]) -> [Int32: [(name: String, value: String)]] {
        let inflater = HPACKInflater()
        var out: [Int32: [(name: String, value: String)]] = [:]
        for f in frames(written) where f.type == 0x1 { out[f.stream] = inflater.decode(f.payload) }
        return out
    }

    static func text(_ fields: [(name: String, value: String)]?) -> [String] {
        (fields ?? []).map { "\($0.name): \($0.value)" }
    }

    @Test("fields in order: :status, the ids, the headers, content-length; statuses outside the table in digits")
    func fields() throws {
        let h = try Harness()
        let streams: [Int32] = [1, 3, 5, 7, 9]
        h.send(streams.map { Client.request($0, end: true) }.reduce([], +))
        #expect(h.keeper.requests.count == streams.count)
        let r = h.keeper.requests
        let body = Array(repeating: UInt8(ascii: "x"), count: 1234)
        h.connection.respond(to: r[0], with: H2Response(status: 200, id: Self.id("apns-id", "id-one")))
        h.connection.respond(to: r[1], with: H2Response(status: 299))
        h.connection.respond(
            to: r[2],
            with: H2Response(
                status: 410, id: Self.id("apns-id", String(repeating: "a", count: UniqueHeader.capacity)),
                extraId: Self.id("apns-unique-id", "u-2"),
                headers: [(name: "content-type", value: "application/json")], body: body))
        h.connection.respond(to: r[3], with: H2Response(status: -17, body: [1]))
        h.connection.respond(to: r[4], with: H2Response(status: 1_000_000, id: Self.id("apns-request-id", "")))
        let answers = Self.answers(h.written)
        #expect(Self.text(answers[1]) == [":status: 200", "apns-id: id-one"])
        #expect(Self.text(answers[3]) == [":status: 299"])
        #expect(
            Self.text(answers[5]) == [
                ":status: 410", "apns-id: " + String(repeating: "a", count: UniqueHeader.capacity),
                "apns-unique-id: u-2", "content-type: application/json", "content-length: 1234",
            ])
        #expect(Self.text(answers[7]) == [":status: -17", "content-length: 1"])
        #expect(Self.text(answers[9]) == [":status: 1000000", "apns-request-id: "])
        #expect(h.connection.responsesSubmitted == 5)
    }

    @Test("answers submitted together, written at once: each carries its own id and length")
    func heldAnswers() throws {
        let h = try Harness()
        let streams: [Int32] = (0..<8).map { 2 * $0 + 1 }
        h.send(streams.map { Client.request($0, end: true) }.reduce([], +))
        h.connection.holdOutput()
        for (k, r) in h.keeper.requests.enumerated() {
            h.connection.respond(
                to: r,
                with: H2Response(
                    status: k % 2 == 0 ? 200 : 400 + k, id: Self.id("apns-id", "id-\(k)"),
                    body: Array(repeating: 1, count: k * 7)))
        }
        h.connection.releaseOutput()
        let answers = Self.answers(h.written)
        for (k, stream) in streams.enumerated() {
            var expected = [":status: \(k % 2 == 0 ? 200 : 400 + k)", "apns-id: id-\(k)"]
            if k > 0 { expected.append("content-length: \(k * 7)") }
            #expect(Self.text(answers[stream]) == expected, "stream \(stream)")
        }
    }

    @Test("decimal digits as String(_:) writes them")
    func decimal() {
        let out = UnsafeMutableRawPointer.allocate(byteCount: 24, alignment: 8)
        defer { out.deallocate() }
        for v in [0, 7, 10, 99, 200, 1234, -1, -17, Int.max, Int.min] {
            let n = H2ServerConnection.writeDecimal(v, to: out)
            #expect(String(decoding: UnsafeRawBufferPointer(start: out, count: n), as: UTF8.self) == String(v))
        }
    }
}

@Suite("H2Request: what is kept of a request (pseudo-headers, the body up to its limit + 1)")
struct H2RequestKeptTests {
    @Test("the body: chunks kept up to the limit + 1 bytes, every byte counted, in order")
    func bodyLimit() {
        let request = H2Request(streamId: 1, arrivalNanos: 0, bodyLimit: 16)
        let bytes = (0..<40).map { UInt8($0) }
        bytes.withUnsafeBytes { all in
            request.appendBody(UnsafeRawBufferPointer(rebasing: all[0..<10]))
            request.appendBody(UnsafeRawBufferPointer(rebasing: all[10..<10]))
            #expect(request.body == Array(bytes[0..<10]) && !request.bodyTooLarge)
            request.appendBody(UnsafeRawBufferPointer(rebasing: all[10..<16]))
            #expect(request.body == Array(bytes[0..<16]) && !request.bodyTooLarge)
            request.appendBody(UnsafeRawBufferPointer(rebasing: all[16..<30]))
            request.appendBody(UnsafeRawBufferPointer(rebasing: all[30..<40]))
        }
        #expect(request.body == Array(bytes[0..<17]))
        #expect(request.bodyBytesReceived == 40 && request.bodyTooLarge)
        request.appendBody(UnsafeRawBufferPointer(start: nil, count: 0))
        #expect(request.bodyBytesReceived == 40)
    }

    @Test("method and path as sent, on a new request and on a pooled one")
    func methodAndPath() throws {
        let h = try Harness()
        h.keeper.answerAtOnce = true
        h.send(Client.request(1, path: "/3/device/" + String(repeating: "ab", count: 40), end: true))
        h.send(Client.request(3, path: "/1/apps/com.x/channels", end: true))
        #expect(h.keeper.requests.count == 2)
        let second = try #require(h.keeper.requests.last)
        #expect(second.method == Array("POST".utf8))
        #expect(second.path == Array("/1/apps/com.x/channels".utf8))
        #expect(!second.duplicatePseudoHeader)
    }
}

/// What a request held when it was handed over (the object itself is pooled and reused for later streams).
final class Snapshots: H2ServerDelegate {
    var taken: [(method: String, path: String, headers: [String], body: [UInt8], tooLarge: Bool)] = []

    func connection(_ connection: H2ServerConnection, received request: H2Request) {
        let h = request.headers
        let headers = (0..<h.count).map {
            String(decoding: h.name($0), as: UTF8.self) + ": " + String(decoding: h.value($0), as: UTF8.self)
        }
        taken.append(
            (String(decoding: request.method, as: UTF8.self), String(decoding: request.path, as: UTF8.self), headers,
             request.body, request.bodyTooLarge))
        connection.respond(to: request, with: H2Response(status: 200))
    }

    func connectionClosed(_ connection: H2ServerConnection) {}
}

@Suite("H2ServerConnection: a pooled request holds only its own stream's bytes")
struct H2PooledRequestTests {
    static func run(_ input: [[UInt8]], settings: H2ServerSettings = H2ServerSettings()) throws -> Snapshots {
        let snapshots = Snapshots()
        let connection = H2ServerConnection(output: { _ in }, settings: settings)
        connection.delegate = snapshots
        try connection.start()
        for bytes in [Client.preface + Client.settings] + input { bytes.withUnsafeBytes { connection.receive($0) } }
        #expect(connection.pool.count == 1, "one request object served every stream")
        return snapshots
    }

    static func body(_ n: Int, _ fill: UInt8) -> [UInt8] { (0..<n).map { fill &+ UInt8(truncatingIfNeeded: $0) } }

    @Test("path, headers and body: same lengths written over, shorter or absent ones dropped, chunks in order")
    func reuse() throws {
        let long = "/3/device/" + String(repeating: "ab", count: 32)
        let other = "/3/device/" + String(repeating: "cd", count: 32)
        let s = try Self.run([
            Client.request(1, path: long, extra: [("apns-topic", "t.one"), ("x-a", "1")], end: false)
                + Client.data(1, Self.body(50, 1), end: true),
            Client.request(3, path: other, extra: [("apns-topic", "t.two"), ("x-b", "2")], end: false)
                + Client.data(3, Self.body(50, 100), end: true),
            Client.request(5, path: "/3/device/ef", extra: [("x-c", "3")], end: false)
                + Client.data(5, Self.body(20, 7), end: true),
            Client.request(7, path: "/1/apps/com.x/channels", end: true),
            Client.request(9, end: false) + Client.data(9, Self.body(50, 9), end: true),
            Client.request(11, end: false) + Client.data(11, Self.body(30, 11), end: false)
                + Client.data(11, Self.body(20, 41), end: true),
            Client.request(13, end: false) + Client.data(13, Self.body(50, 13), end: false)
                + Client.data(13, Self.body(10, 63), end: true),
        ])
        #expect(s.taken.count == 7)
        guard s.taken.count == 7 else { return }
        #expect(s.taken.allSatisfy { $0.method == "POST" && !$0.tooLarge })
        #expect(s.taken.map { $0.path } == [long, other, "/3/device/ef", "/1/apps/com.x/channels", "/3/device/aa",
            "/3/device/aa", "/3/device/aa"])
        #expect(
            s.taken.map { $0.headers } == [
                ["apns-topic: t.one", "x-a: 1"], ["apns-topic: t.two", "x-b: 2"], ["x-c: 3"], [], [], [], [],
            ])
        #expect(s.taken[0].body == Self.body(50, 1))
        #expect(s.taken[1].body == Self.body(50, 100), "the same length: written over")
        #expect(s.taken[2].body == Self.body(20, 7), "shorter: the last stream's tail dropped")
        #expect(s.taken[3].body.isEmpty, "no DATA: none of the last stream's body")
        #expect(s.taken[4].body == Self.body(50, 9))
        #expect(s.taken[5].body == Self.body(30, 11) + Self.body(20, 41), "two chunks over a body of their sum")
        #expect(s.taken[6].body == Self.body(50, 13) + Self.body(10, 63), "a first chunk as long as the last body")
    }

    @Test("the body limit holds on a pooled request: kept up to the limit + 1, too large judged by what arrived")
    func limit() throws {
        var settings = H2ServerSettings()
        settings.bodyLimit = 16
        let input: [[UInt8]] = [
            Client.request(1, end: false) + Client.data(1, Self.body(40, 1), end: true),
            Client.request(3, end: false) + Client.data(3, Self.body(17, 50), end: true),
            Client.request(5, end: false) + Client.data(5, Self.body(16, 80), end: true),
            Client.request(7, end: false) + Client.data(7, Self.body(10, 90), end: false)
                + Client.data(7, Self.body(10, 100), end: true),
            Client.request(9, end: true),
        ]
        let s = try Self.run(input, settings: settings)
        #expect(s.taken.count == 5)
        guard s.taken.count == 5 else { return }
        #expect(s.taken.map { $0.body } == [Self.body(17, 1), Self.body(17, 50), Self.body(16, 80),
            Self.body(10, 90) + Self.body(7, 100), []])
        #expect(s.taken.map { $0.tooLarge } == [true, true, false, true, false])
    }
}
