import FanoutCore
import FanoutMetrics
@testable import FanoutReport
import FanoutSim
@testable import FanoutAPNs
@testable import FanoutServe
import Foundation
import Testing

/// Serve's measurements as HdrHistogram's own Python reader sees them: every sample in latency.hlog exactly once.
@Suite("Serve measurements: latency.hlog read by HdrHistogram_py")
struct ServeMeasurementTests {
    /// Per tag, the sum of the log's interval counts, and the log's StartTime, as HdrHistogram_py reads them.
    static let hdrhScript = """
        import json, sys
        from hdrh.log import HistogramLogReader
        from hdrh.histogram import HdrHistogram
        reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600 * 10**9, 3))
        counts = {}
        intervals = 0
        while True:
            h = reader.get_next_interval_histogram()
            if h is None:
                break
            intervals += 1
            counts[h.get_tag()] = counts.get(h.get_tag(), 0) + h.get_total_count()
        print(json.dumps({"counts": counts, "intervals": intervals, "start": reader.get_start_time_sec()}))
        """

    static func readWithHdrh(_ log: String) throws -> [String: Any] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-hlog-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("latency.hlog")
        try log.write(to: file, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", hdrhScript, file.path]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return try JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    @Test("n requests through the service, intervals taken between them: each sample once in latency.hlog")
    func eachSampleOnce() throws {
        let service = APNsServiceTests.service()
        let population = APNsServiceTests.population(service)
        let scores = population.filter { $0["app"] as! String == "com.example.scores" }
        let n = 37
        for k in 0..<n {
            let token = scores[k % scores.count]["token"] as! String
            let answer = APNsServiceTests.ask(
                service, path: "/3/device/\(token)", APNsServiceTests.scoresHeaders,
                APNsServiceTests.payload(APNsServiceTests.now + Int64(k)))
            #expect(answer.status == 200)
            service.recordService(UInt64(1_000 + k))  // what the server records as it submits the answer
            if k == 0 { service.recordService(2 * LatencyRecorder.highestTrackableNanos) }  // over an hour
            if k % 10 == 9 { service.closeInterval() }
        }
        service.closeInterval(last: true)
        var info = ServeReport.Info(
            scenario: "smoke", seed: 1, listen: "127.0.0.1:0", transport: "h2c", auth: "none",
            startedAt: "2027-01-15T08:00:00Z", gitRevision: "test")
        info.startedAtSeconds = 1_800_000_000.5
        let files = try ServeReport.files(
            ServeResults(info, services: [service], connections: ConnectionStats(), bytes: (0, 0), elapsedSeconds: 4))
        let summary = try JSONSerialization.jsonObject(with: Data(files["summary.json"]!.utf8)) as! [String: Any]
        let latency = summary["latency"] as! [String: [String: Any]]
        let read = try Self.readWithHdrh(files["latency.hlog"]!)
        let counts = read["counts"] as! [String: Int]
        #expect(read["start"] as? Double == 1_800_000_000.5)
        #expect(read["intervals"] as? Int ?? 0 >= 4 * 3, "4 intervals of service, delivery and validate at least")
        for m in ServeMetric.allCases where m != .endToEnd {  // endToEnd: only with --expect-events
            let expected = latency[m.name]!["count"] as! Int
            #expect(counts[m.name, default: 0] == expected, "\(m.name)")
        }
        #expect(counts["service"] == n + 1 && counts["delivery"] == n && counts["validate"] == n)
        // The sample above one hour is in the log (as one hour) and counted as clamped.
        #expect((summary["measurement"] as? [String: Any])?["clampedSamples"] as? Int == 1)
    }

    @Test("the loops' intervals merged: two services, one log, each sample once")
    func twoLoops() throws {
        let log = ServeMeasurements(loops: 2, startNanos: 0)
        let clock = { @Sendable in UInt64(0) }
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 20
        let services = (0..<2).map {
            APNsService(scenario: s, auth: nil, nowSeconds: APNsServiceTests.now, worker: $0, of: 2, clock: clock)
        }
        for service in services { service.measure(into: log) }
        for round in 0..<3 {
            for (k, service) in services.enumerated() {
                for v in 0..<(5 + k + round) { service.recordService(UInt64(100 + v)) }
                service.closeInterval(last: round == 2)
            }
        }
        var info = ServeReport.Info(
            scenario: "smoke", seed: 1, listen: "127.0.0.1:0", transport: "h2c", auth: "none",
            startedAt: "2027-01-15T08:00:00Z", gitRevision: "test")
        info.workers = 2
        let files = try ServeReport.files(
            ServeResults(info, services: services, connections: ConnectionStats(), bytes: (0, 0), elapsedSeconds: 3))
        let read = try Self.readWithHdrh(files["latency.hlog"]!)
        // 5+6+7 from loop 0, 6+7+8 from loop 1: 39, in three intervals (one per round, both loops merged).
        #expect(read["counts"] as? [String: Int] == ["service": 39] && read["intervals"] as? Int == 3)
        let summary = try JSONSerialization.jsonObject(with: Data(files["summary.json"]!.utf8)) as! [String: Any]
        #expect((summary["latency"] as! [String: [String: Any]])["service"]?["count"] as? Int == 39)
    }

    @Test("ServeMetric's names are the ones compare knows for a serve run")
    func namesKnownToCompare() {
        #expect(ServeMetric.allCases.map(\.name) == ServeSummaryFile.metricNames)
    }
}
