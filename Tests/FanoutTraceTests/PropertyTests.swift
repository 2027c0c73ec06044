import FanoutCore
import Foundation
import Testing

@testable import FanoutTrace

/// Random operation streams: whatever happens, every count adds up and replay is deterministic.
@Suite("Replay properties")
struct PropertyTests {
    /// A random but valid trace: requests, start tokens, pushes (valid and faulty), rotations,
    /// subscriptions and dismissals over a few simulated hours.
    static func randomTrace(seed: UInt64, lines: Int) -> String {
        var g = TraceRandom(seed: seed)
        func pick<T>(_ items: [T]) -> T { items[Int(g.next() % UInt64(items.count))] }
        var out = [
            #"{"trace":1,"epoch":1700000000,"schemas":{"S":{"n":"int","s":"string?","d":"double"}},"limits":{"perApp":2,"perDevice":3},"budgetPerHour":3}"#
        ]
        var at = 0
        var activities: [(id: String, app: String, token: String)] = []
        var tokenCounter = 0
        func newToken() -> String {
            tokenCounter += 1
            return String(format: "%08x", tokenCounter)
        }
        let apps = ["com.a", "com.b"]
        for i in 0..<lines {
            at += Int(g.next() % 600_000)
            let r = g.next() % 100
            let ts = 1_700_000_000 + at / 1000 + Int(g.next() % 5) - 2
            let content = pick([#"{"n":1,"d":0.5}"#, #"{"n":2,"s":"é\"","d":1}"#, #"{"n":3.5,"d":1}"#, #"{"d":1}"#])
            let event = pick(["update", "update", "update", "end"])
            var aps =
                #"{"timestamp":\#(ts),"event":"\#(event)","content-state":\#(content),"relevance-score":\#(g.next() % 3 * 10)"#
            if g.next() % 4 == 0 { aps += #","stale-date":\#(1_700_000_000 + at / 1000 + Int(g.next() % 7200))"# }
            if g.next() % 4 == 0 { aps += #","dismissal-date":\#(1_700_000_000 + at / 1000 + Int(g.next() % 20000))"# }
            aps += "}"
            var payload = #"{"aps":\#(aps)}"#
            if g.next() % 20 == 0 {
                payload = pick(["{", "", #"{"aps":{"event":"update"}}"#, String(repeating: " ", count: 4100) + "{}"])
            }
            let payloadJSON = String(
                data: try! JSONSerialization.data(withJSONObject: payload, options: .fragmentsAllowed), encoding: .utf8)!
            let app = pick(apps)
            let priority = pick([5, 10, 10, 1])
            if r < 20 || activities.isEmpty {
                let id = "a\(i)"
                let token = newToken()
                let channel = g.next() % 2 == 0 ? #""ch\#(g.next() % 3)""# : "null"
                out.append(
                    #"{"at":\#(at),"op":"request","device":"d\#(g.next() % 6)","app":"\#(app)","activity":"\#(id)","type":"S","attributes":{},"state":{"n":0,"d":0},"staleDate":null,"relevance":\#(g.next() % 3),"token":"\#(token)","channel":\#(channel)}"#
                )
                activities.append((id, app, token))
            } else if r < 55 {
                let a = pick(activities)
                let token = g.next() % 10 == 0 ? newToken() : a.token
                out.append(
                    #"{"at":\#(at),"op":"push","token":"\#(token)","pushType":"liveactivity","topic":"\#(pick(apps)).push-type.liveactivity","priority":\#(priority),"expiration":0,"collapseId":null,"apnsId":null,"payload":\#(payloadJSON)}"#
                )
            } else if r < 70 {
                out.append(
                    #"{"at":\#(at),"op":"push","channel":"ch\#(g.next() % 4)","pushType":"liveactivity","topic":"\#(app).push-type.liveactivity","priority":\#(priority),"expiration":0,"collapseId":null,"apnsId":null,"payload":\#(payloadJSON)}"#
                )
            } else if r < 75 {
                out.append(
                    #"{"at":\#(at),"op":"startToken","device":"d\#(g.next() % 6)","app":"\#(app)","token":"\#(String(format: "ff%06x", i))"}"#
                )
            } else if r < 82 {
                let start =
                    #"{"aps":{"timestamp":\#(ts),"event":"start","content-state":\#(content),"attributes-type":"S","attributes":{},"alert":{"title":"t","body":"b"},"input-push-channel":"ch1"}}"#
                let startJSON = String(
                    data: try! JSONSerialization.data(withJSONObject: start, options: .fragmentsAllowed),
                    encoding: .utf8)!
                let token = newToken()
                out.append(
                    #"{"at":\#(at),"op":"push","startToken":"\#(String(format: "ff%06x", Int(g.next() % UInt64(i + 1))))","pushType":"liveactivity","topic":"\#(app).push-type.liveactivity","priority":10,"expiration":0,"collapseId":null,"apnsId":null,"payload":\#(startJSON),"newActivity":"s\#(i)","newToken":"\#(token)"}"#
                )
                activities.append(("s\(i)", app, token))  // may not exist if the start fails: pushes then route as Unregistered
            } else if r < 88 {
                let index = Int(g.next() % UInt64(activities.count))
                let token = newToken()
                out.append(#"{"at":\#(at),"op":"rotate","activity":"\#(activities[index].id)","token":"\#(token)"}"#)
                activities[index].token = token
            } else if r < 93 {
                out.append(
                    #"{"at":\#(at),"op":"subscribe","activity":"\#(pick(activities).id)","channel":"ch\#(g.next() % 4)"}"#
                )
            } else if r < 97 {
                out.append(#"{"at":\#(at),"op":"dismiss","activity":"\#(pick(activities).id)"}"#)
            } else {
                out.append(#"{"at":\#(at),"op":"advance"}"#)
            }
        }
        return out.joined(separator: "\n")
    }

    @Test("DOMAIN §6: every count adds up under random operation streams", arguments: 1...12)
    func identities(seed: UInt64) throws {
        let replay = try TraceReplay.replay(text: Self.randomTrace(seed: seed, lines: 400))
        let pipeline = replay.pipeline!
        let a = pipeline.accounting
        #expect(a.identitiesHold)
        #expect(a.pushes == a.rejectedTotal + a.unroutableTotal + a.routed)
        #expect(a.deliveries == a.outcomesTotal)
        #expect(a.pushes > 100 && a.routed > 0 && a.rejectedTotal > 0)
        // Per-activity outcomes account for every delivery except failed push-to-starts.
        var perActivity = 0
        for id in 0..<Int32(pipeline.store.activityCount) {
            for outcome in Outcome.allCases { perActivity += pipeline.store.outcomeCount(outcome, for: id) }
        }
        #expect(perActivity == a.deliveries - a[.limitExceeded] - failedStarts(replay))
    }

    /// Failed push-to-starts: decodeFailed outcomes that belong to no activity.
    func failedStarts(_ replay: TraceReplay) -> Int {
        let store = replay.pipeline!.store
        var decodeFailedOnActivities = 0
        for id in 0..<Int32(store.activityCount) {
            decodeFailedOnActivities += store.outcomeCount(.decodeFailed, for: id)
        }
        return replay.pipeline!.accounting[.decodeFailed] - decodeFailedOnActivities
    }

    @Test("replay is deterministic: the same trace gives the same dump, byte for byte")
    func deterministic() throws {
        let text = Self.randomTrace(seed: 99, lines: 600)
        let first = try TraceReplay.replay(text: text)
        let second = try TraceReplay.replay(text: text)
        #expect(
            StateDump.render(first.pipeline!, nowMillis: first.nowMillis)
                == StateDump.render(second.pipeline!, nowMillis: second.nowMillis))
    }
}

/// SplitMix64: a small deterministic generator for random traces.
struct TraceRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
