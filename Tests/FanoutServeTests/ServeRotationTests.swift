import FanoutCore
import FanoutMetrics
@testable import FanoutAPNs
@testable import FanoutReport
@testable import FanoutServe
import FanoutSim
import Foundation
import Testing

/// `faults.rotationWhileServing`: tokens rotating at times drawn from the seed, the old one working through its
/// grace, then 410 Unregistered with its timestamp, pushes after that counted, the missing pairs named (INGEST §5).
@Suite("Serve: token rotation while serving (grace, 410 with timestamp, sentToUnregistered, reasons)")
struct ServeRotationTests {
    typealias T = APNsServiceTests
    typealias E = ServeEventsTests
    static let now = APNsServiceTests.now
    static let t0: UInt64 = 1_000_000_000
    static let grace = 1.5

    static func scenario() -> Scenario {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 60
        s.faults.rotationShare = 0.5
        s.faults.outOfOrderShare = 0
        s.faults.rotationWhileServing = .init(graceSeconds: grace)
        return s
    }

    static func setup() -> (APNsService, ServeEvents, E.Clock) {
        let clock = E.Clock()
        let service = APNsService(scenario: scenario(), auth: nil, nowSeconds: now) { clock.nanos }
        let events = ServeEvents.expect(services: [service])
        events.t0Nanos = t0
        service.startRotations(t0Nanos: t0, t0UnixMillis: now * 1000)
        return (service, events, clock)
    }

    /// A token push arriving at `at` (the service's clock reads it too).
    static func push(
        _ service: APNsService, _ clock: E.Clock, token: String, at: UInt64, _ body: [UInt8] = T.payload(now),
        app: String = "com.example.scores"
    ) -> (status: Int, body: String) {
        clock.nanos = at
        var became = false
        let headers = [
            ("apns-push-type", "liveactivity"), ("apns-topic", "\(app).push-type.liveactivity"), ("apns-priority", "5"),
        ]
        let r = service.handle(
            RequestInput(method: "POST", path: "/3/device/\(token)", headers: headers, body: body, arrivalNanos: at),
            auth: ProviderAuth.ConnectionState(), wallMillis: now * 1000 + 5000, becameAuthenticated: &became)
        return (r.status, String(decoding: r.body, as: UTF8.self))
    }

    @Test("the share rotates at times drawn from the seed, in the middle 80% of the run; none at start; repeatable")
    func drawn() throws {
        let (service, _, _) = Self.setup()
        let list = service.rotations.list
        let duration = Self.scenario().durationSeconds * 1e9
        #expect(list.count > 10 && list.count < service.engine.activityCount)
        #expect(list.allSatisfy { Double($0.offsetNanos) >= 0.1 * duration && Double($0.offsetNanos) < 0.9 * duration })
        #expect(list.map(\.offsetNanos) == list.map(\.offsetNanos).sorted())
        // Nothing rotated at the start: rotated-tokens.jsonl is empty, population.jsonl carries the old tokens.
        #expect(service.rotatedTokenLines().isEmpty)
        let again = APNsService(scenario: Self.scenario(), auth: nil, nowSeconds: Self.now) { 0 }
        #expect(again.rotations.list.map(\.offsetNanos) == list.map(\.offsetNanos))
        #expect(again.rotations.list.map(\.new) == list.map(\.new))
        // Without the setting the same share rotates at the start, as before.
        var before = Self.scenario()
        before.faults.rotationWhileServing = nil
        let atStart = APNsService(scenario: before, auth: nil, nowSeconds: Self.now) { 0 }
        #expect(atStart.rotations.list.isEmpty && atStart.rotatedTokenLines().count > 0)
        // The setting in a scenario file, and its canonical text (written only when set).
        let text = Self.scenario().canonicalText
        #expect(text.contains("\"rotationWhileServing\": {\"graceSeconds\": 1.5}"))
        #expect(!before.canonicalText.contains("rotationWhileServing"))
        #expect(try Scenario.parse(Array(text.utf8), file: "s.json") == Self.scenario())
    }

    @Test("new token from the rotation; old one through the grace; then 410 with its timestamp; later pushes counted")
    func grace() throws {
        let (service, _, clock) = Self.setup()
        let rows = T.population(service)
        // The first rotation of an activity of the scores app (the payload is a score's).
        let store = service.pipeline.store
        let r = try #require(
            service.rotations.list.first { store.appIds.string(store.app[Int($0.activity)]) == "com.example.scores" })
        let old = String(decoding: r.old, as: UTF8.self)
        let new = String(decoding: r.new, as: UTF8.self)
        let id = service.pipeline.store.activityIds.string(r.activity)
        let row = try #require(rows.first { $0["activity"] as? String == id })
        #expect(row["token"] as? String == old)
        // The registration line: population.jsonl's line of the activity, the new token in it.
        let line = try #require(try JSONSerialization.jsonObject(with: Data(r.line)) as? [String: Any])
        var expected = row
        expected["token"] = new
        #expect(NSDictionary(dictionary: line) == NSDictionary(dictionary: expected))
        let at = Self.t0 + r.offsetNanos
        #expect(Self.push(service, clock, token: old, at: at - 1).status == 200)
        #expect(Self.push(service, clock, token: new, at: at - 1).status == 400)  // not issued yet
        #expect(Self.push(service, clock, token: new, at: at).status == 200)
        #expect(Self.push(service, clock, token: old, at: at + 1).status == 200)  // grace
        #expect(service.rotations.pushedInGrace == 1)
        let retiredAt = at + UInt64(Self.grace * 1e9)
        let gone = Self.push(service, clock, token: old, at: retiredAt)
        let stamp = Self.now * 1000 + Int64((r.offsetNanos + UInt64(Self.grace * 1e9)) / 1_000_000)
        #expect(gone.status == 410 && gone.body == "{\"reason\":\"Unregistered\",\"timestamp\":\(stamp)}")
        #expect(service.rotations.answeredUnregistered == 1 && service.rotations.sentToUnregistered == 0)
        #expect(Self.push(service, clock, token: old, at: retiredAt + 1).status == 410)
        #expect(Self.push(service, clock, token: old, at: retiredAt + 2).status == 410)
        #expect(service.rotations.sentToUnregistered == 2)
        #expect(Self.push(service, clock, token: new, at: retiredAt + 3).status == 200)
        // The token directory sends the new token to this loop from the start.
        let hashes = Set(service.ownedTokenHashes())
        #expect(hashes.contains(r.new.withUnsafeBytes { TokenDirectory.hash($0) }))
    }

    @Test("a pair pushed to the retired token is missing by that reason; with the registration failed, by that one")
    func reasons() throws {
        let (service, events, clock) = Self.setup()
        let sources = service.engine.sourcesOfActivities()
        let world = service.engine.world
        // A rotation of a token source's follower whose source has an event after the old token stopped working.
        let found = service.rotations.list.indices.first { k in
            let s = Int(sources[Int(service.rotations.list[k].activity)])
            guard s >= 0, !world.sourceIsBroadcast[s], let last = events.events(of: s).last else { return false }
            return events.offsetNanos[Int(last)] >= service.rotations.retiredAtNanos(k)
        }
        let k = try #require(found)
        let r = service.rotations.list[k]
        let s = Int(sources[Int(r.activity)])
        let e = Int(events.events(of: s).last!)
        let old = String(decoding: r.old, as: UTF8.self)
        let body = E.eventPayload(service, source: s, timestamp: events.timestamp[e])
        let after = Self.t0 + events.offsetNanos[e] + 1
        #expect(Self.push(service, clock, token: old, at: after, body).status == 410)
        #expect(Self.push(service, clock, token: old, at: after + 1, body).status == 410)
        let judgedAt = Self.t0 + (events.offsetNanos.max() ?? 0) + 1
        service.stepRotations(judgedAt)
        let pruned = try #require(ServeEventsReport.judge(services: [service], nowNanos: judgedAt))
        #expect((pruned.missingByReason[ServeEventsReport.pushedToRetired] ?? 0) >= 1, "\(pruned.missingByReason)")
        #expect(pruned.identitiesHold && pruned.sentToUnregistered == 1)
        let c = try #require(pruned.rotations)
        #expect(c.scheduled == service.rotations.list.count && c.rotated == c.scheduled && c.retired == c.scheduled)
        #expect(c.answeredUnregistered == 1 && c.unregisteredAtShutdown == c.scheduled && c.addsUp)
        // The new token's registration failed: the backend could not know it, and the reason says so first.
        var registration = RegisterResults()
        registration.activities = c.scheduled
        registration.failed = c.scheduled
        let failed = try #require(
            ServeEventsReport.judge(
                services: [service], nowNanos: judgedAt,
                rotationRegistered: [[Bool](repeating: false, count: c.scheduled)],
                rotationRegistration: registration))
        #expect((failed.missingByReason[ServeEventsReport.rotationNotRegistered] ?? 0) >= 1)
        #expect(failed.missingByReason[ServeEventsReport.pushedToRetired] == nil)
        #expect(failed.identitiesHold && failed.missing == pruned.missing && failed.expected == pruned.expected)
        // summary.json's events: the count, the rotations and their identity; the verdict gates it by default.
        var out: [String: Any] = [:]
        ServeReport.addRotations(failed, to: &out)
        #expect(out["sentToUnregistered"] as? Int == 1)
        #expect((out["rotations"] as? [String: Any])?["identityHolds"] as? Bool == true)
        #expect(ServeReport.rotationsLine(failed).contains("then 1 pushes sent to unregistered tokens"))
    }
}
