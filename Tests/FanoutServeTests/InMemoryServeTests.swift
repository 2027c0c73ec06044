@testable import FanoutAPNs
@testable import FanoutServe
import FanoutSim
import FanoutWire
import Foundation
import Testing

/// The in-memory harness the serve fuzz target drives: the real `APNsServer` delegate on two event loops in a
/// cluster, provider tokens checked, a client's HTTP/2 bytes in and the server's out.
@Suite("InMemoryServe: the real server delegate in memory, two workers, provider tokens")
struct InMemoryServeTests {
    // Years before the real clock: a token issued then is expired unless the harness's fixed clock is used.
    static let now: Int64 = 1_700_000_000

    // MARK: A client's bytes (HPACK literals without indexing, no Huffman)

    static func frame(type: UInt8, flags: UInt8, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags]
            + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)]
            + payload
    }

    /// An HPACK string length (7-bit prefix, RFC 7541 §5.1).
    static func length(_ value: Int) -> [UInt8] {
        guard value >= 127 else { return [UInt8(value)] }
        var out: [UInt8] = [127]
        var rest = value - 127
        while rest >= 128 {
            out.append(UInt8(rest % 128 + 128))
            rest /= 128
        }
        out.append(UInt8(rest))
        return out
    }

    static func literal(_ name: String, _ value: [UInt8]) -> [UInt8] {
        [0x00] + length(name.utf8.count) + Array(name.utf8) + length(value.count) + value
    }

    /// The preface, an empty SETTINGS, then a POST on stream 1 (HEADERS, then the body in DATA).
    static func post(path: String, headers: [(String, [UInt8])], body: [UInt8]) -> [UInt8] {
        var block = literal(":method", Array("POST".utf8)) + literal(":path", Array(path.utf8))
        block += literal(":scheme", Array("https".utf8)) + literal(":authority", Array("localhost".utf8))
        for (name, value) in headers { block += literal(name, value) }
        return Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + frame(type: 4, flags: 0, stream: 0, [])
            + frame(type: 1, flags: 0x4, stream: 1, block) + frame(type: 0, flags: 0x1, stream: 1, body)
    }

    // MARK: The server's bytes

    struct Frame {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: ArraySlice<UInt8>
    }

    static func frames(_ bytes: [UInt8]) -> [Frame] {
        var out: [Frame] = []
        var i = 0
        while i + 9 <= bytes.count {
            let n = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            let stream = bytes[(i + 5)..<(i + 9)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF
            guard i + 9 + n <= bytes.count else { break }
            let payload = bytes[(i + 9)..<(i + 9 + n)]
            out.append(Frame(type: bytes[i + 3], flags: bytes[i + 4], stream: stream, payload: payload))
            i += 9 + n
        }
        return out
    }

    /// SETTINGS_MAX_CONCURRENT_STREAMS values the server advertised, in order.
    static func streamLimits(_ frames: [Frame]) -> [UInt32] {
        var out: [UInt32] = []
        for f in frames where f.type == 4 && f.flags & 1 == 0 {
            var i = f.payload.startIndex
            while i + 6 <= f.payload.endIndex {
                let id = UInt16(f.payload[i]) << 8 | UInt16(f.payload[i + 1])
                let value = f.payload[(i + 2)..<(i + 6)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                if id == 3 { out.append(value) }
                i += 6
            }
        }
        return out
    }

    final class Output {
        var bytes: [UInt8] = []
    }

    // MARK: The setup

    struct Setup {
        var serve: InMemoryServe
        var keys: ProviderAuthTests.Keys
        var services: [APNsService] { serve.servers.map(\.service) }
    }

    static func setup() throws -> Setup {
        let keys = try ProviderAuthTests.makeKeys()
        let pem = Array(try Data(contentsOf: URL(fileURLWithPath: keys.path("a.pub"))))
        let auth = ProviderAuth(team: "TEAM000001", keys: ["KEYA": ProviderKey(try ES256Key(pem: pem, name: "a"))])
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 40
        let services = (0..<2).map { k in
            APNsService(scenario: s, auth: auth, nowSeconds: now, worker: k, of: 2) { 0 }
        }
        return Setup(serve: try InMemoryServe(services: services, wallMillis: now * 1000), keys: keys)
    }

    /// The update token of the service's first activity of com.example.scores.
    static func token(of service: APNsService) throws -> String {
        for line in service.populationLines().split(separator: UInt8(ascii: "\n")) {
            let row = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
            if row["app"] as? String == "com.example.scores", let token = row["token"] as? String { return token }
        }
        throw ProviderAuthTests.CLIError(description: "no com.example.scores activity")
    }

    /// A broadcast channel of the population (one that has subscribers).
    static func channel(of service: APNsService) throws -> String {
        for line in service.populationLines().split(separator: UInt8(ascii: "\n")) {
            let row = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
            if row["app"] as? String == "com.example.scores", let channel = row["channel"] as? String { return channel }
        }
        throw ProviderAuthTests.CLIError(description: "no channel")
    }

    static let payload = Array(
        (#"{"aps":{"event":"update","timestamp":1800000001,"content-state":{"home":1,"away":0,"clock":"1:00","#
            + #""winProbability":0.5,"final":false,"lastEvent":"x"}}}"#).utf8)

    static func push(_ token: String, authorization: [UInt8]) -> [UInt8] {
        post(
            path: "/3/device/\(token)",
            headers: [
                ("authorization", authorization), ("apns-push-type", Array("liveactivity".utf8)),
                ("apns-topic", Array("com.example.scores.push-type.liveactivity".utf8)),
            ],
            body: payload)
    }

    // MARK: Tests

    @Test("a push with a valid token, arriving at worker 0, is judged by worker 1 (its owner) and answered 200")
    func forwardedAcrossLoops() throws {
        let setup = try Self.setup()
        let serve = setup.serve
        defer { try? serve.close() }
        let token = try Self.token(of: setup.services[1])
        #expect(serve.cluster?.directory.owner(Array(token.utf8)[...]) == 1)
        let good = try ProviderAuthTests.token(setup.keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now)")
        let output = Output()
        let connection = try serve.open(on: 0) { output.bytes.append(contentsOf: $0) }
        Self.push(token, authorization: good).withUnsafeBytes { connection.receive($0) }
        #expect(connection.requestsReceived == 1)
        #expect(serve.forwardedWaiting == 1, "sent to worker 1, not answered yet")
        #expect(serve.settle() >= 1)
        #expect(serve.forwardedWaiting == 0)
        #expect(setup.services[0].stats.requests == 0, "judged by the owner only")
        #expect(setup.services[1].stats.requests == 1)
        #expect(setup.services[1].stats.acceptedPushes == 1)
        #expect(setup.services[1].stats.byStatus[200] == 1)
        let frames = Self.frames(output.bytes)
        let answer = try #require(frames.first { $0.type == 1 && $0.stream == 1 })
        #expect(answer.payload.first == 0x88, ":status 200 (HPACK static index 8)")
        #expect(Self.streamLimits(frames) == [1, 1000], "one stream until the first valid token, then the limit")
        connection.abort(reason: "done")
        #expect(serve.openConnections == 0)
        #expect(serve.servers[0].connectionStats[.accepted] == 1)
        #expect(serve.servers[0].connectionStats[.closed] == 1)
        #expect(serve.identitiesHold)
    }

    @Test("a tampered token is answered 403 InvalidProviderToken where it arrives, and nothing is forwarded")
    func badToken() throws {
        let setup = try Self.setup()
        let serve = setup.serve
        defer { try? serve.close() }
        let token = try Self.token(of: setup.services[1])
        var bad = try ProviderAuthTests.token(setup.keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now)")
        bad[bad.count - 5] = bad[bad.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let output = Output()
        let connection = try serve.open(on: 0) { output.bytes.append(contentsOf: $0) }
        Self.push(token, authorization: bad).withUnsafeBytes { connection.receive($0) }
        #expect(serve.forwardedWaiting == 0)
        #expect(serve.settle() == 0, "no message between the workers")
        #expect(setup.services[0].stats.byStatus[403] == 1)
        #expect(setup.services[0].stats.byReason[.invalidProviderToken] == 1)
        #expect(setup.services[1].stats.requests == 0)
        let frames = Self.frames(output.bytes)
        let answer = try #require(frames.first { $0.type == 1 && $0.stream == 1 })
        #expect(answer.payload.first != 0x88, "not 200")
        let body = frames.filter { $0.type == 0 && $0.stream == 1 }.flatMap(\.payload)
        #expect(String(decoding: body, as: UTF8.self) == #"{"reason":"InvalidProviderToken"}"#)
        #expect(Self.streamLimits(frames) == [1], "the stream limit stays at one")
        #expect(serve.identitiesHold)
    }

    @Test("a broadcast answered on a connection that then ends in the same read (a frame too large) is fanned out")
    func broadcastThenProtocolError() throws {
        let setup = try Self.setup()
        let serve = setup.serve
        defer { try? serve.close() }
        let good = try ProviderAuthTests.token(setup.keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now)")
        let broadcast = Self.post(
            path: "/4/broadcasts/apps/com.example.scores",
            headers: [
                ("authorization", good), ("apns-channel-id", Array(try Self.channel(of: setup.services[0]).utf8)),
                ("apns-push-type", Array("LiveActivity".utf8)), ("apns-priority", Array("10".utf8)),
                ("apns-expiration", Array("0".utf8)),
            ],
            body: Self.payload)
        // A frame header declaring 20,000 bytes (more than SETTINGS_MAX_FRAME_SIZE): FRAME_SIZE_ERROR, GOAWAY.
        let tooLarge: [UInt8] = [0x00, 0x4E, 0x20, 0x79, 0, 0, 0, 0, 3]
        let connection = try serve.open(on: 0) { _ in }
        (broadcast + tooLarge).withUnsafeBytes { connection.receive($0) }
        #expect(serve.openConnections == 0, "ended by the protocol error")
        #expect(connection.endReason?.hasPrefix("protocol error") == true, "\(connection.endReason ?? "")")
        #expect(setup.services[0].stats.acceptedBroadcasts == 1)
        #expect(setup.services[0].pendingFanouts == 0, "fanned out when the connection ended")
        serve.settle()
        #expect(setup.services[1].pendingFanouts == 0)
        let deliveries = setup.services.map(\.pipeline.accounting.deliveries)
        #expect(deliveries[0] > 0 && deliveries[1] > 0, "both workers' subscribers: \(deliveries)")
        #expect(serve.identitiesHold)
    }
}
