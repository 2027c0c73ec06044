import FanoutCore
import FanoutMetrics
import Testing

@testable import FanoutSim

@Suite("Simulation runs", .serialized)
struct SimulationTests {
    func run(_ s: Scenario, workers: Int) throws -> RunResult {
        try Simulation.run(s, workers: workers) { _ in }
    }

    @Test("virtual time: identical counts on 1, 2 and 4 workers and on a repeated run")
    func determinism() throws {
        let smoke = try #require(BuiltinScenarios.named("smoke"))
        let one = try run(smoke, workers: 1)
        let two = try run(smoke, workers: 2)
        let four = try run(smoke, workers: 4)
        let again = try run(smoke, workers: 2)
        #expect(one.accounting == two.accounting)
        #expect(two.accounting == four.accounting)
        #expect(two.accounting == again.accounting)
        #expect(one.activities == four.activities && one.events == four.events)
        #expect(one.recorder[.endToEnd].totalCount == four.recorder[.endToEnd].totalCount)
    }

    @Test("smoke (in full): identities hold and every fault shows up in the counts")
    func smoke() throws {
        let r = try run(try #require(BuiltinScenarios.named("smoke")), workers: 2)
        let a = r.accounting
        #expect(a.identitiesHold)
        #expect(a[.payloadTooLarge] > 0 && a[.badRequestPayload] > 0 && a[.unregistered] > 0)
        for outcome: Outcome in [.applied, .ignoredEnded, .ignoredStaleTimestamp, .throttled, .expired, .coalesced] {
            #expect(a[outcome] > 0, "\(outcome.name)")
        }
        // Every applied or refused delivery has one end-to-end sample; expired and coalesced pushes
        // never reach a device, so they have none.
        let delivered = a.deliveries - a[.expired] - a[.coalesced]
        #expect(r.recorder[.endToEnd].totalCount == UInt64(delivered))
        #expect(r.recorder[.fanoutCompletion].totalCount > 0)
    }

    @Test("default and million, shortened: identities hold", arguments: ["default", "million"])
    func shortened(name: String) throws {
        var s = try #require(BuiltinScenarios.named(name))
        s.clock = .virtual
        s.population.devices = min(s.population.devices, 4000)
        s.durationSeconds = min(s.durationSeconds, name == "million" ? 7200 : 4)
        let r = try run(s, workers: 2)
        #expect(r.accounting.identitiesHold)
        #expect(r.accounting.deliveries > 0)
    }

    @Test("costNanosPerDelivery: a worker applies at most 1e9 / cost deliveries per second")
    func artificialCost() throws {
        // One broadcast source followed by every device; events arrive faster than the worker can
        // apply them, so in virtual time it is busy from the first event to the last completion.
        var s = try Scenario.parse(Array(ScenarioTests.minimal.utf8), file: "s.json")
        s.clock = .virtual
        s.durationSeconds = 0.1
        s.population.devices = 10
        s.population.activitiesPerDeviceMin = 1
        s.population.activitiesPerDeviceMax = 1
        s.sources = Scenario.Sources(count: 1, zipfExponent: 1, broadcastShare: 1)
        s.scaleRates(by: 400)  // 2,000 events/s × 10 deliveries × 200 µs = 400% of one worker
        s.costNanosPerDelivery = 200_000
        let r = try run(s, workers: 1)
        #expect(r.accounting.identitiesHold && r.accounting.deliveries == r.events * 10)
        let busy = Double(r.completion.lastNanos.max() ?? 0) - Double(r.completion.intendedNanos.first ?? 0)
        let paid = Double(r.accounting.deliveries) * 200_000
        // Virtual time is the model's alone: each delivery takes the cost (it is above the model's apply),
        // each push adds the model's validate, route and decode (about 0.4% here), nothing else — not the
        // machine's speed, and the cost is not counted twice.
        let model = s.costModel
        let perPush = Double(model.validateNanos + model.routeNanos + model.decodeNanos)
        #expect(busy >= paid && busy <= paid + Double(r.accounting.pushes) * perPush, "busy \(busy) ns for \(paid) ns")
    }

    @Test("real time, broadcasts applied in slices between due events: counts equal the virtual-time run's")
    func slicedBroadcasts() throws {
        var s = try #require(BuiltinScenarios.named("default"))
        s.durationSeconds = 1
        s.population.devices = 3000
        s.scaleRates(by: 5)  // ~1,000 events/s: a large broadcast is still applying when the next is due
        // Each delivery takes at least 2 µs of real time (a spin on the monotonic clock), however fast the
        // machine: a broadcast to n local subscribers lasts at least n × 2 µs, so one to the largest
        // channels (about 1,300 subscribers: 2.6 ms) outlasts the slice quantum (0.25 ms) and the gap to the
        // next event (about 0.85 ms), and yields. A slower or busier machine only yields more.
        s.costNanosPerDelivery = 2_000
        s.sliceBroadcasts = true
        s.clock = .virtual
        let virtual = try run(s, workers: 1)
        s.clock = .real
        let real = try run(s, workers: 1)
        #expect((virtual.completion.recipients.max() ?? 0) * 2_000 > 2_000_000, "broadcasts of over 2 ms")
        #expect(real.slicedFanouts > 0)
        #expect(virtual.slicedFanouts == 0)
        // Outcomes follow the order of updates per activity; slicing keeps each source's order, so the
        // counts are the same as in the sequential virtual-time run.
        #expect(real.accounting == virtual.accounting)
        #expect(real.events == virtual.events)
        #expect(real.recorder[.endToEnd].totalCount == virtual.recorder[.endToEnd].totalCount)
        #expect(real.completion.recipients == virtual.completion.recipients)
    }

    /// Open loop: the run cannot end before its last event is due (a lower bound that holds on any machine);
    /// that it ends at all is the test's time limit (a generous timeout, not a measurement).
    @Test(
        "real time: a short open-loop run measures schedule lag and end-to-end from intended times",
        .timeLimit(.minutes(1)))
    func realTime() throws {
        var s = try #require(BuiltinScenarios.named("smoke"))
        s.clock = .real
        s.durationSeconds = 1.5
        let r = try run(s, workers: 2)
        #expect(r.accounting.identitiesHold)
        // Every worker sees every event: it records its lag or skips it (no local recipient).
        #expect(r.recorder[.scheduleLag].totalCount + UInt64(r.eventsSkipped) == UInt64(r.events * 2))
        let lastDue = Double(r.completion.intendedNanos.max() ?? 0) / 1e9
        #expect(lastDue > 1.3 && r.wallSeconds >= lastDue, "last event due at \(lastDue) s, run \(r.wallSeconds) s")
    }
}

@Suite("Coordinated omission")
struct CoordinatedOmissionTests {
    /// A clock the test moves by hand.
    final class FakeClock: @unchecked Sendable {
        var nanos: UInt64 = 1_000_000_000_000
    }

    @Test("a stalled worker shows up as latency, not as missing samples")
    func stall() throws {
        var s = try #require(BuiltinScenarios.named("smoke"))
        s.faults = .init(
            outOfOrderShare: 0, malformedShare: 0, oversizedShare: 0, rotationShare: 0, dismissShare: 0,
            offline: nil, coalescing: false)
        s.lifecycle = .init(endFractionMin: nil, endFractionMax: nil, dismissalAfterSeconds: nil)
        s.sources.broadcastShare = 0
        let world = World(scenario: s)
        let clock = FakeClock()
        let engine = WorkerEngine(world: world, index: 0, count: 1, hrtime: { clock.nanos })
        let start = clock.nanos
        engine.startRealClock(atHrtime: start)
        var events: [(EventBatch, Int)] = []
        forEachEvent(world, hrtime: { clock.nanos }) { batch, k in
            if events.count < 20 && batch.sends(k) { events.append((batch, k)) }
        }
        let first = events[0].0.events[events[0].1].intendedNanos
        let last = events[19].0.events[events[19].1].intendedNanos
        // The harness stalls: it gets to all 20 events only 2 s after the last one was due.
        clock.nanos = start + last + 2_000_000_000
        for (batch, k) in events { engine.process(batch, k) }
        let r = engine.result()
        let h = r.histograms
        let deliveries = r.accounting.deliveries
        #expect(deliveries > 0)
        #expect(h[.endToEnd].totalCount == UInt64(deliveries))  // no sample is lost
        #expect(h[.endToEnd].min >= 2_000_000_000 - 1_000_000)  // each is late by at least the stall
        #expect(h[.scheduleLag].totalCount + UInt64(engine.eventsSkipped) == 20)
        #expect(h[.scheduleLag].max >= 2_000_000_000 + last - first - 5_000_000)
    }
}
