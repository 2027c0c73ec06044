import FanoutCore
@testable import FanoutAPNs
@testable import FanoutReport
@testable import FanoutServe
import FanoutMetrics
import FanoutSim
import Foundation
import Testing

/// `--expect-events` with `--faults`: every missing (event, follower) pair named by its reason — the fault that
/// refused its push (or its broadcast) when nothing resent it, the service's rejection, the device's verdict, or
/// never pushed — and the refused, never resent pushes reconciled with the pairs they carried (docs/INGEST.md §5).
@Suite("Serve events: missing deliveries by reason, refused pushes reconciled (in memory, two event loops)")
struct ServeMissingReasonsTests {
    typealias M = InMemoryServeTests
    typealias E = ServeEventsTests

    static let pushHeaders: [(String, [UInt8])] = [
        ("apns-push-type", Array("liveactivity".utf8)), ("apns-priority", Array("5".utf8)),
        ("apns-topic", Array("com.example.scores.push-type.liveactivity".utf8)),
    ]

    @Test("refused 503 / reset never resent, a broadcast refused, a rejected push, a superseded refusal: by reason")
    func reasons() throws {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 60
        s.faults.rotationShare = 0
        s.faults.outOfOrderShare = 0
        let clock = E.Clock()
        let services = (0..<2).map { k in
            APNsService(scenario: s, auth: nil, nowSeconds: E.now, worker: k, of: 2) { clock.nanos }
        }
        let events = ServeEvents.expect(services: services)
        events.t0Nanos = 1_000_000_000
        var options = ServeOptions()
        try ServeFaults.parseFaults("503=50%,reset=50%", into: &options.faults)  // every request refused
        options.faults.seed = 11
        let serve = try InMemoryServe(services: services, options: options, wallMillis: E.now * 1000)
        defer { try? serve.close() }
        let world = services[0].engine.world
        let rows = services.flatMap { E.rows($0) }
        func source(_ row: [String: Any]) -> Int { Int((row["source"] as! String).dropFirst("source-".count))! }
        // Token followers of the scores app on either loop, each of a different source with two events or more.
        var seen = Set<Int>()
        let followers = rows.filter { row in
            let src = source(row)
            guard !world.sourceIsBroadcast[src], world.sourceApp[src] == 0, events.events(of: src).count >= 2
            else { return false }
            return seen.insert(src).inserted
        }
        try #require(followers.count >= 7)
        #expect(Set(followers.prefix(6).map { $0["loop"] as! Int }).count == 2, "tokens of both loops")
        let b = try #require(
            (0..<events.followers.count).first { src in
                world.sourceIsBroadcast[src] && world.sourceApp[src] == 0 && !events.events(of: src).isEmpty
                    && events.followers[src] >= 2
            })
        let bRow = try #require(rows.first { source($0) == b })
        // Everything is due: the judge looks after the last event.
        clock.nanos = events.t0Nanos + events.offsetNanos.max()! + 1_000_000_000
        let faults = serve.servers[0].faults
        var kinds: [Int] = []  // per request sent through loop 0: the refusing fault's kind (0: 503, 3: reset)
        var tape = JSONTape()
        func send(_ path: String, _ headers: [(String, [UInt8])], _ body: [UInt8]) throws {
            // Each request sent once: attempt 0 of its identity (token or channel, aps.timestamp).
            let input = RequestInput(
                method: "POST", path: path, headers: headers.map { ($0.0, String(decoding: $0.1, as: UTF8.self)) },
                body: body)
            let key = try #require(ServeFaults.identity(input, tape: &tape))
            let fault = try #require(faults.fault(forDraw: faults.faultDraw(key: key, attempt: 0)))
            kinds.append(ServeFaults.Fault.reset == fault ? 3 : 0)
            let c = try serve.open(on: 0) { _ in }
            M.post(path: path, headers: headers, body: body).withUnsafeBytes { c.receive($0) }
            serve.settle()
        }
        func first(_ row: [String: Any], rank: Int = 0) -> Int { Int(Array(events.events(of: source(row)))[rank]) }
        // 1. Four followers' first events refused (503 or reset, as drawn) through loop 0; nobody resends them.
        for row in followers.prefix(4) {
            try send("/3/device/\(row["token"] as! String)", Self.pushHeaders, E.body(events.timestamp[first(row)]))
        }
        // 2. The fifth's first event refused, then its second delivered (directly): the refused pair is superseded.
        let f5 = followers[4]
        try send("/3/device/\(f5["token"] as! String)", Self.pushHeaders, E.body(events.timestamp[first(f5)]))
        let owner5 = services[f5["loop"] as! Int]
        #expect(E.push(owner5, f5, events.timestamp[first(f5, rank: 1)]) == 200)
        // 3. A broadcast refused: every subscriber of its channel misses that event.
        let channelHeaders: [(String, [UInt8])] = [
            ("apns-channel-id", Array((bRow["channel"] as! String).utf8)),
            ("apns-push-type", Array("liveactivity".utf8)), ("apns-priority", Array("5".utf8)),
            ("apns-expiration", Array("0".utf8)),
        ]
        let eb = Int(events.events(of: b).first!)
        try send("/4/broadcasts/apps/com.example.scores", channelHeaders, E.body(events.timestamp[eb]))
        // 4. A refused push carrying no event's timestamp: unmatched.
        try send("/3/device/\(followers[6]["token"] as! String)", Self.pushHeaders, E.body(12_345))
        // 5. The sixth's first event rejected by the service's checks of its payload, directly on its loop.
        let f6 = followers[5]
        let bad = E.T.payload(events.timestamp[first(f6)], event: "nonsense")
        let owner6 = services[f6["loop"] as! Int]
        let rejected = E.T.ask(owner6, path: "/3/device/\(f6["token"] as! String)", E.headers, bad)
        #expect(rejected.status == 400)
        serve.advance(toNanos: 1)
        let refusals = try #require(serve.cluster).retries.final.unresent  // one ledger for both loops
        #expect(refusals.count == 7 && refusals.filter(\.broadcast).count == 1)
        let r = try #require(ServeEventsReport.judge(services: services, nowNanos: clock.nanos, refusals: refusals))
        let reason503 = ServeEventsReport.refusedReason(kind: 0, broadcast: false)
        let reasonReset = ServeEventsReport.refusedReason(kind: 3, broadcast: false)
        let n503 = kinds.prefix(4).filter { $0 == 0 }.count
        #expect(r.missingByReason[reason503, default: 0] == n503, "\(r.missingByReason)")
        #expect(r.missingByReason[reasonReset, default: 0] == 4 - n503, "\(r.missingByReason)")
        let bReason = ServeEventsReport.refusedReason(kind: kinds[5], broadcast: true)
        #expect(r.missingByReason[bReason] == Int(events.followers[b]), "every subscriber, on both loops")
        #expect(r.missingByReason["pushed, rejected by the service (BadRequestPayload)"] == 1)
        #expect(r.missingByReason[ServeEventsReport.neverPushed, default: 0] > 0)
        #expect(r.missing == r.missingByReason.values.reduce(0, +) && r.reasonsAddUp)
        // Per event too (events-judged.jsonl): the broadcast's event is missing on every subscriber for its refusal,
        // and each event's reasons add up to its missing.
        #expect(r.perEvent.missingReasons(eb)[bReason] == events.followers[b])
        #expect(r.perEvent.missing.indices.allSatisfy {
            r.perEvent.missingReasons($0).values.reduce(0, +) == r.perEvent.missing[$0]
        })
        let judged = ServeReport.eventsJudged(r).split(separator: "\n")
        #expect(judged[eb].contains("\"missingByReason\": {\"\(bReason)\": \(events.followers[b])"), "\(judged[eb])")
        // Reconciled: 6 token pushes and a broadcast never resent; 4 + the subscribers missing, 1 superseded.
        let f = r.refusals
        #expect(f.pushes == 6 && f.broadcasts == 1 && f.unmatched == 1, "\(f)")
        #expect(f.missing == 4 + Int(events.followers[b]) && f.superseded == 1 && f.delivered == 0 && f.notDue == 0)
        #expect(f.pairs == f.missing + f.superseded && f.addsUp)
        #expect(r.identitiesHold)
        // The examples name the follower and its event.
        let example = try #require(r.missingReasonExamples[n503 > 0 ? reason503 : reasonReset]?.first)
        #expect(example.contains("activity ") && example.contains("timestamp "))
        let rejectedReason = "pushed, rejected by the service (BadRequestPayload)"
        let rejectedExample = try #require(r.missingReasonExamples[rejectedReason])
        #expect(rejectedExample == [
            "activity \(f6["activity"] as! String) (\(f6["source"] as! String)) "
                + "\(events.kind[first(f6)] == 1 ? "end" : "update") timestamp "
                + "\(events.timestamp[first(f6)]) (intended at +\(events.offsetNanos[first(f6)] / 1_000_000) ms)"
        ])
        // Without the refusals the same pairs are "never pushed": the reason comes from them.
        let blind = try #require(ServeEventsReport.judge(services: services, nowNanos: clock.nanos))
        #expect(blind.missingByReason[reason503] == nil && blind.missingByReason[reasonReset] == nil)
        #expect(blind.missing == r.missing && blind.reasonsAddUp)
    }
}
