import FanoutCore
import FanoutMetrics
import Foundation
import Testing

@testable import FanoutReport

/// `ServeFolder`, the typed reader of a `fanout serve` run folder, and `fanout merge` of serve shards through it.
@Suite("Serve folders read back and merged")
struct ServeFolderTests {
    /// Shard k of n as `ServeReport` writes it: `requests` answers (one of them 400 BadDeviceToken), `service`
    /// samples of `serviceNanos` (one interval a second, two seconds), answers held for `heldNanos`.
    static func shard(
        _ k: Int, of n: Int, requests: Int, serviceNanos: UInt64, heldNanos: UInt64
    ) throws -> ServeResults {
        var info = ServeResults.Info(
            scenario: "smoke", seed: 7, listen: "127.0.0.1:\(2100 + k)", transport: "h2c", auth: "none",
            startedAt: "2026-11-28T10:00:0\(k)Z", gitRevision: "0123456789ab")
        info.state = .none
        info.startedAtSeconds = 1_700_000_000 + Double(k)
        info.shard = try Shard(index: k, count: n)
        info.configHash = "feedfacecafebeef"
        info.thresholds = ["service.p99=5ms"]
        var s = ServeStats()
        for _ in 0..<(requests - 1) { s.answered(200, nil) }
        s.answered(400, .badDeviceToken)
        s.acceptedPushes = requests - 1
        s.notThisShard = 1
        s.note(.unknownToken, "token of shard \(k)")
        var a = Accounting()
        a.pushes = requests - 1
        a.routed = requests - 1
        a.deliveries = 2 * (requests - 1)
        a.outcomes[Outcome.applied.rawValue] = 2 * (requests - 1)
        var c = ConnectionStats()
        c[.accepted] = 1
        c[.closed] = 1
        c[.peakOpen] = 1
        c[.bytesIn] = 1000 * (k + 1)
        c[.bytesOut] = 500
        c[.responsesSubmitted] = requests
        c.endReasons = ["closed by the client (GOAWAY)": 1]
        c.faults[.held] = 100
        c.faults[.heldPeak] = 3
        c.faults.heldNanos.record(heldNanos, count: 100)
        var latency = LatencyRecorder.serve()
        var intervals: [LoggedInterval] = []
        for second in 0..<2 {
            var h = LatencyHistogram()
            h.record(serviceNanos + UInt64(second), count: UInt64(requests / 2))
            latency.add(metricIndex: ServeMetric.service.rawValue, h)
            intervals.append(
                LoggedInterval(
                    index: second, metricIndex: ServeMetric.service.rawValue,
                    startNanos: UInt64(second) * 1_000_000_000, lengthNanos: 1_000_000_000, histogram: h))
        }
        return ServeResults(
            info: info, stats: s, accounting: a, latency: latency, intervals: intervals, connections: c,
            bytes: (c[.bytesIn], c[.bytesOut]), elapsedSeconds: 2 + Double(k))
    }

    static func write(_ r: ServeResults, in dir: URL, _ name: String) throws -> String {
        let folder = dir.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for (file, text) in try ServeReport.files(r) {
            try Data(text.utf8).write(to: folder.appendingPathComponent(file))
        }
        return folder.path
    }

    static func temporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("serve-folder-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// summary.json of `folder` with the key at `path` (dot-separated) removed.
    static func remove(_ path: String, in folder: String) throws {
        let file = (folder as NSString).appendingPathComponent("summary.json")
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file)))
        func removed(_ value: Any, _ keys: ArraySlice<Substring>) -> Any {
            guard var o = value as? [String: Any], let key = keys.first.map(String.init) else { return value }
            o[key] = keys.count == 1 ? nil : o[key].map { removed($0, keys.dropFirst()) }
            return o
        }
        let data = try JSONSerialization.data(withJSONObject: removed(object, path.split(separator: ".")[...]))
        try data.write(to: URL(fileURLWithPath: file))
    }

    @Test("a shard folder reads back as the values it was rendered from")
    func roundTrip() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try Self.shard(1, of: 2, requests: 40, serviceNanos: 1_000_000, heldNanos: 3_000_000)
        let f = try ServeFolder.read(try Self.write(r, in: dir, "s1"))
        #expect(f.results.stats.requests == 40)
        #expect(f.results.stats.byStatus == [200: 39, 400: 1])
        #expect(f.results.stats.byReason == [.badDeviceToken: 1])
        #expect(f.results.stats.notThisShard == 1)
        #expect(f.results.stats.examples[.unknownToken] == ["token of shard 1"])
        #expect(f.results.accounting == r.accounting)
        #expect(f.results.connections.faults == r.connections.faults)
        #expect(f.results.connections.endReasons == r.connections.endReasons)
        #expect(f.results.latency == r.latency)
        #expect(f.results.info.shard?.description == "1/2")
        #expect(f.results.info.startedAtSeconds == r.info.startedAtSeconds)
        #expect(f.intervals.count == 2)
        #expect(f.withoutHistogram.isEmpty)
    }

    @Test("merge of two serve shards: counts added, percentiles of the added histograms, one serve's sections")
    func mergeAdds() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r0 = try Self.shard(0, of: 2, requests: 100, serviceNanos: 10_000_000, heldNanos: 20_000_000)
        let r1 = try Self.shard(1, of: 2, requests: 300, serviceNanos: 1_000_000, heldNanos: 2_000_000)
        let folders = [try Self.write(r1, in: dir, "s1"), try Self.write(r0, in: dir, "s0")]
        let parts = try folders.map(ServeFolder.read)
        let merged = try ServeMerge.merge(parts)
        #expect(merged.stats.requests == 400)
        #expect(merged.stats.byStatus == [200: 398, 400: 2])
        #expect(merged.stats.notThisShard == 2)
        #expect(merged.accounting.deliveries == 2 * 398)
        #expect(merged.connections[.peakOpen] == 2)
        #expect(merged.bytes.read == 3000)
        #expect(merged.elapsedSeconds == 3)
        #expect(merged.info.startedAtSeconds == 1_700_000_000)
        var service = r0.latency[serve: .service]
        service.add(r1.latency[serve: .service])
        #expect(merged.latency[serve: .service] == service)
        #expect(merged.intervals.map(\.index) == [0, 1])
        // The run's objectives, judged again on the whole run's histograms: service p99 is shard 0's 10 ms.
        #expect(merged.info.thresholds == ["service.p99=5ms"])
        #expect(ServeReport.verdict(merged.info, merged.latency).exitStatus == 2)
        // Held for: 100 answers of 20 ms and 100 of 2 ms; the median of the whole is 2 ms, not the larger median.
        var held = r0.connections.faults.heldNanos
        held.add(r1.connections.faults.heldNanos)
        #expect(merged.connections.faults.heldNanos == held)

        let files = try ServeMerge.files(parts)
        let out = dir.appendingPathComponent("merged")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        for (file, text) in files { try Data(text.utf8).write(to: out.appendingPathComponent(file)) }
        #expect(files["report.html"] != nil)
        let md = files["summary.md"] ?? ""
        let sections = ["## Requests", "## Devices", "## Latency (µs)", "## Connections", "## Findings for the backend"]
        for section in sections {
            #expect(md.contains(section), "summary.md: \(section)")
        }
        #expect(md.contains("2 shards merged"))
        let read = try ServeFolder.read(out.path)
        #expect(read.results.stats.requests == 400)
        #expect(read.results.stats.notThisShard == 2)
        #expect(read.results.latency[serve: .service] == service)
        let p = service.values(atPercentiles: [50, 99])
        #expect(read.summary.latency["service"]?.p50 == p[0])
        #expect(read.summary.latency["service"]?.p99 == p[1])
        let heldMedian = held.values(atPercentiles: [50])[0]
        #expect(heldMedian < 3_000_000)
        #expect(read.results.connections.faults.heldNanos.values(atPercentiles: [50])[0] == heldMedian)
    }

    @Test("a key removed from a serve summary.json is an error naming it: merge, compare")
    func missingKey() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try Self.shard(0, of: 2, requests: 10, serviceNanos: 1_000_000, heldNanos: 1_000_000)
        for key in ["faults.heldPeak", "connections.answersDropped", "requests.notThisShard", "measurement"] {
            let folder = try Self.write(r, in: dir, key)
            try Self.remove(key, in: folder)
            #expect {
                try ServeFolder.read(folder)
            } throws: { error in
                "\(error)".contains("summary.json") && "\(error)".contains("field \(key)")
            }
        }
        for key in ["requests.acceptedPushes", "latency.service.p99Nanos"] {
            let folder = try Self.write(r, in: dir, "compare-" + key)
            try Self.remove(key, in: folder)
            #expect {
                try AnySummaryFile.read(folder)
            } throws: { error in
                "\(error)".contains("summary.json") && "\(error)".contains("field \(key)")
            }
        }
    }
}
