import FanoutCore
import FanoutMetrics
import FanoutPlan
import Foundation
import Testing

@testable import FanoutReport
@testable import FanoutSim

@Suite("Sharded runs and fanout merge", .serialized)
struct MergeTests {
    func smoke() throws -> Scenario { try #require(BuiltinScenarios.named("smoke")) }

    func report(_ s: Scenario, shard: Shard) throws -> RunReport {
        RunReport(try Simulation.run(s, workers: 2, shard: shard) { _ in }, gitRevision: "test")
    }

    /// Writes a shard's folder and reads it back, as `fanout merge` does.
    func roundTrip(_ r: RunReport) throws -> (folder: String, report: RunReport) {
        let dir = try Fixture.temporaryDirectory().appendingPathComponent("shard")
        try RunFiles.write(folder: dir.path, files: RunFiles.all(r))
        return (dir.path, try RunFolderReader.read(dir.path))
    }

    func expectSameCounts(_ merged: RunReport, _ whole: RunReport, _ label: String) {
        #expect(merged.accounting == whole.accounting, "\(label): accounting")
        #expect(merged.accounting.identitiesHold, "\(label)")
        #expect(merged.activities == whole.activities && merged.events == whole.events, "\(label)")
        for metric in [Metric.endToEnd] + Metric.completionMetrics {
            #expect(
                merged[metric].totalCount == whole[metric].totalCount,
                "\(label) \(metric.name): \(merged[metric].totalCount) vs \(whole[metric].totalCount)")
        }
    }

    @Test("virtual time: the merged counts of 2 and of 4 shards equal the unsharded run's exactly")
    func mergeEqualsWhole() throws {
        let s = try smoke()
        let whole = try report(s, shard: .whole)
        for n in [2, 4] {
            var parts: [(folder: String, report: RunReport)] = []
            var activities = 0
            for k in 0..<n {
                let part = try report(s, shard: try Shard(index: k, count: n))
                #expect(part.info.shard == "\(k)/\(n)")
                #expect(part.activities > 0 && part.activities < whole.activities)
                activities += part.activities
                parts.append(try roundTrip(part))
            }
            #expect(activities == whole.activities)
            let merged = try RunMerge.merge(parts)
            expectSameCounts(merged, whole, "\(n) shards")
            #expect(merged.info.shards == n && merged.info.shard == nil && merged.info.workers == 2 * n)
            // The merged folder is a whole run folder: written, read back, compared (counts exact).
            let dir = try Fixture.temporaryDirectory().appendingPathComponent("merged")
            try RunFiles.write(folder: dir.path, files: RunFiles.all(merged))
            let back = try RunFolderReader.read(dir.path)
            expectSameCounts(back, whole, "\(n) shards read back")
        }
    }

    @Test("merge refuses a missing shard, a repeated shard, another seed, a folder that is not a shard")
    func mergeRefusals() throws {
        var s = try smoke()
        s.durationSeconds = 10
        let a = try roundTrip(try report(s, shard: try Shard(index: 0, count: 3)))
        let b = try roundTrip(try report(s, shard: try Shard(index: 1, count: 3)))
        #expect(throws: ReportReadError(file: "merge", "missing shard 2/3 of 3", refusal: .shardSet)) {
            try RunMerge.merge([a, b])
        }
        do {
            _ = try RunMerge.merge([a, b, a])
            Issue.record("a repeated shard was merged")
        } catch {
            #expect(error.message.contains("shard 0/3 is also in"), "\(error)")
        }
        var other = s
        other.seed = 8
        let c = try roundTrip(try report(other, shard: try Shard(index: 2, count: 3)))
        do {
            _ = try RunMerge.merge([a, b, c])
            Issue.record("shards of different seeds were merged")
        } catch {
            #expect(error.message.contains("seed 8 differs"), "\(error)")
        }
        let whole = try roundTrip(try report(s, shard: .whole))
        do {
            _ = try RunMerge.merge([whole])
            Issue.record("a whole run was merged as a shard")
        } catch {
            #expect(error.message.contains("not a shard"), "\(error)")
        }
    }

    @Test("shard partition: every device in exactly one shard, stable across runs and machines")
    func partition() throws {
        let world = World(scenario: try smoke())
        var id: [UInt8] = []
        for n in [1, 2, 3, 4, 7] {
            let shards = try (0..<n).map { try Shard(index: $0, count: n) }
            var sizes = [Int](repeating: 0, count: n)
            for d in 0..<10_000 {
                id.removeAll()
                world.appendDeviceId(d, to: &id)
                let owners = id.withUnsafeBytes { bytes in shards.filter { $0.contains(deviceId: bytes) } }
                #expect(owners.count == 1, "device \(d) in \(owners.count) of \(n) shards")
                sizes[owners.first?.index ?? 0] += 1
            }
            // Balanced within 5% of an even split.
            for size in sizes {
                #expect(abs(Double(size) - 10_000 / Double(n)) < 500 / Double(n) + 50, "\(n): \(sizes)")
            }
        }
        // Pinned (computed independently in Python): FNV-1a 64 of the id bytes, so a shard means the same devices on every machine.
        #expect(Array("device-0000000".utf8).withUnsafeBytes { Shard.fnv1a($0) } == 0x98a4_00bf_ba25_af2e)
        #expect(throws: ShardError.self) { try Shard(parsing: "4/4") }
        #expect(throws: ShardError.self) { try Shard(parsing: "1") }
        #expect(throws: ShardError.self) { try Shard(parsing: "-1/2") }
        #expect(try Shard(parsing: "3/4") == Shard(index: 3, count: 4))
    }
}
