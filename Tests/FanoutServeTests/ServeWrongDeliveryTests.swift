import FanoutCore
import FanoutMetrics
@testable import FanoutAPNs
@testable import FanoutReport
@testable import FanoutServe
import FanoutSim
import Testing

/// `--expect-events` judges what a delivery carried, not only its timestamp: an end for an update (or the reverse)
/// is `wrongKind`, a content-state that drops or changes a field the trigger carried is `wrongContent`; neither is
/// delivered, and the Lock Screen stays behind on them (freshness) until a newer event is applied.
@Suite("Serve events: wrong kind and wrong content")
struct ServeWrongDeliveryTests {
    typealias E = ServeEventsTests
    typealias T = APNsServiceTests

    static func push(_ service: APNsService, _ row: [String: Any], _ body: [UInt8]) -> Int {
        T.ask(service, path: "/3/device/\(row["token"] as! String)", E.headers, body).status
    }

    static func source(_ row: [String: Any]) -> Int { Int((row["source"] as! String).dropFirst("source-".count))! }

    @Test("the right content is delivered; fields the backend adds are its business; a changed field is wrongContent")
    func content() throws {
        let (service, events, clock) = E.setup()
        let (s, rows) = E.source(service, events, broadcast: false, followers: 3, events: 2)
        let e0 = Int(events.events(of: s).first!)
        let stamp = events.timestamp[e0]
        clock.nanos = events.t0Nanos + events.offsetNanos[e0] + 1_000_000
        let right = E.eventPayload(service, source: s, timestamp: stamp)
        #expect(Self.push(service, rows[0], right) == 200)
        // The same content-state with a field the schema does not have: still delivered.
        let text = String(decoding: right, as: UTF8.self)
        let extra = Array(text.replacingOccurrences(of: "\"content-state\":{", with: "\"content-state\":{\"promo\":7,").utf8)
        #expect(extra != right)
        #expect(Self.push(service, rows[1], extra) == 200)
        // A field the trigger carried, changed: applied by the device (APNs accepts it) but wrong.
        let changed = E.eventPayload(service, source: s, timestamp: stamp, change: true)
        #expect(changed != right)
        #expect(Self.push(service, rows[2], changed) == 200)
        let t = service.tracker!
        #expect(t.perEvent.delivered[e0] == 2 && t.perEvent.wrongContent[e0] == 1 && t.perEvent.wrongKind[e0] == 0)
        let r = try #require(ServeEventsReport.judge(services: [service], nowNanos: clock.nanos))
        #expect(r.delivered == 2 && r.wrongContent == 1 && r.wrongShownAtEnd == 1)
        #expect(r.wrongExamples.count == 1 && r.wrongExamples[0].contains(rows[2]["activity"] as! String))
        #expect(r.identitiesHold, "expected = delivered + wrong + superseded + missing; freshness censors the wrong one")
        // endToEnd holds the two right deliveries only.
        service.closeInterval()
        #expect(service.measurements.totals[serve: .endToEnd].totalCount == 2)
    }

    @Test("an end for an update is wrongKind; the Lock Screen is behind on it until a newer event is applied")
    func kind() throws {
        let (service, events, clock) = E.setup()
        let (s, rows) = E.source(service, events, broadcast: false, followers: 2, events: 3)
        let list = Array(events.events(of: s))
        let (e0, e1) = (Int(list[0]), Int(list[1]))
        #expect(events.kind[e0] == 0 && events.kind[e1] == 0, "two updates")
        let t0 = events.t0Nanos
        clock.nanos = t0 + events.offsetNanos[e0] + 1_000_000
        // An update sent as "start" would be refused; an end is accepted and ends the activity: wrongKind.
        let asEnd = E.eventPayload(service, source: s, timestamp: events.timestamp[e0], kind: "end")
        #expect(Self.push(service, rows[0], asEnd) == 200)
        // The other follower gets e0 wrong in content, then e1 right: e0's freshness runs until e1 is applied.
        let wrong = E.eventPayload(service, source: s, timestamp: events.timestamp[e0], change: true)
        #expect(Self.push(service, rows[1], wrong) == 200)
        let fixed = t0 + events.offsetNanos[e1] + 4_000_000
        clock.nanos = fixed
        #expect(E.push(service, rows[1], events.timestamp[e1]) == 200)
        let t = service.tracker!
        #expect(t.perEvent.wrongKind[e0] == 1 && t.perEvent.wrongContent[e0] == 1 && t.perEvent.delivered[e1] == 1)
        #expect(t.lastWrong == t.lastWrong.indices.map { _ in false } || t.lastWrong.filter { $0 }.count == 1)
        let r = try #require(ServeEventsReport.judge(services: [service], nowNanos: fixed))
        #expect(r.wrongKind == 1 && r.wrongContent == 1 && r.wrongShownAtEnd == 1, "the ended one still shows e0")
        #expect(r.identitiesHold)
        // rows[1] was behind on e0 from its intended time until e1 was applied.
        #expect(r.freshness.max >= (fixed - (t0 + events.offsetNanos[e0])) * 999 / 1000)
        // Completion: e0 has a follower still shown wrong, so it is censored (with the events that have missing
        // followers); it is not complete.
        #expect(r.perEvent.delivered[e0] == 0 && r.completionCensored >= 1)
    }

    @Test("serve's verdict fails a run with wrong deliveries by default; the report and summary.json carry them")
    func verdictAndReport() throws {
        let (service, events, clock) = E.setup()
        let (s, rows) = E.source(service, events, broadcast: false, followers: 2, events: 1)
        let e0 = Int(events.events(of: s).first!)
        clock.nanos = events.t0Nanos + events.offsetNanos[e0] + 1_000_000
        let wrong = E.eventPayload(service, source: s, timestamp: events.timestamp[e0], change: true)
        #expect(Self.push(service, rows[0], wrong) == 200)
        let r = try #require(ServeEventsReport.judge(services: [service], nowNanos: clock.nanos))
        let recorder = LatencyRecorder(metricCount: ServeMetric.allCases.count)
        let json = ServeReport.eventsJSON(r, recorder)
        #expect(json["wrongContent"] as? Int == 1 && json["wrongKind"] as? Int == 0)
        let md = ServeReport.eventsMarkdown(r, recorder)
        #expect(md.contains("1 whose content-state dropped or changed a field the trigger carried"))
        var info = ServeResults.Info(
            scenario: "smoke", seed: 1, listen: "127.0.0.1:2197", transport: "h2c", auth: "none",
            startedAt: "2026-11-28T10:00:00Z", gitRevision: "0123456789ab")
        info.events = r
        let names = ServeObjective.defaults(info).map(\.name)
        #expect(names.contains("wrongContent") && names.contains("wrongKind") && names.contains("missing"))
        let measured = try #require(ServeVerdict.measured("wrongContent", info))
        #expect(measured.0 == 1 && measured.1 == r.expected)
    }

    @Test("the expected content's hash is the applied record's: every event of smoke, through its own JSON")
    func hashesAgree() throws {
        let (service, events, _) = E.setup()
        let world = service.engine.world
        var schedule = EventSchedule(scenario: world.scenario, world: world)
        var checked = 0
        var tape = JSONTape()
        var slots: [Int32] = []
        while let e = schedule.next() {
            guard e.kind != .offlineWindowEnd, !world.hasEnded(e) else { continue }
            let k = Int(events.find(source: e.source, timestamp: world.timestamp(of: e)))
            guard k >= 0 else { continue }
            let schema = world.appSchema[world.sourceApp[e.source]]
            var content: [UInt8] = []
            world.makeContent(schema: schema, event: e.index, source: e.source, final: e.kind == .end, into: &content)
            var json: [UInt8] = []
            content.withUnsafeBytes { world.schemas[schema].appendCompactJSON(record: $0, to: &json) }
            // Decoded back from its JSON as a device decodes it: the same record, the same hash.
            var decoded: [UInt8] = []
            let ok = json.withUnsafeBytes { bytes -> Bool in
                guard tape.scan(bytes) == nil else { return false }
                return world.schemas[schema].decode(tape: tape.reading(bytes), object: 0, into: &decoded, slots: &slots)
            }
            #expect(ok)
            #expect(decoded == content && decoded.withUnsafeBytes { Pipeline.contentHash($0) } == events.contentHash[k])
            checked += 1
        }
        #expect(checked == events.count)
    }
}
