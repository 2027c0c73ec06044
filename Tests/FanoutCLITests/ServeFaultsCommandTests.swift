import Foundation
import Testing

/// `fanout serve --latency/--faults` against real clients on 127.0.0.1 (curl, Python's `h2`): the delay is felt,
/// the answers are APNs's, resets and GOAWAYs arrive as HTTP/2 frames, answers held for a client that left are
/// counted, and summary.json counts every fault.
@Suite("fanout serve faults and latency (real clients)", .serialized)
struct ServeFaultsCommandTests {
    static var faultsScript: String {
        Bundle.module.url(forResource: "Resources/serve_faults", withExtension: "py")!.path
    }

    func faults(_ summary: [String: Any]) -> [String: Any] { summary["faults"] as? [String: Any] ?? [:] }

    @Test("--latency 1s: curl waits a second or more; answers held for a client that left are counted dropped")
    func latency() throws {
        let serve = try ServeProcess(["--h2c", "--workers", "1", "--latency", "1s"])
        #expect(serve.stderr.contains("injecting --latency 1s --faults none (seed 7)"), "\(serve.stderr)")
        let p = try serve.population()[0]
        let token = p["token"] as! String
        let app = p["app"] as! String
        let payload = Self.payload
        let result = try Tool.run(
            "curl",
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", "--http2-prior-knowledge", "-X", "POST",
                "-H", "apns-push-type: liveactivity", "-H", "apns-topic: \(app).push-type.liveactivity",
                "--data-binary", payload, "http://127.0.0.1:\(serve.port)/3/device/\(token)",
            ])
        let fields = result.stdout.split(separator: " ")
        #expect(fields.first == "200", "\(result.stdout) \(result.stderr)")
        let seconds = Double(fields.last ?? "") ?? 0
        // The delay is a floor; the ceiling is only against a hang (a loaded machine may be slow).
        #expect(seconds >= 1 && seconds < 30, "curl took \(seconds) s")
        let dropped = try Tool.run(
            "python3", [Self.faultsScript, "dropheld", String(serve.port), serve.folder.path, "5"])
        #expect(dropped.status == 0, "\(dropped.stdout) \(dropped.stderr)")
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let summary = try serve.summary()
        let connections = summary["connections"] as! [String: Any]
        #expect(connections["answersDropped"] as? Int == 5, "\(connections)")
        #expect(connections["responsesSubmitted"] as? Int == 1, "\(connections)")
        let requests = summary["requests"] as! [String: Any]
        #expect(requests["total"] as? Int == 6 && requests["wireIdentityHolds"] as? Bool == true, "\(requests)")
        let f = faults(summary)
        #expect(f["latency"] as? String == "1s" && f["held"] as? Int == 6, "\(f)")
        let heldFor = f["heldFor"] as? [String: Any] ?? [:]
        #expect((heldFor["p50Nanos"] as? Int ?? 0) >= 999_000_000, "held a second: \(heldFor)")
        let service = (summary["latency"] as? [String: Any])?["service"] as? [String: Any] ?? [:]
        #expect((service["maxNanos"] as? Int ?? 0) >= 999_000_000, "the service time includes it: \(service)")
        let md = try String(contentsOf: serve.folder.appendingPathComponent("summary.md"), encoding: .utf8)
        #expect(md.contains("## Faults injected") && md.contains("--latency 1s"), "\(md)")
        let html = try String(contentsOf: serve.folder.appendingPathComponent("report.html"), encoding: .utf8)
        #expect(html.contains("<h2>Faults injected</h2>") && html.contains("--latency 1s"))
    }

    @Test("--faults 503/429/500/reset: APNs's exact answers or RST_STREAM INTERNAL_ERROR; counted, retries too")
    func answers() throws {
        let serve = try ServeProcess([
            "--h2c", "--workers", "1", "--seed", "3", "--faults", "503=25%,429=25%,500=25%,reset=10%",
        ])
        let result = try Tool.run(
            "python3", [Self.faultsScript, "answers", String(serve.port), serve.folder.path, "80"])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let out = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] ?? [:]
        let seen = out["seen"] as? [String: Int] ?? [:]
        let refused = out["refused"] as? [String: Int] ?? [:]
        let sent = seen.values.reduce(0, +)
        #expect(sent == 80 + (refused["first"] ?? 0), "each refused push sent once more: \(out)")
        for kind in ["200", "503", "429", "500", "reset"] { #expect((seen[kind] ?? 0) > 0, "\(kind): \(seen)") }
        let summary = try serve.summary()
        let injected = faults(summary)["injected"] as? [String: Int] ?? [:]
        for kind in ["503", "429", "500", "reset"] { #expect(injected[kind] == seen[kind], "\(injected) \(seen)") }
        let requests = summary["requests"] as! [String: Any]
        #expect(requests["total"] as? Int == sent - (seen["reset"] ?? 0), "a reset push is not answered")
        let reasons = requests["byReason"] as? [String: Int] ?? [:]
        #expect(reasons["ServiceUnavailable"] == seen["503"] && reasons["TooManyRequests"] == seen["429"])
        #expect(reasons["InternalServerError"] == seen["500"])
        #expect(requests["wireIdentityHolds"] as? Bool == true)
        let accounting = summary["accounting"] as! [String: Any]
        #expect(accounting["pushes"] as? Int == seen["200"], "an injected failure reaches no device")
        // Every refused push came back once (half under a fresh apns-id); those refused again never did.
        let retries = faults(summary)["retries"] as? [String: Any] ?? [:]
        func total(_ key: String) -> Int { (retries[key] as? [String: Int] ?? [:]).values.reduce(0, +) }
        #expect(total("refused") == (refused["first"] ?? 0) + (refused["retry"] ?? 0), "\(retries)")
        #expect(total("retried") == refused["first"] && total("neverRetried") == refused["retry"], "\(retries)")
        #expect(retries["untracked"] as? Int == 0 && retries["identityHolds"] as? Bool == true, "\(retries)")
        #expect((retries["delay"] as? [String: Any])?["count"] as? Int == refused["first"], "\(retries)")
    }

    static let payload =
        #"{"aps":{"event":"update","timestamp":1800000000,"content-state":{"home":1,"away":0,"clock":"1:00","#
        + #""winProbability":0.5,"final":false,"lastEvent":"x"}}}"#

    @Test("goaway-every=1s, answers held 1.5 s: GOAWAY Shutdown mid-stream, the stream answered, then the close")
    func goAway() throws {
        let serve = try ServeProcess([
            "--h2c", "--workers", "1", "--faults", "goaway-every=1s", "--latency", "1500ms",
        ])
        let p = try serve.population()[0]
        let body = serve.directory.appendingPathComponent("body.json")
        try Data(Self.payload.utf8).write(to: body)
        // nghttp (nghttp2's client) prints every frame in order; it ends once its stream is answered.
        let result = try Tool.run(
            "nghttp",
            [
                "-v", "-n", "--no-dep", "-H", ":method: POST", "-H", "apns-push-type: liveactivity",
                "-H", "apns-topic: \(p["app"] as! String).push-type.liveactivity", "-d", body.path,
                "http://127.0.0.1:\(serve.port)/3/device/\(p["token"] as! String)",
            ])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let goaway = lines.firstIndex { $0.contains("recv GOAWAY frame") }
        let answer = lines.firstIndex { $0.contains("recv (stream_id=1) :status: 200") }
        #expect(goaway != nil && answer != nil && goaway! < answer!, "GOAWAY, then the answer: \(result.stdout)")
        let frame = #"last_stream_id=1, error_code=NO_ERROR(0x00), opaque_data(21)=[{"reason":"Shutdown"}]"#
        #expect(lines.contains { $0.contains(frame) }, "\(result.stdout)")
        #expect(serve.stop() == 0, "\(serve.stderr)")
        let summary = try serve.summary()
        let injected = faults(summary)["injected"] as? [String: Int] ?? [:]
        #expect(injected["goaway"] == 1, "\(injected)")
        let connections = summary["connections"] as! [String: Any]
        let reasons = connections["endReasons"] as? [String: Int] ?? [:]
        #expect(reasons["GOAWAY Shutdown (fault: goaway-every)"] == 1, "\(reasons)")
        #expect((summary["requests"] as! [String: Any])["wireIdentityHolds"] as? Bool == true)
    }
}
