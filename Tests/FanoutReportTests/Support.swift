import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import FanoutSim
import Foundation
import Histogram

@testable import FanoutReport

/// A report with fixed contents: the golden files' input.
enum Fixture {
    static func report(
        scenario: String = "golden", seed: UInt64 = 42, clock: String = "virtual",
        scale: Double = 1
    ) -> RunReport {
        let info = RunInfo(
            tool: "fanout", version: "0.1.0", gitRevision: "0123456789ab", scenario: scenario, seed: seed,
            configHash: "feedfacecafebeef", clock: clock, workers: 2, durationSeconds: 120, wallSeconds: 3.25,
            startedAtSeconds: 1_700_000_000.5, machine: MachineInfo(cores: 2, cpu: "Test CPU", os: "Test OS"),
            timerOverheadNanos: 21.5, stageSampleEvery: 1, shard: nil, shards: 1)
        var a = Accounting()
        a.pushes = 1000
        a.rejected[RejectReason.payloadTooLarge.rawValue] = 10
        a.unroutable[UnroutableReason.unregistered.rawValue] = 20
        a.routed = 970
        a.deliveries = 5000
        a.outcomes[Outcome.applied.rawValue] = 4000
        a.outcomes[Outcome.throttled.rawValue] = 600
        a.outcomes[Outcome.expired.rawValue] = 400
        a.requests = 300
        a.requestsLimitExceeded = 3
        var recorder = LatencyRecorder()
        var intervals: [MergedInterval] = []
        let base: [Metric: UInt64] = [
            .encode: 400, .validate: 420, .route: 50, .apply: 480, .endToEnd: 90_000, .fanoutCompletion: 250_000,
            .fanoutCompletion1: 20_000, .fanoutCompletion2to100: 120_000, .fanoutCompletion101to10k: 900_000,
            .scheduleLag: 150,
        ]
        for index in 0..<2 {
            var interval = LatencyRecorder()
            for metric in Metric.allCases {
                guard let b = base[metric] else { continue }
                for k in 0..<500 {
                    // A long tail: 1 in 100 values 20× the base, 1 in 1000 200×.
                    let tail: UInt64 = k % 1000 == 999 ? 200 : k % 100 == 99 ? 20 : 1
                    let v = UInt64(Double(b * tail + UInt64(k * 7 % 97) * b / 50) * scale)
                    interval.record(metric, nanos: v)
                }
            }
            for metric in Metric.allCases where interval[metric].totalCount > 0 {
                intervals.append(
                    MergedInterval(index: index, metric: metric, histogram: interval[metric]))
            }
            recorder.add(interval)
        }
        var report = RunReport(
            info: info, accounting: a, activities: 2500, events: 1200, recorder: recorder, intervals: intervals,
            intervalNanos: 60_000_000_000, peakResidentBytes: 64 << 20, baselineResidentBytes: 16 << 20,
            completion: nil)
        report.measurement.sampling = "virtual time: every sample is recorded"
        report.measurement.clampedSamples = 3
        report.measurement.eventsSkipped = 17
        report.measurement.costModel = "{\"encodeNanos\": 600, \"applyNanos\": 60}"
        report.measurement.finalMergeSeconds = 0.0125
        report.measurement.reportSeconds = 0.03
        return report
    }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-report-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A file of the test bundle's Golden folder.
    static func golden(_ name: String) throws -> String {
        guard let url = Bundle.module.url(forResource: "Golden/" + name, withExtension: nil) else {
            throw FixtureError("Golden/\(name) is not in the test bundle")
        }
        return try String(contentsOf: url, encoding: .utf8)
    }

    /// Compares with a golden file; `FANOUT_UPDATE_GOLDEN=1` rewrites the source copy instead.
    static func matchesGolden(_ text: String, _ name: String, file: String = #filePath) throws -> Bool {
        if ProcessInfo.processInfo.environment["FANOUT_UPDATE_GOLDEN"] == "1" {
            let source = URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent("Golden/" + name)
            try text.write(to: source, atomically: true, encoding: .utf8)
            return true
        }
        return try golden(name) == text
    }
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
