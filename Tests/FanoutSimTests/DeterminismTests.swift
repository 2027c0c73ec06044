import FanoutCore
import FanoutMetrics
import Testing

@testable import FanoutSim

/// Virtual time is a pure function of scenario and seed: no clock is read, so two runs measure the
/// same histograms, byte for byte, whatever the machine is doing.
@Suite("Virtual time repeats bit for bit")
struct DeterminismTests {
    func smoke() throws -> Scenario { try #require(BuiltinScenarios.named("smoke")) }

    @Test("two runs of smoke on 2 workers: the same totals and the same interval log bytes")
    func twoRuns() throws {
        let s = try smoke()
        let a = try Simulation.run(s, workers: 2) { _ in }
        let b = try Simulation.run(s, workers: 2) { _ in }
        #expect(a.accounting == b.accounting)
        #expect(a.recorder == b.recorder)
        #expect(a.recorder[.endToEnd].totalCount > 10_000)
        #expect(a.intervals.count == b.intervals.count && !a.intervals.isEmpty)
        #expect(zip(a.intervals, b.intervals).allSatisfy { $0 == $1 })
        #expect(a.clockReads == 0 && b.clockReads == 0)
    }

    @Test("counts do not depend on the worker count; the encode sample is recorded once per event")
    func workerCounts() throws {
        let s = try smoke()
        let one = try Simulation.run(s, workers: 1) { _ in }
        let three = try Simulation.run(s, workers: 3) { _ in }
        #expect(one.accounting == three.accounting)
        #expect(one.recorder[.encode].totalCount == three.recorder[.encode].totalCount)
        #expect(one.recorder[.endToEnd].totalCount == three.recorder[.endToEnd].totalCount)
        // One server per worker: with more of them, no delivery waits longer.
        #expect(three.recorder[.endToEnd].max <= one.recorder[.endToEnd].max)
    }

    @Test("the stage histograms are the cost model's; a delivery costs decode once per push, then apply")
    func costModel() throws {
        var s = try smoke()
        s.costModel = CostModel(
            encodeNanos: 1000, validateNanos: 300, routeNanos: 200, decodeNanos: 400, applyNanos: 50)
        let r = try Simulation.run(s, workers: 1) { _ in }
        #expect(r.recorder[.encode].min == 1000 && r.recorder[.encode].max == 1000)
        #expect(r.recorder[.validate].max == 300 && r.recorder[.route].max == 200)
        let apply = r.recorder[.apply]
        #expect(apply.count(at: 50) > 0 && apply.count(at: 450) > 0)
        #expect(apply.min == 50 && HdrLayout.index(of: apply.max) == HdrLayout.index(of: 450))
        // Doubling every cost moves latencies, never counts.
        var slow = s
        slow.costModel = CostModel(
            encodeNanos: 2000, validateNanos: 600, routeNanos: 400, decodeNanos: 800, applyNanos: 100)
        let q = try Simulation.run(slow, workers: 1) { _ in }
        #expect(q.accounting == r.accounting)
        #expect(q.recorder[.endToEnd].valueAtPercentile(99) > r.recorder[.endToEnd].valueAtPercentile(99))
    }
}

/// A worker that fails fails the run with its error; no thread is left waiting.
@Suite("Worker failures")
struct WorkerFailureTests {
    func scenarios() throws -> [Scenario] {
        let virtual = try #require(BuiltinScenarios.named("smoke"))
        var real = virtual
        real.clock = .real
        real.durationSeconds = 1
        return [virtual, real]
    }

    @Test("a worker failing before it is ready fails the run with its error")
    func beforeReady() throws {
        for s in try scenarios() {
            #expect(throws: SimulationError.self) {
                _ = try Simulation.run(
                    s, workers: 2, shard: .whole, keepEventCompletions: false, fault: .failBeforeReady(worker: 1)
                ) { _ in }
            }
            do {
                _ = try Simulation.run(
                    s, workers: 2, shard: .whole, keepEventCompletions: false, fault: .failBeforeReady(worker: 1)
                ) { _ in }
            } catch {
                #expect("\(error)".contains("worker 1: injected failure before ready"), "\(error)")
            }
        }
    }

    @Test("a worker failing at shutdown fails the run with its error")
    func atShutdown() throws {
        for s in try scenarios() {
            do {
                _ = try Simulation.run(
                    s, workers: 2, shard: .whole, keepEventCompletions: false, fault: .failAtShutdown(worker: 0)
                ) { _ in }
                Issue.record("the run did not fail")
            } catch {
                #expect("\(error)".contains("worker 0: injected failure at shutdown"), "\(error)")
            }
        }
    }

    @Test("the same run without a fault succeeds")
    func noFault() throws {
        for s in try scenarios() {
            let r = try Simulation.run(s, workers: 2, shard: .whole, keepEventCompletions: false, fault: .none) { _ in }
            #expect(r.accounting.identitiesHold)
        }
    }
}
