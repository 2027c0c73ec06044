import FanoutCore
import FanoutMetrics
import Testing

@testable import FanoutSim

/// The built-in fault scenarios: each one's identities hold and its fault shows in the counts as
/// DOMAIN says it must (shares are seeded draws, so they are asserted within a band around the
/// configured share).
@Suite("Fault scenarios", .serialized)
struct FaultScenarioTests {
    func run(_ name: String, duration: Double? = nil, workers: Int = 2) throws -> RunResult {
        var s = try #require(BuiltinScenarios.named(name), "\(name) is not built in")
        if let duration { s.durationSeconds = duration }
        let r = try Simulation.run(s, workers: workers) { _ in }
        #expect(r.accounting.identitiesHold, "\(name): identities")
        return r
    }

    func share(_ part: Int, _ whole: Int) -> Double { whole > 0 ? Double(part) / Double(whole) : 0 }

    @Test("out-of-order storm: older timestamps are ignoredStaleTimestamp, nothing else goes wrong")
    func outOfOrder() throws {
        let a = try run("faults-out-of-order").accounting
        #expect(a.rejectedTotal == 0 && a.unroutableTotal == 0)
        #expect(a[.ignoredStaleTimestamp] > 0 && a[.applied] > 0)
        #expect(a[.applied] + a[.ignoredStaleTimestamp] == a.deliveries)
        // Half the events are older than their predecessor; the first update of an activity always applies.
        #expect((0.15...0.5).contains(share(a[.ignoredStaleTimestamp], a.deliveries)), "\(a[.ignoredStaleTimestamp])")
    }

    @Test("10% bad payloads: malformed → BadRequestPayload, oversized → PayloadTooLarge, never delivered")
    func payloads() throws {
        let a = try run("faults-payloads").accounting
        #expect((0.08...0.12).contains(share(a.rejectedTotal, a.pushes)), "\(a.rejectedTotal) of \(a.pushes)")
        #expect((0.035...0.065).contains(share(a[.badRequestPayload], a.pushes)))
        #expect((0.035...0.065).contains(share(a[.payloadTooLarge], a.pushes)))
        #expect(a.rejectedTotal == a[.badRequestPayload] + a[.payloadTooLarge])
        #expect(a[.applied] == a.deliveries, "every routed push to a live activity applies")
    }

    @Test("token-rotation storm: pushes racing a rotation reach the old token → Unregistered")
    func rotation() throws {
        let a = try run("faults-rotation").accounting
        #expect((0.25...0.35).contains(share(a[.unregistered], a.pushes)), "\(a[.unregistered]) of \(a.pushes)")
        #expect(a.unroutableTotal == a[.unregistered] && a.rejectedTotal == 0)
        #expect(a.deliveries == a.routed, "one delivery per routed token push")
    }

    @Test("channel churn: broadcasts to a deleted channel → ChannelNotRegistered, counted once per push")
    func channelChurn() throws {
        let r = try run("faults-channel-churn")
        let a = r.accounting
        #expect(a.unroutableTotal == a[.channelNotRegistered])
        #expect((0.22...0.38).contains(share(a[.channelNotRegistered], a.pushes)), "\(a[.channelNotRegistered])")
        // Every scheduled broadcast is one push, however many workers apply it.
        #expect(a.pushes <= r.events)
        #expect(a.deliveries > 0 && a[.applied] == a.deliveries)
    }

    @Test("devices offline: held pushes expire or are coalesced by newer ones; the rest apply")
    func offline() throws {
        let a = try run("faults-offline").accounting
        #expect(a[.expired] > 0 && a[.coalesced] > 0)
        #expect(a[.applied] + a[.expired] + a[.coalesced] == a.deliveries)
        #expect((0.1...0.5).contains(share(a[.expired] + a[.coalesced], a.deliveries)))
    }

    @Test("budget exhaustion: at most 20 priority-10 updates per activity per hour apply, the rest throttled")
    func budget() throws {
        let r = try run("faults-budget")
        let a = r.accounting
        #expect(a[.throttled] > 0)
        #expect(a[.applied] <= 20 * r.activities, "\(a[.applied]) applied for \(r.activities) activities")
        #expect(a[.applied] + a[.throttled] == a.deliveries)
    }

    @Test("8-hour edge: thousands of activities end at once; no update applies at or after it")
    func eightHours() throws {
        // Ten minutes past the edge (the burst across it included) against a run cut just before it.
        let full = try run("faults-edges", duration: 29_400, workers: 1)
        let before = try run("faults-edges", duration: 28_799.9, workers: 1)
        #expect(full.activities >= 4_000)
        #expect(before.accounting[.ignoredEnded] == 0)
        #expect(full.accounting[.applied] == before.accounting[.applied], "an update applied after the 8-hour end")
        #expect(full.accounting[.ignoredEnded] > 0)
        #expect(full.accounting[.ignoredEnded] == full.accounting.deliveries - before.accounting.deliveries)
    }

    @Test("12-hour edge: every activity ended at 8 h is dismissed 4 h later; Lock Screens empty at 12 h")
    func twelveHours() throws {
        let s = try #require(BuiltinScenarios.named("faults-edges"))
        let world = World(scenario: s)
        let engine = WorkerEngine(world: world, index: 0, count: 1, hrtime: { 0 })
        let store = engine.pipeline.store
        let start = world.epochSeconds * 1000
        let hour: Int64 = 3_600_000
        #expect(store.activityCount >= 4_000)
        for a in 0..<Int32(store.activityCount) {
            #expect(store.state(a, nowMillis: start + 8 * hour - 1) == .active)
            #expect(store.state(a, nowMillis: start + 8 * hour) == .ended)
            #expect(store.state(a, nowMillis: start + 12 * hour - 1) == .ended)
            #expect(store.state(a, nowMillis: start + 12 * hour) == .dismissed)
        }
        var visible = 0
        for d in 0..<Int32(store.deviceCount) {
            #expect(store.lockScreen(device: d, nowMillis: start + 12 * hour).isEmpty)
            #expect(store.island(device: d, nowMillis: start + 8 * hour).isEmpty, "ended activities leave the island")
            visible += store.lockScreen(device: d, nowMillis: start + 12 * hour - 1).count
        }
        #expect(visible == store.activityCount, "ended activities stay on the Lock Screen until dismissed")
    }
}
