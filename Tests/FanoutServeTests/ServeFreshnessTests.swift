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
        #expect(service.tracker!.skipped[e1] == 2)
        #expect(E.push(service, a, events.timestamp[e1]) == 200)  // a's e1 arrives late (reordered): not skipped
        #expect(service.tracker!.skipped[e1] == 1)
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
}
