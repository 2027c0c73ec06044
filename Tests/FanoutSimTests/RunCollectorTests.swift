import FanoutCore
import FanoutMetrics
import Testing

@testable import FanoutSim

/// Workers hand over finished intervals and event completions while the run goes on; the result
/// must be exactly what handing everything over at the end gives, and what stays in memory must
/// follow the offline window, not the run's length.
@Suite("Streamed run measurements")
struct RunCollectorTests {
    /// faults-offline for 10 simulated minutes: a third of the devices hold pushes for 10 s windows,
    /// so an event's completion can change long after it was processed.
    func scenario() throws -> Scenario {
        var s = try #require(BuiltinScenarios.named("faults-offline"))
        s.durationSeconds = 600
        return s
    }

    /// Runs `workers` engines over every event (a constant clock: virtual time is the cost model's
    /// alone, so both runs measure the same latencies). Worker `w` hands over after every
    /// `handoverEvery[w]` events (0: only at the end).
    func collect(_ s: Scenario, handoverEvery: [Int]) throws -> (RunCollector, [WorkerEngine], Int) {
        let world = World(scenario: s)
        let workers = handoverEvery.count
        let engines = (0..<workers).map { WorkerEngine(world: world, index: $0, count: workers, hrtime: { 0 }) }
        var collector = try RunCollector(
            workers: workers, intervalNanos: WorkerEngine.virtualIntervalNanos, keepEvents: true)
        var n = 0
        try forEachEvent(world) { batch, k in
            n += 1
            for (w, engine) in engines.enumerated() {
                engine.process(batch, k)
                if handoverEvery[w] > 0, n % handoverEvery[w] == 0 {
                    let sample = engine.takeSample()
                    try collector.add(
                        worker: w, intervals: sample.intervals, intervalIndex: sample.intervalIndex,
                        completions: sample.completions)
                }
            }
        }
        for (w, engine) in engines.enumerated() {
            let r = engine.result()
            try collector.add(worker: w, intervals: r.intervals, intervalIndex: .max, completions: r.completions)
        }
        try collector.finish()
        return (collector, engines, n)
    }

    @Test("handing over every few events gives exactly the end-of-run result (histograms, log, events)")
    func sameAsAtTheEnd() throws {
        let s = try scenario()
        let (streamed, streamedEngines, events) = try collect(s, handoverEvery: [1, 7])
        let (atEnd, _, _) = try collect(s, handoverEvery: [0, 0])
        #expect(streamed.events == events && atEnd.events == events)
        #expect(streamed.kept == atEnd.kept)
        #expect(streamed.kept.count == events)
        for metric in Metric.completionMetrics {
            #expect(streamed.totals[metric] == atEnd.totals[metric], "\(metric)")
        }
        #expect(streamed.totals[.fanoutCompletion].totalCount > 1000)
        let a = try streamed.intervals()
        let b = try atEnd.intervals()
        #expect(a.count == b.count && a.count > 10)
        #expect(zip(a, b).allSatisfy { $0.index == $1.index && $0.metric == $1.metric && $0.bytes == $1.bytes })
        #expect(Set(a.map(\.index)).count >= 10, "ten one-minute intervals, and the tail")
        // The batch path (`EventCompletions`, used by `fanout merge`) agrees with the streamed one.
        var batch = LatencyRecorder()
        atEnd.kept.record(into: &batch)
        #expect(batch[.fanoutCompletion] == streamed.totals[.fanoutCompletion])
        let batchIntervals = atEnd.kept.intervals(intervalNanos: WorkerEngine.virtualIntervalNanos)
        let streamedCompletion = a.filter { Metric.completionMetrics.contains($0.metric) }
        #expect(batchIntervals.count == streamedCompletion.count)
        #expect(Set(batchIntervals.map(\.bytes)) == Set(streamedCompletion.map(\.bytes)))
        // Held pushes kept events open past their processing (the frontier waited for them).
        #expect(streamedEngines[0].peakRetainedEvents > 1)
    }

    @Test("what a worker and the coordinator keep follows the offline window, not the run's length")
    func bounded() throws {
        var s = try scenario()
        s.durationSeconds = 300
        let (short, shortEngines, shortEvents) = try collect(s, handoverEvery: [10, 10])
        s.durationSeconds = 1200
        let (long, longEngines, longEvents) = try collect(s, handoverEvery: [10, 10])
        #expect(longEvents > 3 * shortEvents)
        // 10 events/s and 10 s offline windows: about 100 events are open at once, whatever the length.
        for engine in shortEngines + longEngines {
            #expect(engine.peakRetainedEvents < 400, "\(engine.peakRetainedEvents)")
        }
        #expect(long.peakWindow < 400 && short.peakWindow < 400, "\(long.peakWindow)")
        #expect(long.peakPending <= 2 * Metric.allCases.count)
        // Without handing over, the columns hold every event.
        let (_, atEnd, _) = try collect(s, handoverEvery: [0, 0])
        #expect(atEnd[0].peakRetainedEvents == longEvents)
    }

    @Test("a whole run that keeps no event columns measures the same as one that does")
    func keepOrNot() throws {
        var smoke = try #require(BuiltinScenarios.named("smoke"))
        smoke.durationSeconds /= 4
        let kept = try Simulation.run(smoke, workers: 2, keepEventCompletions: true) { _ in }
        let dropped = try Simulation.run(smoke, workers: 2, keepEventCompletions: false) { _ in }
        #expect(kept.completion.count == kept.events && dropped.completion.count == 0)
        #expect(kept.events == dropped.events && kept.accounting == dropped.accounting)
        for metric in Metric.completionMetrics {
            #expect(kept.recorder[metric].totalCount == dropped.recorder[metric].totalCount, "\(metric)")
        }
        #expect(kept.intervals.map(\.index) == dropped.intervals.map(\.index))
    }
}

/// With coalescing, superseded held pushes are compacted away; what is delivered, and when, must not
/// change.
@Suite("Held pushes compacted")
struct HeldCompactionTests {
    func run(compactAt: Int) throws -> (WorkerEngine, Int) {
        var s = try #require(BuiltinScenarios.named("faults-offline"))
        s.durationSeconds = 300
        let world = World(scenario: s)
        let engine = WorkerEngine(world: world, index: 0, count: 1, hrtime: { 0 })
        engine.heldCompactAt = compactAt
        var events = 0
        forEachEvent(world) { batch, k in
            engine.process(batch, k)
            events += 1
        }
        return (engine, events)
    }

    @Test("compacting after every 8 superseded records: same outcomes, recorder and completions as never")
    func sameResult() throws {
        let (compacted, events) = try run(compactAt: 8)
        let (never, _) = try run(compactAt: .max)
        #expect(compacted.heldCompactions > 10 && never.heldCompactions == 0)
        #expect(compacted.peakHeld < never.peakHeld)
        #expect(compacted.pipeline.accounting == never.pipeline.accounting)
        #expect(compacted.pipeline.accounting[.coalesced] > 100)
        let a = compacted.result()
        let b = never.result()
        #expect(a.completions == b.completions && a.completions.count == events)
        for metric in Metric.allCases where metric != .apply && metric != .validate && metric != .route {
            #expect(a.histograms[metric] == b.histograms[metric], "\(metric)")
        }
    }
}
