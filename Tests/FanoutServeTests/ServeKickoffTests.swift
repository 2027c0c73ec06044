import FanoutCore
import FanoutMetrics
@testable import FanoutAPNs
@testable import FanoutServe
@testable import FanoutSim
import Foundation
import Testing

/// `faults.kickoff`: a share of the token sources starts its followers' activities by push-to-start while serving.
/// Those activities are not built at start; each device has a push-to-start token for the source's app; a start push
/// naming the source creates the activity under its own id and token (routed by the loops' directory from the start),
/// the app's registration is posted after its delay, the judge follows it from its source's start, and the device's
/// budget refuses starts past it (INGEST §5, *Kickoff*).
@Suite("Serve: kickoff by push-to-start (the activities started, routed, registered, judged; the budget)")
struct ServeKickoffTests {
    typealias E = ServeEventsTests
    static let now = APNsServiceTests.now
    static let t0: UInt64 = 1_000_000_000
    static let kickoffSeconds = 5.0

    static func scenario(share: Double = 0.5, budget: Int = 10) -> Scenario {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 60
        s.faults.rotationShare = 0
        s.faults.outOfOrderShare = 0
        s.faults.dismissShare = 0
        s.faults.malformedShare = 0
        s.faults.oversizedShare = 0
        s.faults.offline = nil
        s.faults.kickoff = .init(share: share, atSeconds: kickoffSeconds, startBudget: budget)
        return s
    }

    /// The registrations a loop posted (any thread).
    final class Posted: @unchecked Sendable {
        private let lock = Lock()
        private var items: [KickoffRegistration] = []
        func add(_ r: KickoffRegistration) {
            lock.lock()
            items.append(r)
            lock.unlock()
        }
        var all: [KickoffRegistration] {
            lock.lock()
            defer { lock.unlock() }
            return items
        }
    }

    static func setup(_ scenario: Scenario = scenario(), worker: Int = 0, of workers: Int = 1)
        -> (APNsService, ServeEvents, E.Clock, Posted)
    {
        let clock = E.Clock()
        let service = APNsService(
            scenario: scenario, auth: nil, nowSeconds: now, worker: worker, of: workers) { clock.nanos }
        let events = ServeEvents.expect(services: [service])
        events.t0Nanos = t0
        let posted = Posted()
        service.postKickoffRegistrations { posted.add($0) }
        return (service, events, clock, posted)
    }

    /// A push to `token` arriving at `at` (t0 is `now` on the wall clock).
    static func push(
        _ service: APNsService, _ clock: E.Clock, token: [UInt8], topic: String, at: UInt64, _ body: [UInt8],
        priority: String = "5"
    ) -> Int {
        clock.nanos = at
        var became = false
        let headers = [("apns-push-type", "liveactivity"), ("apns-topic", topic), ("apns-priority", priority)]
        let path = "/3/device/" + String(decoding: token, as: UTF8.self)
        return service.handle(
            RequestInput(method: "POST", path: path, headers: headers, body: body, arrivalNanos: at),
            auth: ProviderAuth.ConnectionState(), wallMillis: now * 1000 + Int64((at - t0) / 1_000_000),
            becameAuthenticated: &became
        ).status
    }

    /// What a backend pushes for source `source`'s start (the trigger's fields), naming `named` in its attributes.
    static func startPayload(_ world: World, source: Int, named: Int? = nil) -> [UInt8] {
        let app = world.sourceApp[source]
        var content: [UInt8] = []
        world.makeContent(schema: world.appSchema[app], event: -1, source: source, final: false, into: &content)
        var state: [UInt8] = []
        content.withUnsafeBytes { world.schemas[world.appSchema[app]].appendCompactJSON(record: $0, to: &state) }
        let stamp = ServingKickoff.startTimestamp(epochSeconds: world.epochSeconds)
        let name = ServeEvents.sourceName(named ?? source)
        return Array(
            (#"{"aps":{"event":"start","timestamp":\#(stamp),"content-state":"# + String(decoding: state, as: UTF8.self)
                + #","attributes-type":"\#(world.scenario.apps[app].schema)","attributes":{"source":"\#(name)"},"#
                + #""alert":{"title":"\#(name)","body":"started"}}}"#).utf8)
    }

    /// The update push of event `e` (as the trigger carries it).
    static func updatePayload(_ world: World, _ events: ServeEvents, _ e: Int) -> [UInt8] {
        let s = Int(events.source[e])
        let schema = world.appSchema[world.sourceApp[s]]
        var content: [UInt8] = []
        world.makeContent(
            schema: schema, event: events.scheduleIndex[e], source: s, final: events.kind[e] == 1, into: &content)
        var state: [UInt8] = []
        content.withUnsafeBytes { world.schemas[schema].appendCompactJSON(record: $0, to: &state) }
        return Array(
            (#"{"aps":{"event":"\#(events.kind[e] == 1 ? "end" : "update")","timestamp":\#(events.timestamp[e]),"#
                + #""content-state":"# + String(decoding: state, as: UTF8.self) + "}}").utf8)
    }

    static func startToken(_ world: World, _ p: ServingKickoff.Pending) -> [UInt8] {
        var token: [UInt8] = []
        world.appendToken(device: Int(p.device), slot: Int(p.startSlot), generation: 0, to: &token)
        return token
    }

    static func topic(_ world: World, _ source: Int32) -> String {
        world.scenario.apps[world.sourceApp[Int(source)]].bundle + ".push-type.liveactivity"
    }

    @Test("planned: the kickoff sources' activities are not built; one line per device and source, last")
    func planned() throws {
        let (service, _, _, _) = Self.setup()
        let world = service.engine.world
        let kickoffSources = (0..<world.sourceApp.count).filter { world.startsByKickoff($0) }
        #expect(!kickoffSources.isEmpty && kickoffSources.count < world.sourceApp.count)
        #expect(kickoffSources.allSatisfy { !world.sourceIsBroadcast[$0] })
        #expect(kickoffSources.allSatisfy { world.kickoffOffsetNanos[$0] == UInt64(Self.kickoffSeconds * 1e9) })
        let list = service.kickoff.list
        #expect(list.count > 5)
        #expect(list.allSatisfy { world.startsByKickoff(Int($0.source)) })
        // No activity built at start follows a kickoff source; the whole build without kickoff has them all.
        let sources = service.engine.sourcesOfActivities()
        #expect(sources.allSatisfy { $0 < 0 || !world.startsByKickoff(Int($0)) })
        var whole = Self.scenario()
        whole.faults.kickoff = nil
        let without = APNsService(scenario: whole, auth: nil, nowSeconds: Self.now) { 0 }
        #expect(without.kickoff.list.isEmpty && without.kickoff.builtActivities == .max)
        // Fewer built (the per-device and per-app limits may let another slot of a device in instead).
        #expect(service.engine.activityCount < without.engine.activityCount)
        let withoutSources = without.engine.sourcesOfActivities()
        #expect(withoutSources.contains { $0 >= 0 && world.startsByKickoff(Int($0)) })
        // population.jsonl: the built activities, then one line per kickoff entry (no activity, no token yet).
        let lines = String(decoding: service.populationLines(), as: UTF8.self).split(separator: "\n")
        #expect(lines.count == service.engine.activityCount + list.count)
        #expect(service.populationByteCount() == service.populationLines().count)
        let last = try #require(
            JSONSerialization.jsonObject(with: Data(lines.last!.utf8)) as? [String: Any])
        #expect(last["activity"] is NSNull && last["token"] is NSNull)
        #expect((last["push-to-start-token"] as? String)?.count == 64)
        #expect(last["source"] as? String == ServeEvents.sourceName(Int(list.last!.source)))
        // The directory knows each entry's push-to-start token and the update token it will start with.
        let hashes = Set(service.ownedTokenHashes())
        for p in list.prefix(5) {
            var token: [UInt8] = []
            world.appendToken(device: Int(p.device), slot: Int(p.slot), generation: 0, to: &token)
            #expect(hashes.contains(token.withUnsafeBytes { TokenDirectory.hash($0) }))
            #expect(hashes.contains(Self.startToken(world, p).withUnsafeBytes { TokenDirectory.hash($0) }))
        }
    }

    @Test("the scenario's faults.kickoff: parsed, in the canonical text only when set, bad values refused")
    func scenarioField() throws {
        let text = Self.scenario().canonicalText
        #expect(text.contains(
            #""kickoff": {"share": 0.5, "atSeconds": 5, "overSeconds": 0, "appDelayMillis": {"p50": 30, "p99": 150}, "#
                + #""startBudget": 10}"#))
        #expect(try Scenario.parse(Array(text.utf8), file: "s.json") == Self.scenario())
        var none = Self.scenario()
        none.faults.kickoff = nil
        #expect(!none.canonicalText.contains("kickoff"))
        for (from, to) in [
            (#""p99": 150"#, #""p99": 10"#), (#""atSeconds": 5"#, #""atSeconds": 61"#),
            (#""share": 0.5"#, #""share": 1.5"#), (#""startBudget": 10"#, #""startBudget": -1"#),
            (#""startBudget": 10"#, #""startBudget": 10, "other": 1"#),
        ] {
            #expect(throws: ScenarioError.self, "\(to)") {
                try Scenario.parse(Array(text.replacingOccurrences(of: from, with: to).utf8), file: "s.json")
            }
        }
        // The app's delay: lognormal through p50 30 ms and p99 150 ms, from the seed (a run repeats).
        let s = Self.scenario()
        let draws = (0..<2000).map { WorkerEngine.kickoffAppDelayNanos(s, device: $0, slot: 0) }.sorted()
        #expect(draws[1000] > 25_000_000 && draws[1000] < 35_000_000, "\(draws[1000])")
        #expect(draws[1980] > 100_000_000 && draws[1980] < 220_000_000, "\(draws[1980])")
        var other = s
        other.seed += 1
        let again = (0..<2000).map { WorkerEngine.kickoffAppDelayNanos(s, device: $0, slot: 0) }.sorted()
        let reseeded = (0..<2000).map { WorkerEngine.kickoffAppDelayNanos(other, device: $0, slot: 0) }.sorted()
        #expect(again == draws && reseeded != draws)
    }

    @Test("a start push starts the activity under its own id and token, posts its registration; updates follow it")
    func started() throws {
        let (service, events, clock, posted) = Self.setup()
        let world = service.engine.world
        let p = service.kickoff.list[0]
        let offset = world.kickoffOffsetNanos[Int(p.source)]
        let at = Self.t0 + offset + 3_000_000
        let before = service.engine.activityCount
        let status = Self.push(
            service, clock, token: Self.startToken(world, p), topic: Self.topic(world, p.source), at: at,
            Self.startPayload(world, source: Int(p.source)), priority: "10")
        #expect(status == 200)
        #expect(service.engine.activityCount == before + 1)
        let a = Int32(before)
        #expect(service.kickoff.activity[0] == a && service.kickoff.startedNanos[0] == at)
        var id: [UInt8] = []
        world.appendActivityId(device: Int(p.device), slot: Int(p.slot), to: &id)
        #expect(service.pipeline.store.activityIds.string(a) == String(decoding: id, as: UTF8.self))
        #expect(service.engine.deviceAndSlot(of: a) == (Int(p.device), Int(p.slot)))
        #expect(service.engine.sourcesOfActivities()[Int(a)] == p.source)
        // The app's registration: after its delay, the activity's line with its id and token.
        let r = try #require(posted.all.first)
        let delay = WorkerEngine.kickoffAppDelayNanos(world.scenario, device: Int(p.device), slot: Int(p.slot))
        #expect(posted.all.count == 1 && r.index == 0 && r.loop == 0 && r.dueNanos == at + delay)
        let line = try #require(JSONSerialization.jsonObject(with: Data(r.line)) as? [String: Any])
        var token: [UInt8] = []
        world.appendToken(device: Int(p.device), slot: Int(p.slot), generation: 0, to: &token)
        #expect(line["activity"] as? String == String(decoding: id, as: UTF8.self))
        #expect(line["token"] as? String == String(decoding: token, as: UTF8.self))
        #expect(line["source"] as? String == ServeEvents.sourceName(Int(p.source)))
        // An event of the source intended after its start: delivered to the started activity (its first update).
        let e = try #require(events.events(of: Int(p.source)).map(Int.init).first { events.offsetNanos[$0] > offset })
        let when = Self.t0 + events.offsetNanos[e] + 2_000_000
        #expect(Self.push(
            service, clock, token: token, topic: Self.topic(world, p.source), at: when,
            Self.updatePayload(world, events, e)) == 200)
        #expect(service.tracker!.perEvent.delivered[e] == 1 && service.kickoff.firstUpdateNanos[0] == when)
        // A second start for the same source on that device is not the kickoff's: it follows nothing.
        #expect(Self.push(
            service, clock, token: Self.startToken(world, p), topic: Self.topic(world, p.source), at: when + 1,
            Self.startPayload(world, source: Int(p.source)), priority: "10") == 200)
        #expect(service.kickoff.unexpectedStarts == 1 && posted.all.count == 1)
        #expect(service.engine.activityCount == before + 2)
        // The judge: the started activity is expected from its source's start, its latency measured once each.
        let report = try #require(
            ServeEventsReport.judge(services: [service], nowNanos: when + 10_000_000_000, settleNanos: 0))
        let k = try #require(report.kickoff)
        #expect(k.started == 1 && k.followed == 1 && k.unexpectedStarts == 1 && k.toLockScreen.totalCount == 1)
        #expect(k.toFirstUpdate.totalCount == 1 && k.toRegistered.totalCount == 0)
        #expect(k.notStarted == k.due - 1 && k.notStartedByReason[ServeEventsReport.Kickoff.neverPushed] == k.due - 1)
        #expect(k.registration.pendingAtShutdown == 1 && k.addsUp, "\(k)")
        #expect(report.identitiesHold)
        let from = Int(service.tracker!.fromRank[Int(a)])
        #expect(from > 0 && events.offsetNanos[Int(events.bySource[Int(events.sourceStart[Int(p.source)]) + from])]
            >= offset)
    }

    @Test("the device's budget: a start past it is answered 200 and refused by the device, counted and named")
    func budget() throws {
        let (service, _, clock, posted) = Self.setup(Self.scenario(budget: 0))
        let world = service.engine.world
        let p = service.kickoff.list[0]
        let before = service.engine.activityCount
        let at = Self.t0 + world.kickoffOffsetNanos[Int(p.source)] + 1
        #expect(Self.push(
            service, clock, token: Self.startToken(world, p), topic: Self.topic(world, p.source), at: at,
            Self.startPayload(world, source: Int(p.source)), priority: "10") == 200)
        #expect(service.engine.activityCount == before && service.kickoff.activity[0] == -1)
        #expect(service.kickoff.budgetRefusals == 1 && service.kickoff.refusedByBudget[0] && posted.all.isEmpty)
        let report = try #require(ServeEventsReport.judge(services: [service], nowNanos: at + 60_000_000_000))
        let k = try #require(report.kickoff)
        #expect(k.notStartedByReason[ServeEventsReport.Kickoff.budgetSpent] == 1 && k.started == 0 && k.addsUp)
    }

    @Test("with app events applied, a push to an activity started while serving is judged (no app event of its own)")
    func withAppEvents() throws {
        var scenario = Self.scenario()
        scenario.faults.appEvents = .init(dismissShare: 0.3, disableShare: 0, uninstallShare: 0, graceSeconds: 1)
        let (service, events, clock, _) = Self.setup(scenario)
        service.startAppEvents(t0Nanos: Self.t0, t0UnixMillis: Self.now * 1000)
        let world = service.engine.world
        let p = try #require(service.kickoff.list.first)
        let first = try #require(service.appEvents.list.first)
        // An app event applied first (a push after its instant steps it), then the start, then an update to it.
        let late = Self.t0 + max(first.offsetNanos, world.kickoffOffsetNanos[Int(p.source)]) + 1_000_000
        #expect(Self.push(
            service, clock, token: Self.startToken(world, p), topic: Self.topic(world, p.source), at: late,
            Self.startPayload(world, source: Int(p.source)), priority: "10") == 200)
        #expect(service.appEvents.applied > 0 && service.kickoff.activity[0] >= 0)
        let e = try #require(
            events.events(of: Int(p.source)).map(Int.init).first { Self.t0 + events.offsetNanos[$0] > late })
        var token: [UInt8] = []
        world.appendToken(device: Int(p.device), slot: Int(p.slot), generation: 0, to: &token)
        #expect(Self.push(
            service, clock, token: token, topic: Self.topic(world, p.source), at: Self.t0 + events.offsetNanos[e] + 1,
            Self.updatePayload(world, events, e)) == 200)
        #expect(service.tracker!.perEvent.delivered[e] == 1)
    }

    @Test("two loops: a started activity's token is owned by its device's loop from the start")
    func twoLoops() throws {
        let s = Self.scenario()
        let services = (0..<2).map { k in
            APNsService(scenario: s, auth: nil, nowSeconds: Self.now, worker: k, of: 2) { 0 }
        }
        let directory = TokenDirectory(hashesByWorker: services.map { $0.ownedTokenHashes() })
        for (k, service) in services.enumerated() {
            #expect(!service.kickoff.list.isEmpty)
            for p in service.kickoff.list.prefix(8) {
                var token: [UInt8] = []
                service.engine.world.appendToken(device: Int(p.device), slot: Int(p.slot), generation: 0, to: &token)
                #expect(directory.owner(token[...]) == k)
                let start = Self.startToken(service.engine.world, p)
                #expect(directory.owner(start[...]) == k)
            }
        }
    }
}
