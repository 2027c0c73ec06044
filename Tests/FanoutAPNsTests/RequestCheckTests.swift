import Foundation
import FanoutCore
@testable import FanoutAPNs
import Testing

@Suite("RequestCheck: method, path and headers in docs/INGEST.md's order")
struct RequestCheckTests {
    func route(_ method: String, _ path: String) -> Result<APNsRoute, APNsReason> {
        RequestCheck.route(method: Array(method.utf8), path: Array(path.utf8))
    }

    @Test("paths and methods of §2; anything else is BadPath or MethodNotAllowed")
    func routes() {
        #expect(route("POST", "/3/device/ab12") == .success(.push(token: Array("ab12".utf8)[...])))
        #expect(route("POST", "/4/broadcasts/apps/com.x") == .success(.broadcast(bundle: Array("com.x".utf8))))
        #expect(route("POST", "/1/apps/com.x/channels") == .success(.createChannel(bundle: Array("com.x".utf8))))
        #expect(route("GET", "/1/apps/com.x/channels") == .success(.readChannel(bundle: Array("com.x".utf8))))
        #expect(route("DELETE", "/1/apps/com.x/channels") == .success(.deleteChannel(bundle: Array("com.x".utf8))))
        #expect(route("GET", "/1/apps/com.x/all-channels") == .success(.listChannels(bundle: Array("com.x".utf8))))
        #expect(route("PUT", "/3/device/ab12") == .failure(.methodNotAllowed))
        #expect(route("PUT", "/nowhere") == .failure(.methodNotAllowed))
        #expect(route("GET", "/3/device/ab12") == .failure(.methodNotAllowed))
        #expect(route("DELETE", "/1/apps/com.x/all-channels") == .failure(.methodNotAllowed))
        #expect(route("GET", "/4/broadcasts/apps/com.x") == .failure(.methodNotAllowed))
        #expect(route("POST", "/3/device/") == .failure(.missingDeviceToken))
        #expect(route("POST", "/3/device") == .failure(.missingDeviceToken))
        #expect(route("POST", "/4/broadcasts/apps/") == .failure(.badPath))
        #expect(route("POST", "/2/device/ab") == .failure(.badPath))
        #expect(route("GET", "/") == .failure(.badPath))
    }

    func headers(_ list: [(String, String)], body: Int = 10, broadcast: Bool = false) -> APNsReason? {
        let h = list.map { (name: Array($0.0.utf8), value: Array($0.1.utf8)) }
        let r: APNsRoute = broadcast ? .broadcast(bundle: Array("com.x".utf8)) : .push(token: Array("ab12".utf8)[...])
        if case .failure(let reason) = RequestCheck.headers(route: r, headers: h, bodyCount: body) { return reason }
        return nil
    }

    @Test("each header rule, and the first failing rule wins")
    func headerRules() {
        let type = ("apns-push-type", "liveactivity")
        let topic = ("apns-topic", "com.x.push-type.liveactivity")
        #expect(headers([type, topic]) == nil)
        #expect(headers([("apns-push-type", "LiveActivity"), topic]) == nil, "push type without regard to case")
        #expect(headers([type, topic], body: 0) == .payloadEmpty)
        #expect(headers([type, topic], body: 4096) == nil)
        #expect(headers([type, topic], body: 4097) == .payloadTooLarge)
        #expect(headers([topic]) == .invalidPushType)
        #expect(headers([("apns-push-type", "telepathy"), topic]) == .invalidPushType)
        #expect(headers([("apns-push-type", "alert"), ("apns-topic", "com.x")]) == nil, "another valid push type")
        #expect(headers([type]) == .missingTopic)
        #expect(headers([type, ("apns-topic", "com.x")]) == .topicDisallowed)
        for p in ["5", "10"] { #expect(headers([type, topic, ("apns-priority", p)]) == nil) }
        for p in ["1", "7", "x", "10.0", ""] { #expect(headers([type, topic, ("apns-priority", p)]) == .badPriority) }
        #expect(headers([type, topic, ("apns-collapse-id", String(repeating: "c", count: 64))]) == nil)
        #expect(headers([type, topic, ("apns-collapse-id", String(repeating: "c", count: 65))]) == .badCollapseId)
        #expect(headers([type, topic, ("apns-id", "123E4567-e89b-12d3-a456-426614174000")]) == nil)
        #expect(headers([type, topic, ("apns-id", "123e4567e89b12d3a456426614174000")]) == .badMessageId)
        #expect(headers([type, topic, ("apns-expiration", "0")]) == nil)
        for e in ["-1", "1.5", "soon", ""] { #expect(headers([type, topic, ("apns-expiration", e)]) == .badExpirationDate) }
        // Several faults: the earliest row answers.
        #expect(headers([("apns-priority", "7")], body: 0) == .payloadEmpty)
        #expect(headers([("apns-priority", "7")]) == .invalidPushType)
        #expect(headers([type, ("apns-priority", "7"), ("apns-id", "x")]) == .missingTopic)
        #expect(headers([type, topic, ("apns-priority", "7"), ("apns-id", "x")]) == .badPriority)
    }

    @Test("broadcasts: 5120 bytes, push type required and Live Activity only, priority 1, channel id in base64")
    func broadcastRules() {
        let base = [
            ("apns-push-type", "liveactivity"), ("apns-priority", "1"), ("apns-expiration", "0"),
            ("apns-channel-id", "c291cmNlLTAwMDAx"),
        ]
        #expect(headers(base, broadcast: true) == nil)
        #expect(headers(base, body: 5120, broadcast: true) == nil)
        #expect(headers(base, body: 5121, broadcast: true) == .payloadTooLarge)
        #expect(headers(Array(base.dropFirst()), broadcast: true) == .missingPushType)
        #expect(headers([("apns-push-type", "alert")] + base.dropFirst(), broadcast: true) == .invalidPushType)
        #expect(headers(base.filter { $0.0 != "apns-priority" }, broadcast: true) == .badPriority)
        #expect(headers(base.filter { $0.0 != "apns-expiration" }, broadcast: true) == .badExpirationDate)
        #expect(headers(base.filter { $0.0 != "apns-channel-id" }, broadcast: true) == .missingChannelId)
        #expect(headers(Array(base.dropLast()) + [("apns-channel-id", "a*b")], broadcast: true) == .badChannelId)
    }

    @Test("a header sent twice")
    func duplicates() {
        let a = (name: Array("apns-topic".utf8), value: Array("x".utf8))
        let b = (name: Array("apns-id".utf8), value: Array("y".utf8))
        #expect(!RequestCheck.hasDuplicates([a, b]))
        #expect(RequestCheck.hasDuplicates([a, b, a]))
    }

    @Test("base64 and base64url round trips; malformed text is refused")
    func base64() {
        var state: UInt64 = 7
        for n in 0..<200 {
            var bytes: [UInt8] = []
            for _ in 0..<n {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                bytes.append(UInt8(truncatingIfNeeded: state >> 33))
            }
            let text = Base64.encode(bytes)
            #expect(Base64.decode(Array(text.utf8)) == bytes)
            let url = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(Base64.decode(Array(url.utf8), url: true) == bytes)
        }
        #expect(Base64.encode(Array("source-00001".utf8)) == "c291cmNlLTAwMDAx")
        for bad in ["a", "ab=c", "abc==", "ab\n", "a===", "QQ=x"] { #expect(Base64.decode(Array(bad.utf8)) == nil, "\(bad)") }
        #expect(Base64.decode(Array("QR==".utf8)) == nil, "non-zero trailing bits")
    }

    @Test("a canonical UUID: 8-4-4-4-12 hex digits of either case; any other byte anywhere, or another length, is not")
    func canonicalUUID() {
        let valid = Array("123E4567-e89b-12d3-A456-426614174fAf".utf8)
        #expect(RequestCheck.isCanonicalUUID(valid) && RequestCheck.isCanonicalUUID(valid[...]))
        let hex = Set("0123456789abcdefABCDEF".utf8)
        // Every byte value at every position, judged against the rule written out plainly.
        for i in 0..<36 {
            for b in 0...255 {
                var id = valid
                id[i] = UInt8(b)
                let expected = [8, 13, 18, 23].contains(i) ? b == 0x2D : hex.contains(UInt8(b))
                #expect(RequestCheck.isCanonicalUUID(id) == expected, "byte \(b) at \(i)")
            }
        }
        #expect(!RequestCheck.isCanonicalUUID(valid.dropLast()) && !RequestCheck.isCanonicalUUID(valid + [0x30]))
        #expect(!RequestCheck.isCanonicalUUID([UInt8]()))
    }

    @Test("which id an answer echoes is decided by the path alone: apns-id under /3/, apns-request-id elsewhere")
    func tokenPushPath() {
        for path in ["/3/device/0123abcd", "/3/", "/3/anything"] {
            #expect(RequestCheck.isTokenPushPath(Array(path.utf8)), "\(path)")
        }
        for path in ["/4/broadcasts/apps/com.example", "/1/apps/com.example/channels", "/3x/device/ab", "/3", "", "3/d"] {
            #expect(!RequestCheck.isTokenPushPath(Array(path.utf8)), "\(path)")
        }
    }

    @Test("APNs's error answer: the reason's status, {\"reason\"} (and the 410's timestamp), JSON, the id echoed")
    func errorAnswer() {
        let plain = APNsService.errorAnswer(.duplicateHeaders, id: nil)
        #expect(plain.status == 400 && plain.id == nil)
        #expect(String(decoding: plain.body, as: UTF8.self) == #"{"reason":"DuplicateHeaders"}"#)
        #expect(plain.headers.map(\.name) == ["content-type"] && plain.headers.map(\.value) == ["application/json"])
        let gone = APNsService.errorAnswer(.unregistered, id: nil, timestamp: 1_700_000_000_000)
        #expect(gone.status == 410)
        #expect(String(decoding: gone.body, as: UTF8.self) == #"{"reason":"Unregistered","timestamp":1700000000000}"#)
    }

    @Test("generated ids: version-4 UUIDs in canonical lowercase text (FanoutCore's UUIDText), all distinct")
    func generatedIds() {
        var ids = UUIDGenerator()
        var seen = Set<String>()
        for _ in 0..<1_000 {
            let id = ids.make("apns-id")
            let text = id.value
            #expect(RequestCheck.isCanonicalUUID(Array(text.utf8)) && text == text.lowercased(), "\(text)")
            let bytes = Array(text.utf8)
            #expect(bytes[14] == UInt8(ascii: "4") && "89ab".utf8.contains(bytes[19]), "\(text): version 4, variant 10")
            #expect(UUID(uuidString: text)?.uuidString.lowercased() == text)
            seen.insert(text)
        }
        #expect(seen.count == 1_000)
    }
}
