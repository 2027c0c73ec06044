@testable import FanoutCore
import Testing

/// The validator's tape keeps offsets, not a pointer to the payload: `deliver` decodes from the bytes its
/// caller passes, so a payload's memory is read only inside the scope that lends it.
@Suite("Payload lifetime: the tape reads the bytes it is given, never remembered ones")
struct PayloadLifetimeTests {
    static let bundle = Array("com.example.game".utf8)
    static let topic = Array("com.example.game.push-type.liveactivity".utf8)
    static let token = Array("aa01".utf8)
    static let nowMillis: Int64 = 1_800_000_000_000

    static func pipeline() -> (Pipeline, Int32) {
        var schemas = SchemaSet()
        schemas.add(ContentSchema(name: "Score", fields: [.init(name: "home", type: .int), .init(name: "away", type: .int)]))
        let p = Pipeline(schemas: schemas, rules: DeviceRules())
        var record: [UInt8] = []
        ContentRecord.appendInt(0, to: &record)
        ContentRecord.appendInt(0, to: &record)
        let a = requestActivity(
            p, id: "act-1", device: "dev-1", bundle: bundle, token: token, record: record, nowMillis: nowMillis)
        return (p, a!)
    }

    static func withHeaders<R>(_ body: (PushHeaders) -> R) -> R {
        Array("liveactivity".utf8).withUnsafeBytes { pushType in
            topic.withUnsafeBytes { t in
                body(PushHeaders(pushType: .string(pushType), topic: .string(t), priority: .integer(10), expiration: .integer(0)))
            }
        }
    }

    static func content(_ p: Pipeline, _ a: Int32) -> [UInt8] { p.store.withContent(a) { Array($0) } }

    @Test("deliver decodes from the payload it is passed, after the validated buffer was overwritten")
    func decodesFromPassedBytes() {
        let (p, a) = Self.pipeline()
        let text = #"{"aps":{"event":"update","timestamp":1800000001,"content-state":{"home":3,"away":1}}}"#
        var sent = Array(text.utf8)
        var flight = Self.token.withUnsafeBytes { p.begin(kind: .token, target: $0) }
        let rejected = sent.withUnsafeBytes { payload in
            Self.withHeaders { p.validate(&flight, headers: $0, payload: payload) }
        }
        #expect(rejected == nil)
        guard case .routed = p.route(&flight) else {
            Issue.record("not routed")
            return
        }
        // The validated buffer is gone (here: overwritten with other JSON of the same length); the device
        // decodes from a copy of the original bytes that the caller holds now.
        let copy = Array(text.utf8)  // its own buffer: `sent` stays uniquely referenced, overwritten in place
        sent.withUnsafeMutableBytes { bytes in
            for i in bytes.indices { bytes[i] = UInt8(ascii: " ") }
            bytes[0] = UInt8(ascii: "0")
        }
        let outcome = copy.withUnsafeBytes { p.deliver(flight, payload: $0, to: a, nowMillis: Self.nowMillis) }
        #expect(outcome == .applied)
        var expected: [UInt8] = []
        ContentRecord.appendInt(3, to: &expected)
        ContentRecord.appendInt(1, to: &expected)
        #expect(Self.content(p, a) == expected)
    }

    @Test("a tape read with bytes of another length than it scanned stops at once")
    func lengthChecked() async {
        await #expect(processExitsWith: .failure) {
            var tape = JSONTape()
            let scanned = Array(#"{"a":1}"#.utf8)
            _ = scanned.withUnsafeBytes { tape.scan($0) }
            let other = Array(#"{"a":12}"#.utf8)
            _ = other.withUnsafeBytes { tape.reading($0).int64(2) }
        }
    }
}

/// Starts activity `id` of `device` for app `bundle` with `token` and the content `record` (schema 0, no channel):
/// `Pipeline.request` with every argument's bytes lent.
func requestActivity(
    _ p: Pipeline, id: String, device: String, bundle: [UInt8], token: [UInt8], record: [UInt8], nowMillis: Int64
) -> Int32? {
    Array(id.utf8).withUnsafeBytes { id in
        Array(device.utf8).withUnsafeBytes { device in
            bundle.withUnsafeBytes { app in
                token.withUnsafeBytes { tok in
                    record.withUnsafeBytes { content in
                        p.request(
                            id: id, device: device, app: app, schema: 0, content: content, staleDate: nil,
                            relevance: 0, token: tok, channel: nil, nowMillis: nowMillis)
                    }
                }
            }
        }
    }
}
