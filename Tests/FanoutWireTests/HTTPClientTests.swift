@testable import FanoutWire
import Foundation
import Testing
import UVLoop

/// A backend on 127.0.0.1 started by the test (Tests/FanoutCLITests/Resources/trigger_backend.py: http.server
/// for HTTP/1.1, Python's `h2` library for HTTP/2), killed at the end; what it received, one JSON line each.
final class TestBackend {
    let process = Process()
    let directory: URL
    let log: URL
    let port: Int

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FanoutCLITests/Resources/trigger_backend.py").path
    }

    init(_ mode: String, _ options: [String] = []) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-backend-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        log = directory.appendingPathComponent("requests.jsonl")
        let portFile = directory.appendingPathComponent("port")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", TestBackend.script, mode, portFile.path, log.path] + options
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let text = try? String(contentsOf: portFile, encoding: .utf8), let p = Int(text) {
                port = p
                return
            }
            if !process.isRunning { break }
            Thread.sleep(forTimeInterval: 0.02)
        }
        if process.isRunning { process.terminate() }
        throw HTTPClientError("the test backend (\(mode)) did not start")
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    func requests() throws -> [[String: Any]] {
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
    }

    /// A self-signed certificate for localhost and 127.0.0.1 (openssl), its key beside it.
    static func certificate(in directory: URL) throws -> (cert: String, key: String) {
        let cert = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            key, "-out", cert, "-days", "1", "-subj", "/CN=localhost", "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ]
        p.standardError = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw HTTPClientError("openssl req failed") }
        return (cert, key)
    }
}

/// Runs `count` POSTs (bodies `{"n": k}`) on a fresh loop, closes the client after the last answer, closes the
/// loop (`uv_loop_close` must return 0); the responses in completion order.
func postAll(
    url: String, count: Int, options: HTTPClient.Options, closeEarly: Bool = false, secondWave: Int = 0
) throws -> [HTTPClient.Response] {
    let loop = try EventLoop()
    let client = try HTTPClient(loop: loop, options: options)
    var responses: [HTTPClient.Response] = []
    let total = count + secondWave
    func post(_ k: Int) throws {
        try client.post(url: url, body: Array("{\"n\": \(k)}".utf8), headers: ["Content-Type: application/json"]) {
            responses.append($0)
            // The second wave starts once the first is answered: on connections already open.
            if responses.count == count && secondWave > 0 {
                for j in count..<total { try! post(j) }
            }
            if responses.count == total && !closeEarly { client.close() }
        }
    }
    for k in 0..<count { try post(k) }
    #expect(client.inFlight == count)
    if closeEarly {
        loop.runNoWait()
        client.close()
    }
    loop.run()
    #expect(client.inFlight == 0)
    #expect(client.watchedSockets == 0)
    try loop.close()
    #expect(loop.openHandles == 0)
    return responses
}

@Suite("HTTPClient (libcurl multi-socket on a libuv loop, real servers)", .serialized)
struct HTTPClientTests {
    @Test("HTTP/1.1 keep-alive: every POST answered, bodies as sent")
    func http1() throws {
        let backend = try TestBackend("h1")
        var options = HTTPClient.Options()
        options.version = .http1_1
        let responses = try postAll(url: "http://127.0.0.1:\(backend.port)/trigger", count: 20, options: options)
        #expect(responses.count == 20)
        #expect(responses.allSatisfy { $0.outcome == .answered && $0.status == 200 && $0.httpVersion == "1.1" })
        #expect(String(decoding: responses[0].body, as: UTF8.self) == "{\"ok\":true}")
        let seen = try backend.requests()
        #expect(seen.count == 20)
        #expect(Set(seen.map { ($0["body"] as? [String: Any])?["n"] as? Int ?? -1 }) == Set(0..<20))
        #expect(seen.allSatisfy { $0["path"] as? String == "/trigger" && $0["version"] as? String == "1.1" })
    }

    @Test("HTTP/2 prior knowledge (h2c): concurrent requests, then a second wave (libcurl < 8 cannot reuse h2c connections: fresh ones)")
    func h2c() throws {
        let backend = try TestBackend("h2c", ["--delay", "0.2"])
        var options = HTTPClient.Options()
        options.version = .http2
        let responses = try postAll(
            url: "http://127.0.0.1:\(backend.port)/t", count: 30, options: options, secondWave: 20)
        #expect(responses.count == 50)
        #expect(responses.allSatisfy { $0.outcome == .answered && $0.status == 200 && $0.httpVersion == "2" })
        let seen = try backend.requests()
        #expect(seen.count == 50, "\(responses.map { "\($0.outcome) \($0.status)" })")
        #expect(seen.allSatisfy { $0["version"] as? String == "2" })
        // Concurrent: with a 0.2 s answer, requests overlapped on the server.
        #expect((seen.compactMap { $0["inflight"] as? Int }.max() ?? 0) > 1)
    }

    @Test("HTTP/2 over TLS (ALPN h2) checked against a CA file; without it the handshake fails")
    func h2tls() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-cert-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let (cert, key) = try TestBackend.certificate(in: dir)
        let backend = try TestBackend("h2tls", ["--cert", cert, "--key", key])
        var options = HTTPClient.Options()
        options.version = .http2
        options.caFile = cert
        let ok = try postAll(url: "https://127.0.0.1:\(backend.port)/t", count: 5, options: options, secondWave: 5)
        #expect(ok.count == 10)
        #expect(ok.allSatisfy { $0.outcome == .answered && $0.status == 200 && $0.httpVersion == "2" })
        options.caFile = nil
        let refused = try postAll(url: "https://127.0.0.1:\(backend.port)/t", count: 2, options: options)
        // Named with OpenSSL's reason, not only libcurl's generic words.
        #expect(refused.allSatisfy {
            if case .failed(let message) = $0.outcome {
                return $0.status == 0 && message.hasPrefix("SSL peer certificate or SSH remote key was not OK (")
                    && message.contains("SSL certificate problem: self-signed certificate")
            } else { return false }
        }, "\(refused.map(\.outcome))")
        #expect(try backend.requests().count == 10)
    }

    /// Each failed handshake is a new connection. With the system's CA directory beside its bundle, libcurl 7.88
    /// parsed the whole bundle (~140 certificates, ~40 ms) for every one, on the loop's thread: 100 at once took
    /// over 4 s and the last ones timed out instead of failing. The CA file alone is parsed once per client.
    @Test("100 TLS handshakes failing verification against the system's CAs: all fail as such, none times out")
    func failedHandshakes() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-cert-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let (cert, key) = try TestBackend.certificate(in: dir)
        let backend = try TestBackend("h2tls", ["--cert", cert, "--key", key])
        var options = HTTPClient.Options()
        options.version = .http2
        options.timeoutMillis = 3000
        let start = Date()
        let failed = try postAll(url: "https://127.0.0.1:\(backend.port)/t", count: 100, options: options)
        let seconds = Date().timeIntervalSince(start)
        let outcomes = Dictionary(grouping: failed.map { "\($0.outcome)" }, by: { $0 }).mapValues(\.count)
        #expect(failed.count == 100)
        #expect(failed.allSatisfy {
            if case .failed(let message) = $0.outcome { return message.contains("certificate") } else { return false }
        }, "\(outcomes) in \(seconds) s")
    }

    /// A burst of 16 concurrent requests (16 connections), 12 one at a time, then another burst of 16: the
    /// connections opened by the server's count (each request's client port).
    static func burstLullBurst(port: Int, options: HTTPClient.Options) throws -> Int {
        let loop = try EventLoop()
        let client = try HTTPClient(loop: loop, options: options)
        var answered = 0
        var phase = 0
        func post(_ then: @escaping () -> Void) {
            try! client.post(url: "http://127.0.0.1:\(port)/t", body: Array("{}".utf8)) { response in
                if response.outcome == .answered { answered += 1 }
                then()
            }
        }
        func burst(_ then: @escaping () -> Void) {
            var left = 16
            for _ in 0..<16 { post { left -= 1; if left == 0 { then() } } }
        }
        func lull(_ n: Int, _ then: @escaping () -> Void) {
            if n == 0 { then() } else { post { lull(n - 1, then) } }
        }
        burst { lull(12) { burst { phase = 1; client.close() } } }
        loop.run()
        try loop.close()
        #expect(phase == 1 && answered == 44)
        return answered
    }

    @Test("HTTP/1.1: maxCachedConnections keeps a burst's connections for the next burst (libcurl's default closes them in a lull)")
    func connectionCache() throws {
        for (cache, expected) in [(0, 17...44), (16, 16...16)] {
            let backend = try TestBackend("h1", ["--delay", "0.1"])
            var options = HTTPClient.Options()
            options.maxCachedConnections = cache
            _ = try HTTPClientTests.burstLullBurst(port: backend.port, options: options)
            let peers = Set(try backend.requests().compactMap { $0["peer"] as? Int })
            #expect(expected.contains(peers.count), "maxCachedConnections \(cache): \(peers.count) connections")
        }
    }

    @Test("a slow answer ends as timedOut; a closed port as failed; close() cancels what is in flight")
    func timeoutsFailuresCancel() throws {
        let backend = try TestBackend("h1", ["--delay", "3"])
        var options = HTTPClient.Options()
        options.timeoutMillis = 300
        // Each ended by its timeout, not by the 3 s answer (which would have ended it `.answered`, status 200).
        let slow = try postAll(url: "http://127.0.0.1:\(backend.port)/t", count: 3, options: options)
        #expect(slow.allSatisfy { $0.outcome == .timedOut && $0.status == 0 })
        // A port nothing listens on (bound, then closed).
        let refused = try postAll(url: "http://127.0.0.1:1/t", count: 2, options: options)
        // libcurl's words and the system's reason.
        #expect(refused.allSatisfy { $0.outcome == .failed("Couldn't connect to server (Connection refused)") })
        let cancelled = try postAll(
            url: "http://127.0.0.1:\(backend.port)/t", count: 4, options: options, closeEarly: true)
        #expect(cancelled.count == 4)
        #expect(cancelled.allSatisfy { $0.outcome == .cancelled })
    }

    @Test("URLs: http and https accepted, anything else refused with a reason")
    func validate() throws {
        #expect(try HTTPClient.validate(url: "http://127.0.0.1:8080/x") == "http")
        #expect(try HTTPClient.validate(url: "https://backend.example/trigger") == "https")
        #expect(throws: HTTPClientError.self) { try HTTPClient.validate(url: "ftp://example.com/") }
        #expect(throws: HTTPClientError.self) { try HTTPClient.validate(url: "not a url") }
        #expect(throws: HTTPClientError.self) { try HTTPClient.validate(url: "http://") }
    }
}
