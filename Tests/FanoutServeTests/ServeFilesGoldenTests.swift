import FanoutMetrics
import FanoutSim
import Foundation
import Testing

@testable import FanoutAPNs
@testable import FanoutServe

/// The files `fanout serve smoke` writes (population.jsonl, rotated-tokens.jsonl, state.jsonl) after a scripted set
/// of requests, byte for byte against golden files: one loop and two (forwarded pushes, merged dumps). The requests
/// go through the real server delegate in memory (`InMemoryServe`), the wall clock fixed, so the files repeat bit
/// for bit. A change to them must be deliberate: regenerate with FANOUT_UPDATE_GOLDEN=1.
@Suite("Serve files: population, rotated tokens and state dump of serve smoke (golden)")
struct ServeFilesGoldenTests {
    static let now: Int64 = 1_800_000_000
    /// When the state is dumped: an hour after the start (the stale dates have passed, ended activities are dismissed).
    static let dumpMillis = now * 1000 + 3_600_000

    /// Built as `fanout serve` builds them, population.jsonl and rotated-tokens.jsonl written into `folder`.
    static func services(workers: Int, folder: URL) throws -> [APNsService] {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 120
        s.faults.rotationShare = 0.05
        return try ServePopulation.build(
            scenario: s, auth: nil, nowSeconds: now, workers: workers, folder: folder.path, clock: { 0 }
        ).services
    }

    /// The three files as `fanout serve` writes them: population.jsonl and rotated-tokens.jsonl as
    /// `ServePopulation.build` streams them (the workers' parts joined), state.jsonl as `ServeState.write`
    /// streams it, into a temporary folder, read back.
    static func files(_ services: [APNsService], folder: URL) throws -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        try ServeState.write(services: services, nowMillis: dumpMillis, path: folder.path + "/state.jsonl")
        for name in ["population.jsonl", "rotated-tokens.jsonl", "state.jsonl"] {
            out[name] = Array(try Data(contentsOf: folder.appendingPathComponent(name)))
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(left == ["population.jsonl", "rotated-tokens.jsonl", "state.jsonl"], "no temporary file left")
        return out
    }

    static func temporaryFolder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-golden-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    struct Row {
        var device: String
        var app: String
        var activity: String
        var type: String
        var token: String
        var startToken: String?
        var channel: String?
    }

    static func rows(_ population: [UInt8]) throws -> [Row] {
        try population.split(separator: UInt8(ascii: "\n")).map { line in
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
            return Row(
                device: o["device"] as! String, app: o["app"] as! String, activity: o["activity"] as! String,
                type: o["attributes-type"] as! String, token: o["token"] as! String,
                startToken: o["push-to-start-token"] as? String, channel: o["channel"] as? String)
        }
    }

    static func body(type: String, event: String, timestamp: Int64, n: Int, extra: String = "") -> [UInt8] {
        let state =
            type == "GameAttributes"
            ? #""content-state":{"home":\#(n % 7),"away":\#(n % 3),"clock":"\#(n):00","winProbability":0.\#(n % 10),"#
                + #""final":\#(event == "end"),"lastEvent":"goal \#(n)"}"#
            : #""content-state":{"stage":"stage \#(n)","etaMinutes":\#(n % 40),"progress":0.\#(n % 10),"courier":null}"#
        return Array(#"{"aps":{"event":"\#(event)","timestamp":\#(timestamp),\#(extra)\#(state)}}"#.utf8)
    }

    /// HEADERS + DATA of one request on `stream` (HPACK literals, as `InMemoryServeTests.post`).
    static func request(stream: UInt32, path: String, headers: [(String, String)], body: [UInt8]) -> [UInt8] {
        var block = InMemoryServeTests.literal(":method", Array("POST".utf8))
        block += InMemoryServeTests.literal(":path", Array(path.utf8))
        block += InMemoryServeTests.literal(":scheme", Array("https".utf8))
        block += InMemoryServeTests.literal(":authority", Array("localhost".utf8))
        for (name, value) in headers { block += InMemoryServeTests.literal(name, Array(value.utf8)) }
        return InMemoryServeTests.frame(type: 1, flags: 0x4, stream: stream, block)
            + InMemoryServeTests.frame(type: 0, flags: 0x1, stream: stream, body)
    }

    /// The scripted requests, from the population (the first rows given, its rotated tokens, a channel, a start token):
    /// updates, a stale retry, ends, an alert-only push, a bad payload, pushes to rotated tokens, broadcasts, a start.
    typealias Scripted = (path: String, headers: [(String, String)], body: [UInt8])

    static func script(_ rows: [Row], rotated: [[String: Any]]) -> [Scripted] {
        var out: [Scripted] = []
        func topic(_ app: String) -> [(String, String)] {
            [("apns-push-type", "liveactivity"), ("apns-topic", "\(app).push-type.liveactivity")]
        }
        for (n, r) in rows.prefix(60).enumerated() {
            let event = n % 11 == 10 ? "end" : "update"
            var headers = topic(r.app)
            if n % 4 == 0 { headers.append(("apns-priority", "5")) }
            if event == "end" { headers.append(("apns-expiration", "0")) }
            out.append(
                ("/3/device/\(r.token)", headers, body(type: r.type, event: event, timestamp: now + Int64(n), n: n)))
            if n % 9 == 0 {  // a retry: the same timestamp again (stale)
                out.append(
                    (
                        "/3/device/\(r.token)", headers,
                        body(type: r.type, event: "update", timestamp: now + Int64(n), n: n)
                    ))
            }
            if n % 13 == 5 {  // a later update with a stale date and a relevance score
                let extra = #""stale-date":\#(now + 1800),"relevance-score":\#(n),"#
                out.append(
                    (
                        "/3/device/\(r.token)", headers,
                        body(type: r.type, event: "update", timestamp: now + 100 + Int64(n), n: n + 1, extra: extra)
                    ))
            }
        }
        if let r = rows.first {
            out.append(("/3/device/\(r.token)", topic(r.app), Array(#"{"aps":{"event":"update","timestamp":1}"#.utf8)))
            out.append(
                (
                    "/3/device/\(r.token)", [("apns-push-type", "alert"), ("apns-topic", r.app)],
                    Array(#"{"aps":{"alert":"hi"}}"#.utf8)
                ))
        }
        for o in rotated {
            let activity = o["activity"] as! String
            if let r = rows.first(where: { $0.activity == activity }) {
                out.append(
                    (
                        "/3/device/\(o["token"] as! String)", topic(r.app),
                        body(type: r.type, event: "update", timestamp: now + 7, n: 7)
                    ))
            }
        }
        var broadcasts = 0
        var seen: Set<String> = []
        for r in rows {
            guard let channel = r.channel, broadcasts < 3, seen.insert(channel).inserted else { continue }
            broadcasts += 1
            out.append(
                (
                    "/4/broadcasts/apps/\(r.app)",
                    [
                        ("apns-channel-id", channel), ("apns-push-type", "LiveActivity"), ("apns-priority", "10"),
                        ("apns-expiration", "0"),
                    ],
                    body(type: r.type, event: "update", timestamp: now + 200 + Int64(broadcasts), n: 20 + broadcasts)
                ))
        }
        if let r = rows.last(where: { $0.startToken != nil }) {
            let extra = #""attributes-type":"\#(r.type)","attributes":{},"alert":{"title":"t","body":"b"},"#
            out.append(
                (
                    "/3/device/\(r.startToken!)", topic(r.app),
                    body(type: r.type, event: "start", timestamp: now + 300, n: 3, extra: extra)
                ))
        }
        return out
    }

    /// Serves the script on one connection to worker 0, in batches of 50 streams, the workers settled after each.
    static func serve(workers: Int) throws -> (files: [String: [UInt8]], accepted: Int, requests: Int) {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let services = try Self.services(workers: workers, folder: folder)
        let population = Array(try Data(contentsOf: folder.appendingPathComponent("population.jsonl")))
        let rotatedFile = Array(try Data(contentsOf: folder.appendingPathComponent("rotated-tokens.jsonl")))
        let rotated = try rotatedFile.split(separator: UInt8(ascii: "\n")).map {
            try #require(try JSONSerialization.jsonObject(with: Data($0)) as? [String: Any])
        }
        // In activity order, so that both workers' devices are pushed to (the population lists worker 0's first).
        let script = Self.script(try rows(population).sorted { $0.activity < $1.activity }, rotated: rotated)
        let serve = try InMemoryServe(services: services, wallMillis: now * 1000)
        defer { try? serve.close() }
        let connection = try serve.open(on: 0) { _ in }
        var bytes =
            Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + InMemoryServeTests.frame(type: 4, flags: 0, stream: 0, [])
        for (i, r) in script.enumerated() {
            bytes += request(stream: UInt32(2 * i + 1), path: r.path, headers: r.headers, body: r.body)
            if i % 50 == 49 || i == script.count - 1 {
                bytes.withUnsafeBytes { connection.receive($0) }
                bytes.removeAll()
                serve.settle()
            }
        }
        for s in services { s.runPendingFanouts(wallMillis: now * 1000) }
        serve.settle()
        #expect(serve.identitiesHold)
        #expect(services.allSatisfy { $0.stats.acceptedPushes > 0 }, "every worker judged pushes")
        #expect(services.reduce(0) { $0 + $1.stats.acceptedBroadcasts } == 3)
        let accepted = services.reduce(0) { $0 + $1.stats.acceptedPushes + $1.stats.acceptedBroadcasts }
        let requests = services.reduce(0) { $0 + $1.stats.requests }
        return (try files(services, folder: folder), accepted, requests)
    }

    /// Compares `bytes` with a golden file (FANOUT_UPDATE_GOLDEN=1 rewrites it first).
    static func golden(_ name: String, _ bytes: [UInt8]) throws -> Bool {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden/\(name)")
        if ProcessInfo.processInfo.environment["FANOUT_UPDATE_GOLDEN"] == "1" {
            try Data(bytes).write(to: url, options: .atomic)
        }
        return try Array(Data(contentsOf: url)) == bytes
    }

    @Test("the sources read back from the followers and the channels are the ones the world draws")
    func sources() throws {
        for service in Self.servicesWithoutFiles(workers: 2) {
            let sources = service.engine.sourcesOfActivities()
            #expect(sources.count == service.engine.activityCount && !sources.isEmpty)
            for a in 0..<Int32(sources.count) {
                let (d, k) = service.engine.deviceAndSlot(of: a)
                #expect(Int(sources[Int(a)]) == service.engine.world.source(device: d, slot: k))
            }
        }
    }

    static func servicesWithoutFiles(workers: Int) -> [APNsService] {
        var s = BuiltinScenarios.named("smoke")!
        s.population.devices = 120
        return (0..<workers).map { k in
            APNsService(scenario: s, auth: nil, nowSeconds: now, worker: k, of: workers) { 0 }
        }
    }

    @Test("three loops: each part lands at its counted offset, the directory knows every token's loop")
    func threeLoops() throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var s = BuiltinScenarios.named("smoke")!
        s.faults.rotationShare = 0.05
        let built = try ServePopulation.build(
            scenario: s, auth: nil, nowSeconds: Self.now, workers: 3, folder: folder.path, clock: { 0 })
        let file = Array(try Data(contentsOf: folder.appendingPathComponent("population.jsonl")))
        #expect(file == built.services.flatMap { $0.populationLines() })
        #expect(built.populationBytes == file.count)
        #expect(built.services.dropLast().allSatisfy { $0.populationByteCount() == $0.populationLines().count })
        let rotated = Array(try Data(contentsOf: folder.appendingPathComponent("rotated-tokens.jsonl")))
        #expect(!rotated.isEmpty && rotated == built.services.flatMap { $0.rotatedTokenLines() })
        let directory = try #require(built.cluster?.directory)
        let expected = TokenDirectory(hashesByWorker: built.services.map { $0.ownedTokenHashes() })
        #expect(directory.count == expected.count && directory.count > 1_500)
        for row in try Self.rows(file) {
            let owner = directory.owner(Array(row.token.utf8)[...])
            #expect(owner != nil && owner == expected.owner(Array(row.token.utf8)[...]))
        }
    }

    @Test("one loop and two: the files match the golden files byte for byte", arguments: [1, 2])
    func matchesGolden(workers: Int) throws {
        let (files, accepted, requests) = try Self.serve(workers: workers)
        #expect(requests > 80 && accepted > 60, "\(requests) requests, \(accepted) accepted")
        for name in ["population.jsonl", "rotated-tokens.jsonl", "state.jsonl"] {
            let bytes = try #require(files[name])
            #expect(!bytes.isEmpty, "\(name) is empty")
            #expect(try Self.golden("serve-smoke-\(workers)w.\(name)", bytes), "\(name) differs from the golden file")
        }
    }
}
