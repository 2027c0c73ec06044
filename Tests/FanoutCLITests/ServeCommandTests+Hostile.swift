import Foundation
import Testing

// hostile and silent clients, bad flags, continued from ServeCommandTests.swift.
extension ServeCommandTests {
    @Test("hostile clients get a GOAWAY or APNs's answer; everyone else is still served")
    func hostile() throws {
        let serve = try ServeProcess(["--h2c"])
        let result = try Tool.run("python3", [Tool.script, "hostile", String(serve.port), serve.folder.path])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(serve.stop() == 0)
        let summary = try serve.summary()
        let connections = summary["connections"] as! [String: Any]
        let reasons = connections["endReasons"] as! [String: Int]
        #expect(reasons["no HTTP/2 preface"] == 1, "\(reasons)")
        #expect(reasons["no HTTP/2 preface in time"] == nil, "\(reasons)")
        // nghttp2's GOAWAY for the malformed frame is labelled apart from the clients' own clean GOAWAYs.
        #expect(reasons.filter { $0.key.hasPrefix("protocol error") }.values.reduce(0, +) == 1, "\(reasons)")
        #expect((reasons["closed by the client (GOAWAY)"] ?? 0) >= 1, "\(reasons)")
        #expect(connections["trailerFields"] as? Int == 1)
        let accepted = try #require(connections["accepted"] as? Int)
        #expect(connections["closed"] as? Int == accepted && accepted > 0)
        let byReason = (summary["requests"] as! [String: Any])["byReason"] as! [String: Int]
        #expect(byReason["PayloadTooLarge"] == 1)
        #expect(byReason["DuplicateHeaders"] == nil, "a trailer is not a duplicate header")
        #expect((summary["requests"] as! [String: Any])["identitiesHold"] as? Bool == true)
        #expect((summary["requests"] as! [String: Any])["wireIdentityHolds"] as? Bool == true)
    }

    @Test("a client that never sends the preface is closed after --preface-timeout (the only such client)")
    func silentClient() throws {
        let serve = try ServeProcess(["--h2c", "--workers", "1", "--preface-timeout", "1"])
        let result = try Tool.run("python3", [Tool.boundsScript, "silent", String(serve.port)])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(serve.stop() == 0)
        let reasons = (try serve.summary()["connections"] as! [String: Any])["endReasons"] as! [String: Int]
        #expect(reasons == ["no HTTP/2 preface in time": 1], "\(reasons)")
    }

    @Test("bad flags: a clear error and a non-zero exit, nothing written")
    func badFlags() throws {
        let dir = try CLI.temporaryDirectory()
        let out = dir.appendingPathComponent("never").path
        for (arguments, message) in [
            (["serve", "smoke", "--out", out], "choose --h2c"),
            (["serve", "smoke", "--h2c", "--tls-cert", "a", "--tls-key", "b", "--out", out], "exclude each other"),
            (["serve", "smoke", "--h2c", "--auth", "jwt", "--out", out], "--auth jwt needs"),
            (["serve", "smoke", "--h2c", "--listen", "nowhere", "--out", out], "--listen: expected HOST:PORT"),
            (["serve", "smoke", "--h2c", "--auth", "magic", "--out", out], "--auth: expected none or jwt"),
            (["serve", "smoke", "--h2c", "--max-streams", "10001", "--out", out], "--max-streams: expected 1 to 10000"),
            (["serve", "smoke", "--h2c", "--max-connections", "0", "--out", out], "--max-connections: expected"),
            (["serve", "smoke", "--h2c", "--request-timeout", "0", "--out", out], "--request-timeout: expected"),
            (["serve", "smoke", "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key", "--out", out],
                "cannot read the certificate"),
        ] {
            let result = try CLI.run(arguments)
            #expect(result.status != 0, "\(arguments)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: out + "/summary.json"))
    }
}
