import FanoutCore
@testable import FanoutAPNs
@testable import FanoutServe
import FanoutSim
import Foundation
import Testing

/// The service without sockets: a small population, requests judged and applied.
@Suite("APNsService: verdicts, the devices behind them, channels, measurements")
struct APNsServiceTests {
    static let now: Int64 = 1_800_000_000

    static func service(rotation: Double = 0.3) -> APNsService {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 60
        s.faults.rotationShare = rotation
        // A clock that advances 1 µs per read (the service's measurements need no wall clock).
        final class Ticks: @unchecked Sendable { var t: UInt64 = 0 }
        let ticks = Ticks()
        return APNsService(scenario: s, auth: nil, nowSeconds: now) {
            ticks.t += 1000
            return ticks.t
        }
    }

    static func population(_ service: APNsService) -> [[String: Any]] {
        String(decoding: service.populationLines(), as: UTF8.self).split(separator: "\n").map {
            try! JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
    }

    static func payload(_ ts: Int64, event: String = "update", extra: String = "") -> [UInt8] {
        Array(
            (#"{"aps":{"event":"\#(event)","timestamp":\#(ts),\#(extra)"content-state":{"home":1,"away":0,"# +
                #""clock":"1:00","winProbability":0.5,"final":false,"lastEvent":"kick-off"}}}"#).utf8)
    }

    static func ask(
        _ service: APNsService, _ method: String = "POST", path: String, _ headers: [(String, String)],
        _ body: [UInt8] = []
    ) -> H2ResponseView {
        var became = false
        let r = service.handle(
            RequestInput(method: method, path: path, headers: headers, body: body), auth: ProviderAuth.ConnectionState(),
            wallMillis: now * 1000 + 5000, becameAuthenticated: &became)
        return H2ResponseView(status: r.status, headers: r.allHeaders, body: String(decoding: r.body, as: UTF8.self))
    }

    struct H2ResponseView {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: String
        func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
    }

    static let scoresHeaders = [
        ("apns-push-type", "liveactivity"), ("apns-topic", "com.example.scores.push-type.liveactivity"),
    ]

    @Test("an update is answered 200 with a generated apns-id and applied; a retry is a duplicate the device ignores")
    func updateApplied() {
        let service = Self.service()
        let p = Self.population(service).first { $0["app"] as! String == "com.example.scores" }!
        let path = "/3/device/\(p["token"] as! String)"
        let answer = Self.ask(service, path: path, Self.scoresHeaders, Self.payload(Self.now + 1))
        #expect(answer.status == 200 && answer.body.isEmpty)
        #expect(answer.header("apns-id").map { RequestCheck.isCanonicalUUID(Array($0.utf8)) } == true)
        // Version 4, variant 10 (RFC 9562): the 13th hex digit is 4, the 17th one of 8, 9, a, b.
        let id = Array(answer.header("apns-id") ?? "")
        #expect(id.count == 36 && id[14] == "4" && "89ab".contains(id[19]))
        _ = Self.ask(service, path: path, Self.scoresHeaders, Self.payload(Self.now + 1))
        let a = service.pipeline.accounting
        #expect(a[.applied] == 1 && a[.ignoredStaleTimestamp] == 1 && a.identitiesHold)
        #expect(service.stats.findings[.staleTimestamp] == 1)
        service.closeInterval()
        let latency = service.measurements.totals
        #expect(latency[serve: .delivery].totalCount == 2 && latency[serve: .validate].totalCount == 2)
        #expect(service.stats.identitiesHold && service.stats.requests == 2)
    }

    @Test("rotated tokens answer 410 with the time they stopped; never-issued ones 400; another app's 400")
    func tokens() {
        let service = Self.service()
        let rotated = String(decoding: service.rotatedTokenLines(), as: UTF8.self).split(separator: "\n")
        #expect(!rotated.isEmpty)
        let old = try! JSONSerialization.jsonObject(with: Data(rotated[0].utf8)) as! [String: Any]
        let activity = old["activity"] as! String
        let current = Self.population(service).first { $0["activity"] as! String == activity }!
        #expect(current["token"] as! String != old["token"] as! String)
        let topic = "\(current["app"] as! String).push-type.liveactivity"
        let headers = [("apns-push-type", "liveactivity"), ("apns-topic", topic)]
        let gone = Self.ask(service, path: "/3/device/\(old["token"] as! String)", headers, Self.payload(Self.now))
        #expect(gone.status == 410)
        #expect(gone.body == #"{"reason":"Unregistered","timestamp":\#(Self.now * 1000)}"#)
        let fresh = Self.ask(service, path: "/3/device/\(current["token"] as! String)", headers, Self.payload(Self.now))
        #expect(fresh.status == 200)
        let unknown = Self.ask(service, path: "/3/device/" + String(repeating: "0f", count: 80), headers, Self.payload(1))
        #expect(unknown.status == 400 && unknown.body == #"{"reason":"BadDeviceToken"}"#, "160 hex digits are fine")
        let other = current["app"] as! String == "com.example.scores" ? "com.example.deliveries" : "com.example.scores"
        let wrong = Self.ask(
            service, path: "/3/device/\(current["token"] as! String)",
            [("apns-push-type", "liveactivity"), ("apns-topic", "\(other).push-type.liveactivity")], Self.payload(1))
        #expect(wrong.body == #"{"reason":"DeviceTokenNotForTopic"}"#)
        #expect(service.stats.findings[.rotatedToken] == 1 && service.stats.findings[.wrongTopic] == 1)
    }

    @Test("a push of another push type is answered 200 and reaches no activity")
    func otherPushType() {
        let service = Self.service()
        let p = Self.population(service).first!
        let answer = Self.ask(
            service, path: "/3/device/\(p["token"] as! String)",
            [("apns-push-type", "alert"), ("apns-topic", p["app"] as! String)], Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        #expect(answer.status == 200)
        #expect(service.pipeline.accounting.pushes == 0 && service.stats.acceptedOtherPushTypes == 1)
    }

    @Test("push-to-start creates an activity on the device")
    func pushToStart() {
        let service = Self.service(rotation: 0)
        let p = Self.population(service).first { $0["push-to-start-token"] is String }!
        let before = service.pipeline.store.activityCount
        let app = p["app"] as! String
        let type = p["attributes-type"] as! String
        let extra = #""attributes-type":"\#(type)","attributes":{},"alert":{"title":"t","body":"b"},"#
        var body = Self.payload(Self.now + 10, event: "start", extra: extra)
        if type == "DeliveryAttributes" {
            body = Array(
                (#"{"aps":{"event":"start","timestamp":\#(Self.now + 10),\#(extra)"content-state":{"stage":"out","# +
                    #""etaMinutes":5,"progress":0.5,"courier":null}}}"#).utf8)
        }
        let answer = Self.ask(
            service, path: "/3/device/\(p["push-to-start-token"] as! String)",
            [("apns-push-type", "liveactivity"), ("apns-topic", "\(app).push-type.liveactivity")], body)
        #expect(answer.status == 200)
        let a = service.pipeline.accounting
        #expect(a[.applied] + a[.limitExceeded] == 1)
        #expect(service.pipeline.store.activityCount == before + a[.applied])
    }

    @Test("a broadcast is answered first and fanned out after, to every subscriber")
    func broadcast() {
        let service = Self.service()
        let population = Self.population(service)
        let p = population.first { $0["channel"] is String }!
        let channel = p["channel"] as! String
        let subscribers = population.filter { $0["channel"] as? String == channel }.count
        let answer = Self.ask(
            service, path: "/4/broadcasts/apps/\(p["app"] as! String)",
            [("apns-channel-id", channel), ("apns-push-type", "LiveActivity"), ("apns-priority", "10"),
                ("apns-expiration", "0")], Self.payload(Self.now + 3))
        #expect(answer.status == 200 && answer.header("apns-request-id") != nil && answer.header("apns-unique-id") != nil)
        #expect(service.pipeline.accounting.deliveries == subscribers)
        #expect(service.pipeline.accounting.outcomesTotal == 0, "answered before delivery")
        #expect(service.pendingFanouts == 1)
        service.runPendingFanouts(wallMillis: Self.now * 1000 + 6000)
        #expect(service.pipeline.accounting.outcomesTotal == subscribers && service.pipeline.accounting.identitiesHold)
        service.closeInterval()
        let latency = service.measurements.totals
        #expect(latency[serve: .fanout].totalCount == 1 && latency[serve: .delivery].totalCount == UInt64(subscribers))
    }

    @Test("a request's own apns-id / apns-request-id is echoed byte for byte, on a 200 and on a refusal")
    func ownIdsEchoed() {
        let service = Self.service()
        let population = Self.population(service)
        let p = population.first { $0["app"] as! String == "com.example.scores" && $0["channel"] is NSNull }!
        let ids = ["123E4567-e89b-12D3-a456-426614174000", "00000000-0000-0000-0000-00000000000f"]
        for (k, id) in ids.enumerated() {
            // A newer timestamp each time: both updates are applied, not the second dropped as stale.
            let ok = Self.ask(
                service, path: "/3/device/\(p["token"] as! String)", Self.scoresHeaders + [("apns-id", id)],
                Self.payload(Self.now + 1 + Int64(k)))
            #expect(ok.status == 200 && ok.header("apns-id") == id)
            let unknown = "/3/device/" + String(repeating: "0f", count: 32)
            let refused = Self.ask(
                service, path: unknown, Self.scoresHeaders + [("apns-id", id)], Self.payload(Self.now))
            #expect(refused.status == 400 && refused.header("apns-id") == id)
        }
        #expect(service.pipeline.accounting[.applied] == 2 && service.pipeline.accounting[.ignoredStaleTimestamp] == 0)
        let c = population.first { $0["channel"] is String }!
        let broadcast = Self.ask(
            service, path: "/4/broadcasts/apps/\(c["app"] as! String)",
            [("apns-channel-id", c["channel"] as! String), ("apns-push-type", "LiveActivity"), ("apns-priority", "10"),
                ("apns-expiration", "0"), ("apns-request-id", ids[0])], Self.payload(Self.now + 3))
        #expect(broadcast.status == 200 && broadcast.header("apns-request-id") == ids[0])
        let list = Self.ask(
            service, "GET", path: "/1/apps/com.example.scores/all-channels", [("apns-request-id", ids[1])])
        #expect(list.status == 200 && list.header("apns-request-id") == ids[1])
    }

    @Test("row 13 in its turn: a malformed apns-id is BadMessageId only once rows 6–12 pass, and is never echoed")
    func messageIdInItsTurn() {
        let service = Self.service()
        let p = Self.population(service).first { $0["app"] as! String == "com.example.scores" }!
        let path = "/3/device/\(p["token"] as! String)"
        let body = Self.payload(Self.now + 1)
        let bad = "123e4567e89b12d3a456426614174000"
        let good = "123e4567-e89b-12d3-a456-426614174000"
        let both = Self.ask(service, path: path, Self.scoresHeaders + [("apns-id", bad), ("apns-priority", "7")], body)
        #expect(both.status == 400 && both.body == #"{"reason":"BadPriority"}"#, "row 12 before row 13: \(both.body)")
        #expect(both.header("apns-id") == nil, "a malformed id is not echoed")
        let badId = Self.ask(service, path: path, Self.scoresHeaders + [("apns-id", bad)], body)
        #expect(badId.status == 400 && badId.body == #"{"reason":"BadMessageId"}"# && badId.header("apns-id") == nil)
        let goodId = Self.ask(
            service, path: path, Self.scoresHeaders + [("apns-id", good), ("apns-priority", "7")], body)
        #expect(goodId.status == 400 && goodId.body == #"{"reason":"BadPriority"}"# && goodId.header("apns-id") == good)
        #expect(service.pipeline.accounting[.applied] == 0, "nothing refused was applied")
    }

    @Test("channels: create, read, list, delete, and at most 10,000 per app")
    func channels() {
        let service = Self.service()
        let create = [("apns-push-type", "LiveActivity")]
        let body = Array(#"{"message-storage-policy": 1, "push-type": "LiveActivity"}"#.utf8)
        let made = Self.ask(service, path: "/1/apps/com.example.new/channels", create, body)
        #expect(made.status == 201)
        let id = made.header("apns-channel-id")!
        let read = Self.ask(service, "GET", path: "/1/apps/com.example.new/channels", [("apns-channel-id", id)])
        #expect(read.status == 200 && read.body == #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#)
        let otherApp = Self.ask(service, "GET", path: "/1/apps/com.example.other/channels", [("apns-channel-id", id)])
        #expect(otherApp.body == #"{"reason":"ChannelNotRegistered"}"#)
        for _ in 1..<APNsService.channelsPerApp {
            #expect(Self.ask(service, path: "/1/apps/com.example.new/channels", create, body).status == 201)
        }
        let full = Self.ask(service, path: "/1/apps/com.example.new/channels", create, body)
        #expect(full.body == #"{"reason":"CannotCreateChannelConfig"}"# && service.stats.channelRefusals.perApp == 1)
        #expect(Self.ask(service, "DELETE", path: "/1/apps/com.example.new/channels", [("apns-channel-id", id)]).status == 204)
        #expect(Self.ask(service, path: "/1/apps/com.example.new/channels", create, body).status == 201)
        let list = Self.ask(service, "GET", path: "/1/apps/com.example.new/all-channels", [])
        #expect(list.status == 200 && !list.body.contains("\"\(id)\""))
        #expect(service.stats.identitiesHold)
    }
}
