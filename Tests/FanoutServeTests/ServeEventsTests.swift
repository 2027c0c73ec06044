import FanoutCore
import FanoutMetrics
@testable import FanoutAPNs
@testable import FanoutReport
@testable import FanoutServe
import FanoutSim
import Foundation
import Testing

/// `--expect-events`: pushes carrying the events' timestamps, scripted against the service on a clock the test sets,
/// correlated, judged and counted exactly (docs/INGEST.md §5).
@Suite("Serve events: correlation, duplicates, reordered, missing, stale at the end, identities")
struct ServeEventsTests {
    typealias T = APNsServiceTests
    static let now = APNsServiceTests.now

    final class Clock: @unchecked Sendable { var nanos: UInt64 = 0 }

    /// Smoke, 60 devices, no rotation and no out-of-order timestamps (so rank order is schedule order).
    static func setup(devices: Int = 60) -> (APNsService, ServeEvents, Clock) {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = devices
        s.faults.rotationShare = 0
        s.faults.outOfOrderShare = 0
        let clock = Clock()
        let service = APNsService(scenario: s, auth: nil, nowSeconds: now) { clock.nanos }
        let events = ServeEvents.expect(services: [service])
        events.t0Nanos = 1_000_000_000
        return (service, events, clock)
    }

    /// A source of the scores app delivered by `broadcast` (or by token), with at least `followers` followers and
    /// `events` events, and its followers' population rows.
    static func source(
        _ service: APNsService, _ events: ServeEvents, broadcast: Bool, followers: Int = 3, events count: Int = 3
    ) -> (source: Int, rows: [[String: Any]]) {
        let population = T.population(service)
        let world = service.engine.world
        for s in 0..<events.followers.count
        where world.sourceIsBroadcast[s] == broadcast && world.sourceApp[s] == 0
            && Int(events.followers[s]) >= followers && events.events(of: s).count >= count
        {
            let rows = population.filter { $0["source"] as? String == ServeEvents.sourceName(s) }
            return (s, rows)
        }
        preconditionFailure("no such source in the smoke population")
    }

    static let headers = [
        ("apns-push-type", "liveactivity"), ("apns-topic", "com.example.scores.push-type.liveactivity"),
        ("apns-priority", "5"),
    ]

    static func push(_ service: APNsService, _ row: [String: Any], _ timestamp: Int64) -> Int {
        let source = Int((row["source"] as! String).dropFirst("source-".count))!
        return T.ask(
            service, path: "/3/device/\(row["token"] as! String)", headers,
            eventPayload(service, source: source, timestamp: timestamp)
        ).status
    }

    /// The payload of source `s`'s event with `timestamp` as a faithful backend sends it: its kind and the
    /// content-state the trigger carries (`World.makeContent`); `kind` and `change` plant a wrong one. A timestamp
    /// that is no event of `s` gets `T.payload`'s.
    static func eventPayload(
        _ service: APNsService, source s: Int, timestamp: Int64, kind: String? = nil, change: Bool = false
    ) -> [UInt8] {
        let world = service.engine.world
        var schedule = EventSchedule(scenario: world.scenario, world: world)
        while let e = schedule.next() {
            guard e.source == s, e.kind != .offlineWindowEnd, world.timestamp(of: e) == timestamp else { continue }
            let schema = world.appSchema[world.sourceApp[s]]
            var content: [UInt8] = []
            world.makeContent(schema: schema, event: e.index, source: s, final: e.kind == .end, into: &content)
            var json: [UInt8] = []
            content.withUnsafeBytes { world.schemas[schema].appendCompactJSON(record: $0, to: &json) }
            var text = String(decoding: json, as: UTF8.self)
            if change { text = text.replacingOccurrences(of: "\"home\":", with: "\"home\":1") }
            let event = kind ?? (e.kind == .end ? "end" : "update")
            return Array("{\"aps\":{\"event\":\"\(event)\",\"timestamp\":\(timestamp),\"content-state\":\(text)}}".utf8)
        }
        return T.payload(timestamp)
    }

    @Test("the events: the schedule's updates and ends, ranked per source, found by timestamp; million stays small")
    func schedule() {
        let (service, events, _) = Self.setup()
        let world = service.engine.world
        var schedule = EventSchedule(scenario: world.scenario, world: world)
        var sent = 0
        while let e = schedule.next() { if e.kind != .offlineWindowEnd && !world.hasEnded(e) { sent += 1 } }
        #expect(events.count == sent && events.sharedTimestamps == 0)
        #expect(events.offsetNanos == events.offsetNanos.sorted())
        for e in 0..<events.count {
            #expect(events.find(source: Int(events.source[e]), timestamp: events.timestamp[e]) == Int32(e))
        }
        #expect(events.find(source: 0, timestamp: 42) == -1)
        #expect(events.followers.reduce(0, +) == Int32(service.engine.activityCount))
        let ends = (0..<events.count).filter { events.kind[$0] == 1 }
        for e in ends {  // an end is its source's last event
            #expect(events.rank[e] == Int32(events.events(of: Int(events.source[e])).count - 1))
        }
        // million: its events, without building its population (the followers are what the service counts).
        let million = BuiltinScenarios.named("million")!
        let m = ServeEvents(
            world: World(scenario: million), followers: [Int32](repeating: 0, count: million.sources.count))
        #expect(m.count > 4_000 && m.count < 10_000, "\(m.count) events")
        let jsonl = events.jsonl(world: world).split(separator: "\n")
        #expect(jsonl.count == events.count)
        let first = try! JSONSerialization.jsonObject(with: Data(jsonl[0].utf8)) as! [String: Any]
        #expect(first["timestamp"] as? Int == Int(events.timestamp[0]) && first["offsetNanos"] as? Int == Int(events.offsetNanos[0]))
        // The content-state a faithful push of the event carries: the one the judge compares with.
        let content = try! JSONSerialization.data(withJSONObject: ["aps": ["content-state": first["content-state"]!]])
        let expected = Self.eventPayload(
            service, source: Int(events.source[0]), timestamp: events.timestamp[0])
        let parsed = try! JSONSerialization.jsonObject(with: Data(expected)) as! [String: [String: Any]]
        let again = try! JSONSerialization.jsonObject(with: content) as! [String: [String: Any]]
        #expect(NSDictionary(dictionary: parsed["aps"]!["content-state"] as! [String: Any])
            == NSDictionary(dictionary: again["aps"]!["content-state"] as! [String: Any]))
    }

    @Test("scripted pushes: delivered, duplicate, superseded, reordered, not applied, uncorrelated, missing — exact")
    func scripted() throws {
        let (service, events, clock) = Self.setup()
        let (s, rows) = Self.source(service, events, broadcast: false)
        let n = rows.count
        #expect(n == Int(events.followers[s]))
        let list = Array(events.events(of: s))
        let (e0, e1, e2) = (Int(list[0]), Int(list[1]), Int(list[2]))
        let t0 = events.t0Nanos
        let (a, b) = (rows[0], rows[1])
        clock.nanos = t0 + events.offsetNanos[e0] + 5_000_000
        #expect(Self.push(service, a, events.timestamp[e0]) == 200)  // delivered, endToEnd 5 ms
        #expect(Self.push(service, a, events.timestamp[e0]) == 200)  // duplicate
        clock.nanos = t0 + events.offsetNanos[e2] + 7_000_000
        #expect(Self.push(service, a, events.timestamp[e2]) == 200)  // delivered; e1 superseded for a
        #expect(Self.push(service, a, events.timestamp[e1]) == 200)  // reordered
        #expect(Self.push(service, b, events.timestamp[e1]) == 200)  // delivered; e0 superseded for b
        #expect(Self.push(service, b, events.timestamp[e2] + 100_000) == 200)  // uncorrelated, applied
        #expect(Self.push(service, b, events.timestamp[e2]) == 200)  // not applied: stale against the one above
        let t = service.tracker!
        #expect(t.correlated == 6 && t.uncorrelated == 1 && t.early == 0)
        #expect(t.uncorrelatedExamples.count == 1 && t.uncorrelatedExamples[0].contains(ServeEvents.sourceName(s)))
        let r = try #require(ServeEventsReport.judge(services: [service], nowNanos: t0 + events.offsetNanos[e2]))
        #expect(r.horizonNanos == events.offsetNanos[e2])
        let p = r.perEvent
        #expect(p.due[e0] && p.due[e1] && p.due[e2])
        #expect([p.delivered[e0], p.superseded[e0], p.duplicate[e0], p.missing[e0]] == [1, 1, 1, Int32(n - 2)])
        #expect([p.delivered[e1], p.superseded[e1], p.reordered[e1], p.missing[e1]] == [1, 1, 1, Int32(n - 2)])
        #expect([p.delivered[e2], p.notApplied[e2], p.missing[e2]] == [1, 1, Int32(n - 1)])
        #expect(r.correlated == 6 && r.delivered == 3 && r.duplicate == 1 && r.reordered == 1 && r.notApplied == 1)
        #expect(r.uncorrelated == 1 && r.superseded == 2)
        // Every other source's followers got nothing: all their due events are missing.
        var others = 0
        for o in 0..<events.followers.count where o != s {
            let due = events.events(of: o).filter { events.offsetNanos[Int($0)] <= r.horizonNanos }.count
            others += Int(events.followers[o]) * due
        }
        #expect(r.expected == 3 * n + others)
        #expect(r.missing == 3 * n - 5 + others)
        // By reason: b's e2 reached b and was not applied; nothing else missing was ever pushed.
        #expect(r.missingByReason == [
            "pushed, not applied by the device (ignoredStaleTimestamp)": 1,
            ServeEventsReport.neverPushed: 3 * n - 6 + others,
        ])
        #expect(r.missingReasonExamples["pushed, not applied by the device (ignoredStaleTimestamp)"]?.first?.contains(
            b["activity"] as! String) == true)
        #expect(r.identitiesHold)
        #expect(r.completeEvents == 0 && r.eventsWithMissing > 0 && !r.missingExamples.isEmpty)
        // Stale at the end: b (on e1) and every follower of s but a, and every follower of a source with a due event.
        #expect(r.staleExamples.count == ServeStats.examplesPerFinding && r.staleAtEnd >= n - 1)
        service.closeInterval()
        let e2e = service.measurements.totals[serve: .endToEnd]
        #expect(e2e.totalCount == 3)
        // a's e0 at +5 ms, a's e2 at +7 ms, b's e1 at e2's time + 7 ms (the latest), within the histogram's precision.
        let latest = Double(events.offsetNanos[e2] - events.offsetNanos[e1] + 7_000_000)
        #expect(e2e.min >= 4_990_000 && e2e.min <= 5_010_000)
        #expect(abs(Double(e2e.max) - latest) <= latest * 0.001)
    }

    @Test("--settle: an event intended within the settle time before the judge is not due, unless delivered")
    func settle() throws {
        let (service, events, _) = Self.setup()
        let (s, rows) = Self.source(service, events, broadcast: false)
        let list = Array(events.events(of: s))
        let (e0, e1) = (Int(list[0]), Int(list[1]))
        let t0 = events.t0Nanos
        // Judged 1 s after e1's intended time: due with no settle time, not with 2 s (e0 still is, if 2 s before).
        let judgedAt = t0 + events.offsetNanos[e1] + 1_000_000_000
        let plain = try #require(ServeEventsReport.judge(services: [service], nowNanos: judgedAt))
        #expect(plain.perEvent.due[e1])
        let settled = try #require(
            ServeEventsReport.judge(services: [service], nowNanos: judgedAt, settleNanos: 2_000_000_000))
        #expect(!settled.perEvent.due[e1] && settled.settleNanos == 2_000_000_000)
        let e0Settled = events.offsetNanos[e0] + 2_000_000_000 <= events.offsetNanos[e1] + 1_000_000_000
        #expect(settled.perEvent.due[e0] == e0Settled)
        #expect(settled.expected < plain.expected && settled.identitiesHold)
        // A delivered e1 makes it due whatever the settle time: its deliveries have started.
        _ = Self.push(service, rows[0], events.timestamp[e1])
        let delivered = try #require(
            ServeEventsReport.judge(services: [service], nowNanos: judgedAt, settleNanos: 2_000_000_000))
        #expect(delivered.perEvent.due[e1] && delivered.delivered == 1 && delivered.identitiesHold)
    }

    @Test("the identities fail when a count is dropped")
    func identities() throws {
        let (service, events, clock) = Self.setup()
        let (s, rows) = Self.source(service, events, broadcast: false)
        let e0 = Int(events.events(of: s).first!)
        clock.nanos = events.t0Nanos + events.offsetNanos[e0]
        _ = Self.push(service, rows[0], events.timestamp[e0])
        _ = Self.push(service, rows[0], events.timestamp[e0])
        let r = try #require(ServeEventsReport.judge(services: [service], nowNanos: clock.nanos))
        #expect(r.identitiesHold && r.delivered == 1 && r.duplicate == 1 && r.missing > 0)
        var dropped = r
        dropped.missing -= 1
        #expect(!dropped.pairsAddUp && !dropped.identitiesHold)
        dropped = r
        dropped.duplicate -= 1
        #expect(!dropped.deliveriesAddUp && !dropped.identitiesHold)
        dropped = r
        dropped.perEvent.superseded[e0] += 1
        #expect(r.perEventAddsUp && !dropped.perEventAddsUp)
        dropped = r
        dropped.delivered -= 1
        #expect(!dropped.pairsAddUp && !dropped.deliveriesAddUp)
    }

    @Test("a broadcast with an event's timestamp reaches every subscriber: the event completes, its fan-out is timed")
    func broadcast() throws {
        let (service, events, clock) = Self.setup()
        let (s, rows) = Self.source(service, events, broadcast: true, followers: 2, events: 1)
        let e0 = Int(events.events(of: s).first!)
        let channel = rows[0]["channel"] as! String
        clock.nanos = events.t0Nanos + events.offsetNanos[e0] + 2_000_000
        let answer = T.ask(
            service, path: "/4/broadcasts/apps/com.example.scores",
            [("apns-channel-id", channel), ("apns-push-type", "LiveActivity"), ("apns-priority", "5"),
                ("apns-expiration", "0")], Self.eventPayload(service, source: s, timestamp: events.timestamp[e0]))
        #expect(answer.status == 200)
        clock.nanos += 3_000_000
        service.runPendingFanouts(wallMillis: Self.now * 1000 + 6000)
        let r = try #require(ServeEventsReport.judge(services: [service], nowNanos: clock.nanos))
        #expect(r.perEvent.delivered[e0] == events.followers[s] && r.perEvent.missing[e0] == 0)
        #expect(r.delivered == rows.count && r.correlated == rows.count && r.uncorrelated == 0 && r.identitiesHold)
        #expect(r.completeEvents >= 1)
        // Every due event followed by someone is in the completion; those with a missing follower censored at the
        // horizon, this one (complete) at its last follower's apply time: 5 ms after its intended time.
        #expect(r.completion[.fanoutCompletion].totalCount == UInt64(r.completeEvents + r.completionCensored))
        let bucket = Metric.completionBucket(fanout: rows.count)
        #expect(r.completion[bucket].count(at: 5_000_000) >= 1, "the complete event, 5 ms (within the precision)")
        service.closeInterval()
        #expect(service.measurements.totals[serve: .endToEnd].totalCount == UInt64(rows.count))
    }

    @Test("without --expect-events nothing is correlated and the report has no events")
    func off() throws {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 60
        let service = APNsService(scenario: s, auth: nil, nowSeconds: Self.now) { 0 }
        #expect(service.tracker == nil && ServeEventsReport.judge(services: [service], nowNanos: 0) == nil)
        #expect(!ServeReport.metrics(ServeReport.Info(
            scenario: "smoke", seed: 7, listen: "", transport: "h2c", auth: "none", startedAt: "", gitRevision: "")
        ).contains(.endToEnd))
    }
}

/// Two event loops in memory (`InMemoryServe`): a broadcast fans out on both, a token push arriving at loop 0 is
/// applied (and correlated) by the loop owning its device; the judge adds both loops up.
@Suite("Serve events across two event loops (in memory)")
struct ServeEventsTwoLoopsTests {
    typealias M = InMemoryServeTests

    @Test("a broadcast on both loops and a forwarded token push: correlated where applied, judged together")
    func twoLoops() throws {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 40
        s.faults.rotationShare = 0
        let clock = ServeEventsTests.Clock()
        let services = (0..<2).map { k in
            APNsService(scenario: s, auth: nil, nowSeconds: M.now, worker: k, of: 2) { clock.nanos }
        }
        let events = ServeEvents.expect(services: services)
        events.t0Nanos = 500
        let serve = try InMemoryServe(services: services, wallMillis: M.now * 1000)
        defer { try? serve.close() }
        let rows = services.flatMap { ServeEventsTests.rows($0) }
        let world = services[0].engine.world
        // A broadcast source of the scores app followed on both loops, and a token source's follower on loop 1.
        let b = try #require(
            (0..<events.followers.count).first { src in
                world.sourceIsBroadcast[src] && world.sourceApp[src] == 0 && !events.events(of: src).isEmpty
                    && Set(rows.filter { $0["source"] as? String == ServeEvents.sourceName(src) }.map { $0["loop"] as! Int })
                        .count == 2
            })
        let bRows = rows.filter { $0["source"] as? String == ServeEvents.sourceName(b) }
        let eb = Int(events.events(of: b).first!)
        let tRow = try #require(
            rows.first { row in
                let src = Int((row["source"] as! String).dropFirst("source-".count))!
                return row["loop"] as? Int == 1 && !world.sourceIsBroadcast[src] && world.sourceApp[src] == 0
                    && !events.events(of: src).isEmpty
            })
        let tSource = Int((tRow["source"] as! String).dropFirst("source-".count))!
        let et = Int(events.events(of: tSource).first!)
        clock.nanos = 500 + events.offsetNanos[eb] + 1_000_000
        let headers: [(String, [UInt8])] = [
            ("apns-channel-id", Array((bRows[0]["channel"] as! String).utf8)),
            ("apns-push-type", Array("liveactivity".utf8)), ("apns-priority", Array("5".utf8)),
            ("apns-expiration", Array("0".utf8)),
        ]
        let c1 = try serve.open(on: 0) { _ in }
        let broadcast = ServeEventsTests.eventPayload(services[0], source: b, timestamp: events.timestamp[eb])
        M.post(path: "/4/broadcasts/apps/com.example.scores", headers: headers, body: broadcast)
            .withUnsafeBytes { c1.receive($0) }
        serve.settle()
        let c2 = try serve.open(on: 0) { _ in }
        M.post(
            path: "/3/device/\(tRow["token"] as! String)",
            headers: [
                ("apns-push-type", Array("liveactivity".utf8)), ("apns-priority", Array("5".utf8)),
                ("apns-topic", Array("com.example.scores.push-type.liveactivity".utf8)),
            ], body: ServeEventsTests.eventPayload(services[0], source: tSource, timestamp: events.timestamp[et])
        ).withUnsafeBytes { c2.receive($0) }
        serve.settle()
        #expect(services[0].tracker!.correlated + services[1].tracker!.correlated == bRows.count + 1)
        #expect(services[1].tracker!.correlated >= 1, "the token push is correlated by the loop that applied it")
        let r = try #require(ServeEventsReport.judge(services: services, nowNanos: clock.nanos))
        #expect(r.perEvent.delivered[eb] == Int32(bRows.count) && r.perEvent.missing[eb] == 0)
        #expect(r.perEvent.delivered[et] == 1 && r.delivered == bRows.count + 1 && r.uncorrelated == 0)
        #expect(r.identitiesHold && r.completeEvents >= 1)
        #expect(serve.identitiesHold)
    }
}

extension ServeEventsTests {
    /// Population rows with the loop that holds each.
    static func rows(_ service: APNsService) -> [[String: Any]] {
        T.population(service).map {
            var row = $0
            row["loop"] = service.worker
            return row
        }
    }

    /// A payload with `timestamp` and a fixed content-state (not the event's: applied, it is `wrongContent`), for
    /// pushes a test expects refused, rejected or not applied.
    static func body(_ timestamp: Int64) -> [UInt8] { T.payload(timestamp) }
}
