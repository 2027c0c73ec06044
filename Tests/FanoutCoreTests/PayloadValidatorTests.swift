import Testing

@testable import FanoutCore

@Suite("PayloadValidator: every APNs verdict and its boundaries")
struct PayloadValidatorTests {
    static let topic = "com.example.scores.push-type.liveactivity"
    static let bundle = "com.example.scores"

    /// A valid update payload padded with a string field to exactly `size` bytes.
    static func payload(size: Int, pad: String = "x", event: String = "update") -> [UInt8] {
        let head = #"{"aps":{"timestamp":1,"event":"\#(event)","content-state":{}},"p":""#
        let tail = #""}"#
        var bytes = Array(head.utf8)
        let padBytes = Array(pad.utf8)
        while bytes.count + padBytes.count + tail.utf8.count <= size { bytes += padBytes }
        while bytes.count + tail.utf8.count < size { bytes.append(UInt8(ascii: "y")) }
        return bytes + Array(tail.utf8)
    }

    func verdict(
        _ payload: [UInt8], target: TargetKind = .token, bundle: String? = bundle, pushType: String = "liveactivity",
        topic: String = topic, priority: HeaderValue = .integer(10), expiration: HeaderValue = .integer(0),
        collapseId: String? = nil, apnsId: String? = nil
    ) -> RejectReason? {
        var validator = PayloadValidator()
        let bundleBytes = bundle.map { Array($0.utf8) }
        return payload.withUnsafeBytes { p in
            withHeaders(
                pushType: pushType, topic: topic, priority: priority, expiration: expiration,
                collapseId: collapseId, apnsId: apnsId
            ) { headers in
                if let bundleBytes {
                    return bundleBytes.withUnsafeBytes {
                        validator.validate(headers: headers, payload: p, target: target, targetBundle: $0)
                    }
                }
                return validator.validate(headers: headers, payload: p, target: target, targetBundle: nil)
            }
        }
    }

    @Test("4096 bytes pass and 4097 are PayloadTooLarge for token and start-token pushes")
    func tokenLimit() {
        #expect(Self.payload(size: 4096).count == 4096)
        #expect(verdict(Self.payload(size: 4096)) == nil)
        #expect(verdict(Self.payload(size: 4097)) == .payloadTooLarge)
        #expect(verdict(Self.payload(size: 4097, event: "start"), target: .startToken) == .payloadTooLarge)
    }

    @Test("5120 bytes pass and 5121 are PayloadTooLarge for a broadcast")
    func broadcastLimit() {
        #expect(verdict(Self.payload(size: 5120), target: .channel) == nil)
        #expect(verdict(Self.payload(size: 5121), target: .channel) == .payloadTooLarge)
    }

    @Test("the limit counts UTF-8 bytes: multi-byte characters at the boundary")
    func multibyte() {
        let exact = Self.payload(size: 4096, pad: "😀")
        #expect(exact.count == 4096)
        #expect(verdict(exact) == nil)
        var over = Self.payload(size: 4093, pad: "😀")
        over.insert(contentsOf: Array("é中".utf8), at: over.count - 2)  // 4093 + 5 bytes
        #expect(over.count == 4098)
        #expect(verdict(over) == .payloadTooLarge)
    }

    @Test("an empty payload is PayloadEmpty")
    func empty() { #expect(verdict([]) == .payloadEmpty) }

    @Test("push type must be liveactivity")
    func pushType() {
        #expect(verdict(Self.payload(size: 100), pushType: "alert") == .invalidPushType)
        #expect(verdict(Self.payload(size: 100), pushType: "LiveActivity") == .invalidPushType)
    }

    @Test("topic without the suffix is TopicDisallowed; another app's is BadTopic; unresolved target skips it")
    func topics() {
        #expect(verdict(Self.payload(size: 100), topic: "com.example.scores") == .topicDisallowed)
        #expect(verdict(Self.payload(size: 100), topic: "com.other.push-type.liveactivity") == .badTopic)
        #expect(verdict(Self.payload(size: 100), bundle: nil, topic: "com.other.push-type.liveactivity") == nil)
    }

    @Test("priority: 5 and 10; 1 only on a broadcast; integral numbers only")
    func priorities() {
        let p = Self.payload(size: 100)
        #expect(verdict(p, priority: .integer(5)) == nil)
        #expect(verdict(p, priority: .integer(1)) == .badPriority)
        #expect(verdict(p, target: .channel, priority: .integer(1)) == nil)
        #expect(verdict(p, priority: .integer(7)) == .badPriority)
        #expect(verdict(p, priority: .other) == .badPriority)
        #expect(verdict(p, priority: .null) == .badPriority)
    }

    @Test("collapse id: 64 bytes pass, 65 are BadCollapseId; empty is allowed")
    func collapseId() {
        let p = Self.payload(size: 100)
        #expect(verdict(p, collapseId: String(repeating: "c", count: 64)) == nil)
        #expect(verdict(p, collapseId: String(repeating: "c", count: 65)) == .badCollapseId)
        #expect(verdict(p, collapseId: String(repeating: "é", count: 32)) == nil)
        #expect(verdict(p, collapseId: String(repeating: "é", count: 32) + "c") == .badCollapseId)
        #expect(verdict(p, collapseId: "") == nil)
    }

    @Test("apns-id must be a canonical UUID, either case")
    func apnsId() {
        let p = Self.payload(size: 100)
        #expect(verdict(p, apnsId: "123e4567-e89b-12d3-a456-426614174000") == nil)
        #expect(verdict(p, apnsId: "123E4567-E89B-12D3-A456-426614174000") == nil)
        #expect(verdict(p, apnsId: "123e4567e89b12d3a456426614174000") == .badMessageId)
        #expect(verdict(p, apnsId: "123e4567-e89b-12d3-a456-42661417400g") == .badMessageId)
    }

    @Test("expiration: integral and ≥ 0; 0 on a broadcast")
    func expiration() {
        let p = Self.payload(size: 100)
        #expect(verdict(p, expiration: .integer(1_700_000_000)) == nil)
        #expect(verdict(p, expiration: .integer(-1)) == .badExpirationDate)
        #expect(verdict(p, expiration: .other) == .badExpirationDate)
        #expect(verdict(p, target: .channel, expiration: .integer(5)) == .badExpirationDate)
    }

    @Test(
        "payload structure: BadRequestPayload",
        arguments: [
            #"{"aps":{"timestamp":1,"event":"update"}} x"#, #"{"aps":{"timestamp":NaN,"event":"update"}}"#,
            #"[{"aps":{}}]"#, #"{"aps":[]}"#, #"{"aps":{"timestamp":1}}"#, #"{"aps":{"event":"update"}}"#,
            #"{"aps":{"timestamp":1,"event":"refresh"}}"#, #"{"aps":{"timestamp":"1","event":"update"}}"#,
            #"{"aps":{"timestamp":1.5,"event":"update"}}"#, #"{"aps":{"timestamp":true,"event":"update"}}"#,
            #"{"aps":{"timestamp":1,"event":"start"}}"#, #"{"noaps":{}}"#, #"{"aps":{"timestamp":1e19,"event":"end"}}"#,
        ])
    func badPayload(text: String) {
        #expect(verdict(Array(text.utf8)) == .badRequestPayload)
    }

    @Test(
        "accepted payload structure",
        arguments: [
            #"{"aps":{"timestamp":1700000000.0,"event":"update"}}"#, #"{"aps":{"timestamp":1,"event":"end"},"x":[1]}"#,
            #"{"aps":{"timestamp":1,"ev\u0065nt":"update"}}"#,
            #"{"aps":{"event":"bogus","timestamp":1,"event":"end"}}"#,
        ])
    func goodPayload(text: String) {
        #expect(verdict(Array(text.utf8)) == nil)
    }

    @Test("start only to a start token; update and end only to a token or channel")
    func eventFitsTarget() {
        let start = Array(#"{"aps":{"timestamp":1,"event":"start"}}"#.utf8)
        let update = Array(#"{"aps":{"timestamp":1,"event":"update"}}"#.utf8)
        #expect(verdict(start, target: .startToken) == nil)
        #expect(verdict(start, target: .channel) == .badRequestPayload)
        #expect(verdict(update, target: .startToken) == .badRequestPayload)
        #expect(verdict(update, target: .channel) == nil)
    }

    @Test("the first failing check wins, in APNs order")
    func order() {
        let big = Self.payload(size: 4097)
        #expect(verdict(big, pushType: "x", topic: "bad", priority: .integer(3)) == .payloadTooLarge)
        #expect(verdict([], pushType: "x") == .payloadEmpty)
        #expect(verdict(Array("nonsense".utf8), pushType: "x", topic: "bad") == .invalidPushType)
        #expect(verdict(Array("nonsense".utf8), topic: "bad", priority: .integer(3)) == .topicDisallowed)
        #expect(verdict(Array("nonsense".utf8), topic: "o.push-type.liveactivity", priority: .integer(3)) == .badTopic)
        #expect(
            verdict(Array("nonsense".utf8), priority: .integer(3), collapseId: String(repeating: "c", count: 65))
                == .badPriority)
        #expect(
            verdict(Array("nonsense".utf8), expiration: .integer(-1), collapseId: String(repeating: "c", count: 65))
                == .badCollapseId)
        #expect(verdict(Array("nonsense".utf8), expiration: .integer(-1), apnsId: "x") == .badMessageId)
        #expect(verdict(Array("nonsense".utf8), expiration: .integer(-1)) == .badExpirationDate)
        #expect(verdict(Array("nonsense".utf8)) == .badRequestPayload)
    }

    @Test("token well-formedness: non-empty, even length, hex either case")
    func tokens() {
        for (token, ok) in [
            ("aa01", true), ("AbCd", true), ("", false), ("abc", false), ("zz", false),
            (String(repeating: "ab", count: 80), true),
        ] {
            let bytes = Array(token.utf8)
            #expect(bytes.withUnsafeBytes { PayloadValidator.isWellFormedToken($0) } == ok, "\(token)")
        }
    }
}
