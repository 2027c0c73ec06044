import FanoutCore
import FanoutMetrics
@testable import FanoutAPNs
@testable import FanoutReport
@testable import FanoutServe
import FanoutSim
import Foundation
import Testing

/// The channel API's state stays that of the live channels (create/delete churn leaves nothing behind, on every
/// worker), broadcasts answered before a deletion still reach their subscribers, and each bound is answered and
/// counted.
@Suite("Channels: deletion removes, churn is bounded, the API's caps")
struct ChannelTests {
    typealias T = APNsServiceTests
    static let create = [("apns-push-type", "LiveActivity")]
    static let body = Array(#"{"message-storage-policy": 1, "push-type": "LiveActivity"}"#.utf8)

    static func service(worker: Int = 0, of workers: Int = 1) -> APNsService {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 60
        final class Ticks: @unchecked Sendable { var t: UInt64 = 0 }
        let ticks = Ticks()
        return APNsService(scenario: s, auth: nil, nowSeconds: T.now, worker: worker, of: workers) {
            ticks.t += 1000
            return ticks.t
        }
    }

    static func make(_ service: APNsService, _ bundle: String = "com.example.new") -> (Int, String?) {
        let answer = T.ask(service, path: "/1/apps/\(bundle)/channels", create, body)
        return (answer.status, answer.header("apns-channel-id"))
    }

    static func delete(_ service: APNsService, _ id: String, _ bundle: String = "com.example.new") -> Int {
        T.ask(service, "DELETE", path: "/1/apps/\(bundle)/channels", [("apns-channel-id", id)]).status
    }

    /// Everything the channel registry and the router keep, to compare before and after churn.
    struct Sizes: Equatable {
        var channels, bundles, routerLive, routerIds, arenaBytes, subscriberLists, subscriptions, apps: Int
        init(_ s: APNsService) {
            channels = s.channels.count
            bundles = s.channelOrder.count
            let router = s.pipeline.router
            routerLive = router.liveChannelCount
            routerIds = router.channels.count
            arenaBytes = router.channels.arenaBytes
            subscriberLists = router.subscribers.count
            subscriptions = router.subscriptionCount
            apps = s.pipeline.store.appIds.count
        }
    }

    @Test("2,000 create/delete cycles (one and then 50 channels at a time) leave the state as it was")
    func churnLeavesNothing() {
        let service = Self.service()
        // The first channel of a new bundle interns the bundle and a router id for good: the baseline.
        let (status, first) = Self.make(service)
        #expect(status == 201 && Self.delete(service, first!) == 204)
        let baseline = Sizes(service)
        for _ in 0..<1_000 {
            let (made, id) = Self.make(service)
            #expect(made == 201 && Self.delete(service, id!) == 204)
        }
        #expect(Sizes(service) == baseline)
        for _ in 0..<20 {
            let ids = (0..<50).map { _ in Self.make(service).1! }
            #expect(service.channels.count == baseline.channels + 50)
            #expect(ids.allSatisfy { Self.delete(service, $0) == 204 })
        }
        var after = Sizes(service)
        #expect(after.routerIds == baseline.routerIds + 49, "ids follow the most channels held at once")
        #expect(after.arenaBytes == baseline.arenaBytes + 49 * 24)
        #expect(after.subscriberLists == baseline.subscriberLists + 49)
        (after.routerIds, after.arenaBytes, after.subscriberLists) =
            (baseline.routerIds, baseline.arenaBytes, baseline.subscriberLists)
        #expect(after == baseline)
        #expect(service.stats.identitiesHold && service.stats.channelRequests == 2 + 2_000 + 2_000)
    }

    @Test("a channel deleted on worker 0 is removed on worker 1 too (registry and router)")
    func deletionReplicated() {
        let zero = Self.service(worker: 0, of: 2)
        let one = Self.service(worker: 1, of: 2)
        func relay() {
            for message in zero.takeOutgoing() {
                guard case .channel(let raw, let bundle, let policy, let deleted) = message else { continue }
                one.channelChanged(raw, bundle: bundle, storagePolicy: policy, deleted: deleted)
            }
        }
        let (_, first) = Self.make(zero)
        relay()
        #expect(one.channels.count == zero.channels.count)
        #expect(Self.delete(zero, first!) == 204)
        relay()
        let baseline = Sizes(one)
        for _ in 0..<500 {
            let (_, id) = Self.make(zero)
            relay()
            let raw = Base64.decode(Array(id!.utf8))!
            #expect(raw.withUnsafeBytes { one.pipeline.router.channels.lookup($0) } != nil)
            #expect(Self.delete(zero, id!) == 204)
            relay()
            #expect(raw.withUnsafeBytes { one.pipeline.router.channels.lookup($0) } == nil && one.channels[raw] == nil)
        }
        #expect(Sizes(one) == baseline)
        #expect(zero.channels.count == one.channels.count && zero.channelOrder.count == one.channelOrder.count)
        #expect(zero.pipeline.router.liveChannelCount == one.pipeline.router.liveChannelCount)
    }

    @Test("a broadcast answered before its channel's deletion reaches the subscribers; the id is reused only after")
    func pendingFanoutOutlivesDeletion() {
        let service = Self.service()
        let population = T.population(service)
        let p = population.first { $0["channel"] is String }!
        let channel = p["channel"] as! String
        let app = p["app"] as! String
        let subscribers = population.filter { $0["channel"] as? String == channel }.map { $0["activity"] as! String }
        let raw = Base64.decode(Array(channel.utf8))!
        let c = raw.withUnsafeBytes { service.pipeline.router.channels.lookup($0) }!
        let live = service.pipeline.router.liveChannelCount
        let headers = [
            ("apns-channel-id", channel), ("apns-push-type", "LiveActivity"), ("apns-priority", "10"),
            ("apns-expiration", "0"),
        ]
        let path = "/4/broadcasts/apps/\(app)"
        #expect(T.ask(service, path: path, headers, T.payload(T.now + 3)).status == 200)
        #expect(Self.delete(service, channel, app) == 204)
        #expect(T.ask(service, path: path, headers, T.payload(T.now + 4)).body == #"{"reason":"ChannelNotRegistered"}"#)
        // While the fan-out is pending, the deleted channel's router id is not handed to a new channel (one of
        // the same length: a router id goes to the next channel id of its length).
        func register(_ byte: String) -> Int32 {
            let other = [UInt8](repeating: UInt8(ascii: Unicode.Scalar(byte)!), count: raw.count)
            return other.withUnsafeBytes { service.pipeline.router.registerChannel($0, app: 0) }
        }
        #expect(register("y") != c)
        #expect(service.pendingFanouts == 1)
        service.runPendingFanouts(wallMillis: T.now * 1000 + 6000)
        let a = service.pipeline.accounting
        #expect(a.deliveries == subscribers.count && a.outcomesTotal == subscribers.count && a.identitiesHold)
        service.closeInterval()
        #expect(service.measurements.totals[serve: .fanout].totalCount == 1)
        // Then it leaves the router: its subscribers belong to no channel, and the next channel takes its id.
        #expect(service.pipeline.router.liveChannelCount == live)
        #expect(raw.withUnsafeBytes { service.pipeline.router.channels.lookup($0) } == nil)
        let store = service.pipeline.store
        for id in subscribers {
            let activity = store.activityIds.lookup(id)!
            #expect(store.channel[Int(activity)] == ActivityStore.none)
        }
        #expect(register("z") == c)
        #expect(service.pipeline.router.subscribers[Int(c)].isEmpty)
    }

    @Test("the API bundle cap: the next new bundle is answered CannotCreateChannelConfig and counted")
    func bundleCap() {
        let service = Self.service()
        service.channelLimits.apiBundles = 3
        let apps = service.pipeline.store.appIds.count
        var ids: [String] = []
        for k in 0..<3 {
            let (status, id) = Self.make(service, "com.example.b\(k)")
            #expect(status == 201)
            ids.append(id!)
        }
        let refused = T.ask(service, path: "/1/apps/com.example.b3/channels", Self.create, Self.body)
        #expect(refused.status == 400 && refused.body == #"{"reason":"CannotCreateChannelConfig"}"#)
        #expect(service.stats.channelRefusals.bundles == 1 && service.stats.byReason[.cannotCreateChannelConfig] == 1)
        #expect(service.pipeline.store.appIds.count == apps + 3, "a refused bundle is not interned")
        // Bundles already counted, and the population's own apps, are not refused.
        #expect(Self.make(service, "com.example.b1").0 == 201)
        #expect(Self.make(service, "com.example.scores").0 == 201)
        // A bundle counts once, even after its last channel is deleted.
        #expect(Self.delete(service, ids[0], "com.example.b0") == 204)
        #expect(Self.make(service, "com.example.b0").0 == 201)
        #expect(Self.make(service, "com.example.b4").0 == 400)
        #expect(service.stats.channelRefusals.bundles == 2 && service.stats.channelRefusals.perApp == 0)
        #expect(service.stats.identitiesHold)
    }

    @Test("all-channels lists live channels only, at most the listed-channel cap (the first created), cut counted")
    func listCap() throws {
        let service = Self.service()
        service.channelLimits.listedChannels = 5
        func list() throws -> [String] {
            let answer = T.ask(service, "GET", path: "/1/apps/com.example.new/all-channels", [])
            #expect(answer.status == 200 && answer.header("content-type") == "application/json")
            #expect(answer.body.utf8.count <= 16 + 5 * (APNsService.channelIdBase64Count + 3))
            let object = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as! [String: [String]]
            return object["channels"]!
        }
        let ids = (0..<8).map { _ in Self.make(service).1! }
        #expect(try list() == Array(ids[0..<5]) && service.stats.channelRefusals.listsCut == 1)
        for id in ids[0..<2] { #expect(Self.delete(service, id) == 204) }
        #expect(try list() == Array(ids[2..<7]) && service.stats.channelRefusals.listsCut == 2)
        for id in ids[2..<5] { #expect(Self.delete(service, id) == 204) }
        #expect(try list() == Array(ids[5..<8]) && service.stats.channelRefusals.listsCut == 2, "not cut: not counted")
        for id in ids[5..<8] { #expect(Self.delete(service, id) == 204) }
        #expect(try list() == [] && service.channelOrder[Array("com.example.new".utf8)] == nil)
    }

    @Test("channel ids made through the API have one length (so a new one reuses a deleted one's bytes)")
    func channelIds() {
        #expect(APNsService.channelId(1) == Array("fanout-ch-00000000000001".utf8))
        #expect(APNsService.channelId(123_456_789) == Array("fanout-ch-00000123456789".utf8))
        #expect(Base64.encode(APNsService.channelId(99)).count == APNsService.channelIdBase64Count)
    }

    @Test("the summary counts each channel bound hit (summary.json and summary.md)")
    func summaryCounts() throws {
        var s = ServeStats()
        s.channelRefusals = .init(perApp: 1, bundles: 2, listsCut: 3)
        let info = ServeReport.Info(
            scenario: "smoke", seed: 7, listen: "127.0.0.1:2197", transport: "h2c", auth: "none",
            startedAt: "2026-11-24T10:00:00Z", gitRevision: "0123456789ab")
        let text = try ServeReport.summaryJSON(info, s, LatencyRecorder(metricCount: ServeMetric.allCases.count), Accounting(), ConnectionStats(), (0, 0), 1)
        let json = try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
        let limits = (json["requests"] as! [String: Any])["channelLimits"] as? [String: Int]
        #expect(limits == ["perAppRefused": 1, "apiBundlesRefused": 2, "listsCut": 3])
        let md = ServeReport.summaryMarkdown(
            info, s, LatencyRecorder(metricCount: ServeMetric.allCases.count), Accounting(), ConnectionStats(), (0, 0), 1)
        #expect(md.contains("1 creates over 10,000 per app, 2 over the API bundle cap, 3 all-channels answers cut"))
    }
}
