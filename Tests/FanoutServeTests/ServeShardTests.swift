import FanoutCore
import FanoutMetrics
@testable import FanoutAPNs
@testable import FanoutServe
import FanoutSim
import Foundation
import Testing

/// `fanout serve --shard K/N` without sockets: which devices a shard holds, what it answers for another shard's
/// token, and how a broadcast is applied and counted.
@Suite("serve shards: the device slice, misrouted pushes, broadcasts")
struct ServeShardTests {
    typealias T = APNsServiceTests

    static func scenario() -> Scenario {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 60
        s.faults.rotationShare = 0.3
        return s
    }

    static func service(_ shard: Shard) -> APNsService { service(shard, scenario: scenario()) }

    static func service(_ shard: Shard, scenario s: Scenario) -> APNsService {
        let made = APNsService(scenario: s, auth: nil, nowSeconds: T.now, shard: shard) { 1 }
        if !shard.isWhole { made.foreignTokens = ForeignTokens(world: made.engine.world) }
        return made
    }

    @Test("N shards hold disjoint slices by Shard's hash of the device id; together the whole population, same tokens")
    func slices() throws {
        let whole = T.population(Self.service(.whole))
        let n = 3
        var seen: [String: Int] = [:]
        for k in 0..<n {
            let shard = try Shard(index: k, count: n)
            let lines = T.population(Self.service(shard))
            #expect(!lines.isEmpty && lines.count < whole.count, "shard \(k): \(lines.count) of \(whole.count)")
            for line in lines {
                let device = Array((line["device"] as! String).utf8)
                #expect(device.withUnsafeBytes { shard.contains(deviceId: $0) })
                let key = "\(line["activity"]!) \(line["token"]!) \(line["push-to-start-token"]!)"
                #expect(seen[key] == nil, "\(key) on shards \(seen[key] ?? -1) and \(k)")
                seen[key] = k
            }
        }
        let wholeKeys = Set(whole.map { "\($0["activity"]!) \($0["token"]!) \($0["push-to-start-token"]!)" })
        #expect(Set(seen.keys) == wholeKeys)
    }

    @Test("another shard's token: 400 BadDeviceToken, counted as not this shard's; a never-issued one is not")
    func misrouted() throws {
        let s0 = Self.service(try Shard(index: 0, count: 2))
        let s1 = Self.service(try Shard(index: 1, count: 2))
        let own = T.population(s0).first { $0["app"] as! String == "com.example.scores" }!
        let other = T.population(s1).first { $0["app"] as! String == "com.example.scores" }!
        let payload = T.payload(T.now + 1)
        #expect(T.ask(s0, path: "/3/device/\(own["token"] as! String)", T.scoresHeaders, payload).status == 200)
        let answer = T.ask(s0, path: "/3/device/\(other["token"] as! String)", T.scoresHeaders, payload)
        #expect(answer.status == 400 && answer.body == #"{"reason":"BadDeviceToken"}"#)
        #expect(s0.stats.notThisShard == 1 && s0.stats.findings[.unknownToken] == 0)
        // The other shard's push-to-start token and a token it rotated away at start: not this shard's either.
        let start = other["push-to-start-token"] as! String
        #expect(T.ask(s0, path: "/3/device/\(start)", T.scoresHeaders, payload).status == 400)
        let rotated = String(decoding: s1.rotatedTokenLines(), as: UTF8.self).split(separator: "\n").first
            .map { (try! JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any])["token"] as! String }
        #expect(rotated != nil)
        #expect(T.ask(s0, path: "/3/device/\(rotated ?? "")", T.scoresHeaders, payload).status == 400)
        #expect(s0.stats.notThisShard == 3)
        let unknown = String(repeating: "ab", count: 32)
        #expect(T.ask(s0, path: "/3/device/\(unknown)", T.scoresHeaders, payload).status == 400)
        #expect(s0.stats.notThisShard == 3 && s0.stats.findings[.unknownToken] == 1)
        #expect(s0.stats.identitiesHold && s0.pipeline.accounting.identitiesHold)
        // Every token of shard 1 is foreign to shard 0, none of shard 0's own.
        let foreign = s0.foreignTokens!
        for line in T.population(s1) { #expect(foreign.contains(Array((line["token"] as! String).utf8)[...])) }
        for line in T.population(s0) { #expect(!foreign.contains(Array((line["token"] as! String).utf8)[...])) }
        #expect(Self.service(.whole).foreignTokens == nil)
    }

    @Test("a broadcast reaches each shard's own subscribers; its verdict is counted by one shard, deliveries add up")
    func broadcast() throws {
        let whole = Self.service(.whole)
        let line = T.population(whole).first {
            $0["app"] as! String == "com.example.scores" && $0["channel"] as? String != nil
        }
        let channel = try #require(line?["channel"] as? String)
        let headers = [
            ("apns-channel-id", channel), ("apns-push-type", "LiveActivity"), ("apns-priority", "10"),
            ("apns-expiration", "0"),
        ]
        let path = "/4/broadcasts/apps/com.example.scores"
        func send(_ s: APNsService) -> Int {
            let status = T.ask(s, path: path, headers, T.payload(T.now + 2)).status
            s.runPendingFanouts(wallMillis: T.now * 1000 + 6000)
            return status
        }
        #expect(send(whole) == 200)
        let expected = whole.pipeline.accounting
        #expect(expected.pushes == 1 && expected.routed == 1 && expected.deliveries > 1)
        for n in [2, 3] {
            var total = Accounting()
            var counting = 0
            for k in 0..<n {
                let s = Self.service(try Shard(index: k, count: n))
                #expect(send(s) == 200, "shard \(k)/\(n)")
                let a = s.pipeline.accounting
                #expect(a.identitiesHold)
                if a.pushes > 0 { counting += 1 }
                total += a
            }
            #expect(counting == 1, "\(n) shards")
            #expect(total.pushes == expected.pushes && total.routed == expected.routed)
            #expect(total.deliveries == expected.deliveries && total[.applied] == expected[.applied])
        }
    }
}
