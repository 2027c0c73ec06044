import FanoutCore
import FanoutMetrics
@testable import FanoutAPNs
@testable import FanoutReport
@testable import FanoutServe
import FanoutSim
import Foundation
import Testing

/// `faults.appEvents`: activities dismissed, turned off or uninstalled while serving, at times drawn from the seed;
/// the device ends them, an uninstalled app's token answers 410 with the instant, pushes after the grace are counted,
/// and the judge stops expecting their events (INGEST §5, *App events*).
@Suite("Serve: app events while serving (dismiss, disable, uninstall; sentAfterAppEvent; not expected any more)")
struct ServeAppEventsTests {
    typealias T = APNsServiceTests
    typealias E = ServeEventsTests
    static let now = APNsServiceTests.now
    static let t0: UInt64 = 1_000_000_000
    static let grace = 1.5

    static func scenario(appEvents: Bool = true) -> Scenario {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 60
        s.faults.rotationShare = 0
        s.faults.outOfOrderShare = 0
        if appEvents {
            s.faults.appEvents = .init(dismissShare: 0.2, disableShare: 0.1, uninstallShare: 0.1, graceSeconds: grace)
        }
        return s
    }

    static func setup(appEvents: Bool = true) -> (APNsService, ServeEvents, E.Clock) {
        let clock = E.Clock()
        let service = APNsService(scenario: scenario(appEvents: appEvents), auth: nil, nowSeconds: now) { clock.nanos }
        let events = ServeEvents.expect(services: [service])
        events.t0Nanos = t0
        service.startAppEvents(t0Nanos: t0, t0UnixMillis: now * 1000)
        return (service, events, clock)
    }

    /// A token push arriving at `at`, judged by the devices at the same instant (t0 is `now` on the wall clock).
    static func push(
        _ service: APNsService, _ clock: E.Clock, token: String, at: UInt64, _ body: [UInt8] = T.payload(now)
    ) -> (status: Int, body: String) {
        clock.nanos = at
        var became = false
        let headers = [
            ("apns-push-type", "liveactivity"), ("apns-topic", "com.example.scores.push-type.liveactivity"),
            ("apns-priority", "5"),
        ]
        let r = service.handle(
            RequestInput(method: "POST", path: "/3/device/\(token)", headers: headers, body: body, arrivalNanos: at),
            auth: ProviderAuth.ConnectionState(), wallMillis: now * 1000 + Int64((at - t0) / 1_000_000),
            becameAuthenticated: &became)
        return (r.status, String(decoding: r.body, as: UTF8.self))
    }

    /// The first app event of `kind` of an activity of the scores app.
    static func first(_ service: APNsService, _ kind: WorkerEngine.AppEventKind) throws -> Int {
        let store = service.pipeline.store
        return try #require(
            service.appEvents.list.indices.first { k in
                let e = service.appEvents.list[k]
                return e.kind == kind && store.appIds.string(store.app[Int(e.activity)]) == "com.example.scores"
            })
    }

    @Test("drawn from the seed in the middle 80% of the run, per (device, app) for disable and uninstall; repeatable")
    func drawn() throws {
        let (service, _, _) = Self.setup()
        let list = service.appEvents.list
        let duration = Self.scenario().durationSeconds * 1e9
        #expect(list.count > 10 && list.count < service.engine.activityCount)
        #expect(Set(list.map(\.kind)) == Set(WorkerEngine.AppEventKind.allCases))
        #expect(list.allSatisfy { Double($0.offsetNanos) >= 0.1 * duration && Double($0.offsetNanos) < 0.9 * duration })
        #expect(list.map(\.offsetNanos) == list.map(\.offsetNanos).sorted())
        // Every activity of a disabled or uninstalled (device, app) gets the same kind and instant.
        let store = service.pipeline.store
        var byPair: [String: Set<UInt64>] = [:]
        for e in list where e.kind != .dismissed {
            let (d, _) = service.engine.deviceAndSlot(of: e.activity)
            byPair["\(d) \(store.app[Int(e.activity)]) \(e.kind)", default: []].insert(e.offsetNanos)
        }
        #expect(!byPair.isEmpty && byPair.values.allSatisfy { $0.count == 1 })
        for a in 0..<Int32(service.engine.activityCount) {
            let (d, _) = service.engine.deviceAndSlot(of: a)
            let same = list.filter {
                $0.kind != .dismissed && service.engine.deviceAndSlot(of: $0.activity).device == d
                    && store.app[Int($0.activity)] == store.app[Int(a)]
            }
            if let e = same.first { #expect(list.contains { $0.activity == a && $0.kind == e.kind }) }
        }
        let again = APNsService(scenario: Self.scenario(), auth: nil, nowSeconds: Self.now) { 0 }
        #expect(again.appEvents.list.map(\.offsetNanos) == list.map(\.offsetNanos))
        #expect(again.appEvents.list.map(\.activity) == list.map(\.activity))
        // Without the setting: none, and the canonical text (so the configuration hash) is as before.
        let (without, _, _) = Self.setup(appEvents: false)
        #expect(without.appEvents.list.isEmpty && without.appEvents.nextNanos == .max)
        let text = Self.scenario().canonicalText
        #expect(text.contains(
            "\"appEvents\": {\"dismiss\": 0.2, \"disable\": 0.1, \"uninstall\": 0.1, \"graceSeconds\": 1.5}"))
        #expect(!Self.scenario(appEvents: false).canonicalText.contains("appEvents"))
        #expect(try Scenario.parse(Array(text.utf8), file: "s.json") == Self.scenario())
        #expect(throws: ScenarioError.self) {
            try Scenario.parse(
                Array(text.replacingOccurrences(of: "\"dismiss\": 0.2", with: "\"dismiss\": 0.9").utf8), file: "s.json")
        }
    }

    @Test("dismissed: the device ignores later pushes; pushes after the grace counted as sentAfterAppEvent")
    func dismissed() throws {
        let (service, _, clock) = Self.setup()
        let k = try Self.first(service, .dismissed)
        let e = service.appEvents.list[k]
        let token = String(decoding: e.token, as: UTF8.self)
        let at = Self.t0 + e.offsetNanos
        let ended = service.pipeline.accounting[.ignoredEnded]
        #expect(Self.push(service, clock, token: token, at: at - 1_000_000, T.payload(Self.now + 1)).status == 200)
        #expect(service.pipeline.accounting[.ignoredEnded] == ended && service.appEvents.applied == k)
        #expect(Self.push(service, clock, token: token, at: at + 1_000_000, T.payload(Self.now + 2)).status == 200)
        #expect(service.pipeline.accounting[.ignoredEnded] == ended + 1 && service.appEvents.applied > k)
        #expect(service.appEvents.pushedInGrace == 1 && service.appEvents.sentAfter == [0, 0, 0])
        let late = at + UInt64(Self.grace * 1e9) + 1
        #expect(Self.push(service, clock, token: token, at: late, T.payload(Self.now + 3)).status == 200)
        #expect(service.appEvents.sentAfter[WorkerEngine.AppEventKind.dismissed.rawValue] == 1)
    }

    @Test("uninstalled: its token answers 410 with the instant as timestamp; pushes after the grace counted")
    func uninstalled() throws {
        let (service, _, clock) = Self.setup()
        let k = try Self.first(service, .uninstalled)
        let e = service.appEvents.list[k]
        let token = String(decoding: e.token, as: UTF8.self)
        let at = Self.t0 + e.offsetNanos
        #expect(Self.push(service, clock, token: token, at: at - 1, T.payload(Self.now + 1)).status == 200)
        let gone = Self.push(service, clock, token: token, at: at + 1, T.payload(Self.now + 2))
        let stamp = Self.now * 1000 + Int64(e.offsetNanos / 1_000_000)
        #expect(gone.status == 410 && gone.body == "{\"reason\":\"Unregistered\",\"timestamp\":\(stamp)}")
        #expect(service.appEvents.pushedInGrace == 1)
        let late = Self.push(service, clock, token: token, at: at + UInt64(Self.grace * 1e9) + 1)
        #expect(late.status == 410)
        #expect(service.appEvents.sentAfter[WorkerEngine.AppEventKind.uninstalled.rawValue] == 1)
        // The request telling the backend: the activity's fields, the instant on the devices' clock and the wall's.
        let line = ServeSession.appEventLine(service, k, t0UnixMillis: Self.now * 1000)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
        #expect(body["kind"] as? String == "uninstalled" && body["token"] as? String == token)
        #expect(body["activity"] as? String == service.pipeline.store.activityIds.string(e.activity))
        #expect(body["app"] as? String == "com.example.scores" && body["timestamp"] as? Int == Int(stamp))
        #expect(body["device"] is String && (body["intendedAt"] as? String)?.hasSuffix("Z") == true)
    }

    @Test("the judge: pairs after an app event − 1 s not expected any more; identities hold; counted and gated")
    func judged() throws {
        let (service, _, _) = Self.setup()
        let (plain, _, _) = Self.setup(appEvents: false)
        let judgedAt = Self.t0 + UInt64(Self.scenario().durationSeconds * 1e9)
        service.stepAppEvents(judgedAt)
        let with = try #require(ServeEventsReport.judge(services: [service], nowNanos: judgedAt))
        let without = try #require(ServeEventsReport.judge(services: [plain], nowNanos: judgedAt))
        let c = try #require(with.appEvents)
        #expect(without.appEvents == nil && without.sentAfterAppEvent == 0)
        // Nothing was pushed: every expected pair is missing, and the app events took some out of the expected.
        #expect(c.notExpected > 0 && with.expected + c.notExpected == without.expected, "\(c)")
        #expect(with.missing + c.notExpected == without.missing)
        #expect(with.identitiesHold && c.addsUp && c.applied == c.scheduled && c.untoldAtShutdown == c.scheduled)
        #expect(c.appliedByKind.values.reduce(0, +) == c.scheduled && c.sentAfter == 0)
        // summary.json's events and the sentence; the verdict's defaults gain sentAfterAppEvent=0.
        var out: [String: Any] = [:]
        ServeReport.addAppEvents(with, to: &out)
        #expect(out["sentAfterAppEvent"] as? Int == 0)
        #expect((out["appEvents"] as? [String: Any])?["identityHolds"] as? Bool == true)
        #expect(ServeReport.appEventsLine(with).contains("then 0 sent after the app event"))
        #expect(ServeSummaryFile.gatedEventCounts.contains("sentAfterAppEvent"))
        #expect(ServeObjective.counts.contains { $0.name == "sentAfterAppEvent" })
    }
}
