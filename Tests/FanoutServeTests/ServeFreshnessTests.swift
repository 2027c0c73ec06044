import FanoutCore
import FanoutMetrics
@testable import FanoutAPNs
@testable import FanoutReport
@testable import FanoutServe
import FanoutSim
import Testing

/// `--expect-events` fails closed: what the backend skipped is counted, how long each Lock Screen was behind is
/// measured for every expected pair (the missing ones censored at the horizon), and fan-out completion covers every
/// due event.
@Suite("Serve events: skipped, freshness and censored completion")
struct ServeFreshnessTests {
    typealias E = ServeEventsTests

    @Test("a superseded pair never pushed is skipped; a late push takes it back; freshness covers every pair")
    func skippedAndFreshness() throws {
        let (service, events, clock) = E.setup()
        let (s, rows) = E.source(service, events, broadcast: false, followers: 3, events: 3)
        let list = Array(events.events(of: s))
        let (e0, e1, e2) = (Int(list[0]), Int(list[1]), Int(list[2]))
        let t0 = events.t0Nanos
        let (a, c) = (rows[0], rows[2])
        clock.nanos = t0 + events.offsetNanos[e0] + 5_000_000
        #expect(E.push(service, a, events.timestamp[e0]) == 200)
        #expect(E.push(service, c, events.timestamp[e0]) == 200)
        let covered = t0 + events.offsetNanos[e2] + 7_000_000
        clock.nanos = covered
        #expect(E.push(service, a, events.timestamp[e2]) == 200)  // e1 superseded for a, never pushed: skipped
        #expect(E.push(service, c, events.timestamp[e2]) == 200)  // the same for c
        #expect(service.tracker!.perEvent.skipped[e1] == 2)
        #expect(E.push(service, a, events.timestamp[e1]) == 200)  // a's e1 arrives late (reordered): not skipped
        #expect(service.tracker!.perEvent.skipped[e1] == 1)
        let r = try #require(ServeEventsReport.judge(services: [service], nowNanos: covered))
        #expect(r.superseded == 2 && r.skipped == 1 && r.reordered == 1)
        #expect(r.perEvent.skipped[e1] == 1 && r.skippedUntracked == 0)
        #expect(r.skippedExamples.count == 1 && r.skippedExamples[0].contains(c["activity"] as! String))
        // Every expected pair once in freshness; the missing ones censored.
        #expect(r.freshness.totalCount == UInt64(r.expected) && r.freshnessCensored == r.missing && r.missing > 0)
        #expect(r.freshnessAddsUp && r.identitiesHold)
        // The superseded pairs were behind from e1's intended time until e2 was applied.
        let behind = covered - (t0 + events.offsetNanos[e1])
        #expect(r.freshness.max >= behind * 999 / 1000)
        // endToEnd holds the delivered pairs only (4 of them; the late e1 is reordered, not delivered).
        service.closeInterval()
        #expect(service.measurements.totals[serve: .endToEnd].totalCount == 4)
    }

    @Test("fan-out completion covers every due event followed by someone: the ones with a missing follower censored")
    func completionCensored() throws {
        let (service, events, clock) = E.setup()
        let (s, rows) = E.source(service, events, broadcast: false, followers: 3, events: 3)
        let e0 = Int(events.events(of: s).first!)
        clock.nanos = events.t0Nanos + events.offsetNanos[e0] + 1_000_000
        for row in rows { #expect(E.push(service, row, events.timestamp[e0]) == 200) }
        let r = try #require(ServeEventsReport.judge(services: [service], nowNanos: clock.nanos))
        #expect(r.perEvent.missing[e0] == 0 && r.completeEvents >= 1)
        let followed = (0..<events.count).filter { r.perEvent.due[$0] && events.followers[Int(events.source[$0])] > 0 }
        let withMissing = followed.filter { r.perEvent.missing[$0] > 0 }
        #expect(r.completionCensored == withMissing.count && withMissing.count > 0)
        #expect(r.completion[.fanoutCompletion].totalCount == UInt64(followed.count), "no due event left out")
    }

    @Test("the report carries skipped, freshness and the censored counts (summary.json, summary.md, freshness.hgrm)")
    func rendered() throws {
        let (service, events, clock) = E.setup()
        let (s, rows) = E.source(service, events, broadcast: false, followers: 3, events: 3)
        let list = Array(events.events(of: s))
        clock.nanos = events.t0Nanos + events.offsetNanos[Int(list[2])] + 1_000_000
        #expect(E.push(service, rows[0], events.timestamp[Int(list[2])]) == 200)
        let r = try #require(ServeEventsReport.judge(services: [service], nowNanos: clock.nanos))
        #expect(r.skipped == 2)
        let json = ServeReport.eventsJSON(r, LatencyRecorder(metricCount: ServeMetric.allCases.count))
        #expect(json["skipped"] as? Int == 2 && json["freshnessCensored"] as? Int == r.missing)
        #expect((json["freshness"] as? [String: Any])?["count"] as? UInt64 == UInt64(r.expected))
        let md = ServeReport.eventsMarkdown(r, LatencyRecorder(metricCount: ServeMetric.allCases.count))
        #expect(md.contains("Skipped: 2 of the 2 superseded pairs were never pushed"))
        #expect(md.contains("| freshness | \(r.expected) |"))
    }

    @Test("no two events of one source share an aps.timestamp, in every built-in scenario")
    func noSharedTimestamps() {
        for name in BuiltinScenarios.names {
            let scenario = BuiltinScenarios.named(name)!
            let events = ServeEvents(
                world: World(scenario: scenario), followers: [Int32](repeating: 0, count: scenario.sources.count))
            #expect(events.sharedTimestamps == 0, "\(name)")
            #expect(events.count > 0, "\(name)")
        }
    }

    @Test("the scenario's own out-of-order events, delivered after a newer one, are counted apart from the backend's")
    func reorderedByScenario() throws {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 60
        s.faults.rotationShare = 0
        s.faults.outOfOrderShare = 0.5
        let clock = E.Clock()
        let service = APNsService(scenario: s, auth: nil, nowSeconds: E.now) { clock.nanos }
        let events = ServeEvents.expect(services: [service])
        events.t0Nanos = 1_000_000_000
        // A token-push source with an out-of-order event intended after a newer-ranked one of the same source.
        let population = APNsServiceTests.population(service)
        let world = service.engine.world
        var found: (row: [String: Any], newer: Int, late: Int)?
        search: for src in 0..<events.followers.count where !world.sourceIsBroadcast[src] && world.sourceApp[src] == 0 {
            let list = events.events(of: src).map(Int.init)
            for late in list where events.outOfOrder[late] {
                for newer in list where events.rank[newer] > events.rank[late]
                    && events.offsetNanos[newer] < events.offsetNanos[late] && !events.outOfOrder[newer]
                {
                    let rows = population.filter { $0["source"] as? String == ServeEvents.sourceName(src) }
                    guard let row = rows.first else { continue }
                    found = (row, newer, late)
                    break search
                }
            }
        }
        let (row, newer, late) = try #require(found, "smoke at outOfOrderShare 0.5 has one")
        clock.nanos = events.t0Nanos + events.offsetNanos[late] + 1_000_000
        #expect(E.push(service, row, events.timestamp[newer]) == 200)
        #expect(E.push(service, row, events.timestamp[late]) == 200)  // older timestamp, sent later by design
        let r = try #require(ServeEventsReport.judge(services: [service], nowNanos: clock.nanos))
        #expect(r.reordered == 1 && r.reorderedByScenario == 1 && r.reorderedByBackend == 0)
        var info = ServeResults.Info(
            scenario: "smoke", seed: 1, listen: "", transport: "h2c", auth: "none", startedAt: "", gitRevision: "")
        info.events = r
        let v = ServeVerdict.judge(
            info, latency: LatencyRecorder(metricCount: ServeMetric.allCases.count),
            thresholds: [try ServeObjective(parsing: "reordered=0"), try ServeObjective(parsing: "missing=off")])
        #expect(v.status == .passed, "the scenario's own reordering is not the backend's: \(v.line)")
    }

    @Test("fanout's side named first: an event the trigger never got accepted, an activity never registered")
    func fanoutSideFirst() throws {
        let (service, events, clock) = E.setup()
        let (s, rows) = E.source(service, events, broadcast: false, followers: 3, events: 3)
        let e0 = Int(events.events(of: s).first!)
        clock.nanos = events.t0Nanos + events.offsetNanos[e0] + 1_000_000
        let population = APNsServiceTests.population(service)
        // The first follower of s (its line in population.jsonl) was never registered; the trigger's e0 got a 503.
        let line = try #require(population.firstIndex { $0["activity"] as? String == rows[0]["activity"] as? String })
        var registered = [Bool](repeating: true, count: population.count)
        registered[line] = false
        let failure = TriggerEventFailure(
            source: Int32(s), timestamp: events.timestamp[e0], reason: TriggerEventFailure.answered(503))
        let r = try #require(
            ServeEventsReport.judge(
                services: [service], nowNanos: clock.nanos, triggerFailures: [failure], registeredLines: registered))
        let followers = Int(events.followers[s])
        // e0 is missing on every follower of s: the trigger's failure names it, before "never pushed".
        #expect(r.perEvent.missingReasons(e0)["trigger answered 503"] == Int32(followers))
        #expect(r.missingByReason["trigger answered 503"] == followers)
        // The unregistered activity's other missing pairs (events after e0 due by now) are "activity not registered".
        let dueAfter = events.events(of: s).dropFirst().filter { events.offsetNanos[Int($0)] <= r.horizonNanos }.count
        #expect(r.missingByReason[ServeEventsReport.notRegistered] == (dueAfter > 0 ? dueAfter : nil))
        #expect(r.reasonsAddUp && r.identitiesHold)
        // Without them, the same pairs are "never pushed" (the judge charged them to the backend before).
        let plain = try #require(ServeEventsReport.judge(services: [service], nowNanos: clock.nanos))
        #expect(plain.missingByReason["trigger answered 503"] == nil && plain.missing == r.missing)
    }
}
