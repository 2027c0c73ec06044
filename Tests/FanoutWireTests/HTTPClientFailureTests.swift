@testable import FanoutWire
import Foundation
import Testing
import UVLoop

/// The HTTP client keeps a failure where it happened: a socket it cannot watch fails that socket's requests only,
/// a connection never made within the timeout is told apart from a request never answered, and each request says
/// how long it waited in the client before it left.
@Suite("HTTPClient: failures kept to their socket, connect timeouts apart, the time before a request left", .serialized)
struct HTTPClientFailureTests {
    /// Runs `loop` until `done()` or the hang guard (generous: not a timing assertion).
    static func run(_ loop: EventLoop, until done: () -> Bool) {
        let deadline = Date().addingTimeInterval(60)
        while !done() && Date() < deadline { _ = loop.runOnce() }
    }

    @Test("a socket whose poll cannot be set up fails its own request; one in flight on another socket is answered")
    func socketFailureStaysOnItsSocket() throws {
        let slow = try TestBackend("h1", ["--delay", "1"])
        let other = try TestBackend("h1")
        let loop = try EventLoop()
        let client = try HTTPClient(loop: loop, options: HTTPClient.Options())
        var first: HTTPClient.Response?
        var second: HTTPClient.Response?
        try client.post(url: "http://127.0.0.1:\(slow.port)/a", body: Array("{}".utf8)) { first = $0 }
        // The first request's socket is watched (its connection on its way); reading the backend's log here, over and
        // over, leaked in Foundation's String(contentsOf:) under LeakSanitizer.
        Self.run(loop) { client.watchedSockets > 0 }
        #expect(client.watchedSockets == 1)
        // From now on, no new socket can be watched.
        let watched = Set(client.watchedSocketNumbers)
        client.watchFails = { !watched.contains($0) }
        try client.post(url: "http://127.0.0.1:\(other.port)/b", body: Array("{}".utf8)) { second = $0 }
        Self.run(loop) { first != nil && second != nil }
        #expect(first?.outcome == .answered && first?.status == 200, "\(String(describing: first))")
        if case .failed = second?.outcome {} else {
            Issue.record("the unwatchable socket's request: \(String(describing: second))")
        }
        #expect(first?.queuedNanos != nil, "the answered one left")
        client.close()
        loop.run()
        try loop.close()
        #expect(loop.openHandles == 0)
    }

    @Test("no connection within the timeout is a failure to connect; a connection never answered is a timeout")
    func connectTimeoutApart() throws {
        let silent = try TestBackend("silent")
        var options = HTTPClient.Options()
        options.timeoutMillis = 300
        // https: the TLS handshake never completes, so the request never leaves.
        let https = try postAll(url: "https://127.0.0.1:\(silent.port)/t", count: 2, options: options)
        #expect(https.allSatisfy { $0.outcome == .failed("Timeout was reached (connecting: the request never left)") })
        #expect(https.allSatisfy { $0.queuedNanos == nil })
        // http: the request leaves on the connection and is never answered.
        let http = try postAll(url: "http://127.0.0.1:\(silent.port)/t", count: 2, options: options)
        #expect(http.allSatisfy { $0.outcome == .timedOut && $0.queuedNanos != nil })
    }

    @Test("an answered request says how long it waited in the client before it left; one refused never left")
    func queuedBeforeLeaving() throws {
        let backend = try TestBackend("h1")
        let answered = try postAll(url: "http://127.0.0.1:\(backend.port)/t", count: 20, options: HTTPClient.Options())
        #expect(answered.count == 20 && answered.allSatisfy { $0.outcome == .answered && $0.queuedNanos != nil })
        let refused = try postAll(url: "http://127.0.0.1:1/t", count: 2, options: HTTPClient.Options())
        #expect(refused.allSatisfy { $0.queuedNanos == nil })
    }
}
