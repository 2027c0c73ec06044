import FanoutCore
import FanoutWire
import Foundation
import Testing
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

/// A server process nobody here wrote the HTTP/2 side of (nghttpd, or Python's `h2` in
/// Tests/FanoutCLITests/Resources/h2_hostile.py), on 127.0.0.1, killed at the end.
final class H2TestServer {
    let process = Process()
    let port: Int
    let directory: URL

    static var hostileScript: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FanoutCLITests/Resources/h2_hostile.py").path
    }

    /// Python `h2` in `mode` (see the script): it prints its port.
    init(hostile mode: String) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-h2-\(UUID().uuidString)")
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", H2TestServer.hostileScript, mode]
        process.standardOutput = output
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw HTTPClientError("h2_hostile.py \(mode) did not start")
        }
        self.port = port
    }

    /// nghttpd serving `index.html` ("hello\n", or `index`), h2c or TLS with a self-signed certificate (in
    /// ``directory``), at most `streams` concurrent streams.
    init(nghttpdTLS tls: Bool, streams: Int, index: Data = Data("hello\n".utf8)) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-h2-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try index.write(to: directory.appendingPathComponent("index.html"))
        port = H2TestServer.freePort()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        var arguments = ["nghttpd", "-m", String(streams), "-d", directory.path, "--address=127.0.0.1", String(port)]
        if tls {
            let (cert, key) = try TestBackend.certificate(in: directory)
            arguments += [key, cert]
        } else {
            arguments.insert("--no-tls", at: 1)
        }
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if H2TestServer.accepts(port) { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw HTTPClientError("nghttpd did not start")
    }

    var certificate: String { directory.appendingPathComponent("cert.pem").path }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                _ = Glibc.bind(fd, $0, length)
                return getsockname(fd, $0, &length)
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        } 
    }
}

/// What one client run saw.
struct ClientRun {
    var responses: [H2ClientResponse] = []
    var maxOpen = 0
    var maxQueued = 0
    var submitted = 0
    var received = 0
    var resets = 0
    var goAways = 0
    var ended = 0
    var endReason: String?
    var closedCalls = 0
}

/// Submits `requests` on a fresh loop and connection (all at once, before the connection is up), closes the
/// connection after the last outcome (or when `closeAfter` outcomes arrived), closes the loop (`uv_loop_close` must
/// return 0).
func runClient(
    port: Int, tls: TLSContext? = nil, serverName: String? = nil, requests: [H2ClientRequest],
    closeAfter: Int? = nil, deadlineMillis: UInt64 = 20_000, settings: H2ClientSettings = H2ClientSettings()
) throws -> ClientRun {
    let loop = try EventLoop()
    var run = ClientRun()
    do {
        let connection = try H2ClientConnection(
            loop: loop, host: "127.0.0.1", port: port, tls: tls, serverName: serverName, settings: settings)
        let deadline = Timer(loop: loop) { timer in
            connection.close(reason: "test deadline")
            if !timer.isClosed { timer.close() }
        }
        deadline.start(afterMillis: deadlineMillis)
        connection.onResponse = { c, response in
            run.responses.append(response)
            run.maxOpen = max(run.maxOpen, c.openStreams + (response.submittedNanos > 0 ? 1 : 0))
            if run.responses.count == (closeAfter ?? requests.count) { c.close() }
        }
        connection.onClosed = { c in
            run.closedCalls += 1
            run.endReason = c.endReason
            run.submitted = c.requestsSubmitted
            run.received = c.responsesReceived
            run.resets = c.streamsReset
            run.goAways = c.failedByGoAway
            run.ended = c.failedByConnectionEnd
            run.maxQueued = c.maxQueued
            if !deadline.isClosed { deadline.close() }
        }
        for request in requests { connection.submit(request) }
        loop.run()
    }
    try loop.close()
    return run
}

func requests(_ count: Int, path: (Int) -> String = { _ in "/index.html" }) -> [H2ClientRequest] {
    (0..<count).map { k in
        H2ClientRequest(
            path: Array(path(k).utf8),
            headers: HeaderList([("apns-id", "00000000-0000-0000-0000-\(String(format: "%012d", k))")]),
            body: Array("{\"aps\":{\"n\":\(k)}}".utf8), tag: k)
    }
}

@Suite("H2ClientConnection against nghttpd and Python h2")
struct H2ClientConnectionTests {
    @Test("h2c to nghttpd with 4 streams: 200 POSTs all answered 200 with the file, never more than 4 open")
    func nghttpdH2c() throws {
        let server = try H2TestServer(nghttpdTLS: false, streams: 4)
        let run = try runClient(port: server.port, requests: requests(200))
        #expect(run.responses.count == 200)
        #expect(run.responses.allSatisfy { $0.status == 200 && $0.body == Array("hello\n".utf8) && $0.failure == nil })
        #expect(Set(run.responses.map(\.tag)) == Set(0..<200))
        #expect(run.maxOpen <= 4 && run.maxOpen > 0)
        #expect(run.maxQueued >= 196 - 4, "all were queued before the server's SETTINGS arrived")
        #expect(run.submitted == 200 && run.received == 200 && run.closedCalls == 1)
        #expect(run.responses.allSatisfy { $0.endNanos >= $0.submittedNanos && $0.submittedNanos > 0 })
    }

    @Test("the client's own stream cap (2) holds below nghttpd's 100")
    func clientCap() throws {
        let server = try H2TestServer(nghttpdTLS: false, streams: 100)
        var settings = H2ClientSettings()
        settings.maxConcurrentStreams = 2
        let run = try runClient(port: server.port, requests: requests(50), settings: settings)
        #expect(run.responses.count == 50 && run.responses.allSatisfy { $0.status == 200 })
        #expect(run.maxOpen == 2)
    }

    @Test("TLS to nghttpd: verified with --ca (ALPN h2), refused without it, accepted with insecure")
    func nghttpdTLS() throws {
        let server = try H2TestServer(nghttpdTLS: true, streams: 100)
        let verified = try runClient(
            port: server.port, tls: TLSContext(clientCAFile: server.certificate, insecure: false),
            serverName: "localhost", requests: requests(50))
        #expect(verified.responses.count == 50 && verified.responses.allSatisfy { $0.status == 200 })
        let byAddress = try runClient(
            port: server.port, tls: TLSContext(clientCAFile: server.certificate, insecure: false),
            requests: requests(5))
        #expect(byAddress.responses.allSatisfy { $0.status == 200 }, "the certificate names IP 127.0.0.1 too")
        let untrusted = try runClient(
            port: server.port, tls: TLSContext(clientCAFile: nil, insecure: false), serverName: "localhost",
            requests: requests(5))
        #expect(untrusted.responses.count == 5 && untrusted.responses.allSatisfy { $0.failure == .connectionEnded })
        #expect(untrusted.endReason?.contains("certificate") == true, "\(untrusted.endReason ?? "")")
        let wrongName = try runClient(
            port: server.port, tls: TLSContext(clientCAFile: server.certificate, insecure: false),
            serverName: "example.com", requests: requests(1))
        #expect(wrongName.responses.map(\.failure) == [.connectionEnded])
        let insecure = try runClient(
            port: server.port, tls: TLSContext(clientCAFile: nil, insecure: true), serverName: "example.com",
            requests: requests(5))
        #expect(insecure.responses.allSatisfy { $0.status == 200 })
    }

    @Test("TLS to nghttpd: 1 MiB request bodies out and 1 MiB answers in, across many records and reads, intact")
    func nghttpdTLSLargeBodies() throws {
        // Bytes that differ at every offset within a record's size: a record dropped, repeated, or cut at a read's
        // edge shows in the answer's bytes; the request bodies must all go out for nghttpd to answer at all.
        let size = 1 << 20
        let file: [UInt8] = (0..<size).map { k in UInt8(truncatingIfNeeded: k &* 31 &+ k >> 13) }
        let server = try H2TestServer(nghttpdTLS: true, streams: 100, index: Data(file))
        var settings = H2ClientSettings()
        settings.bodyLimit = size
        settings.maxResponseBodyBytes = size
        let body: [UInt8] = (0..<size).map { k in UInt8(truncatingIfNeeded: k &* 7) }
        let large: [H2ClientRequest] = (0..<4).map { k in
            H2ClientRequest(path: Array("/index.html".utf8), headers: HeaderList(), body: body, tag: k)
        }
        let run = try runClient(
            port: server.port, tls: TLSContext(clientCAFile: server.certificate, insecure: false),
            serverName: "localhost", requests: large, deadlineMillis: 60_000, settings: settings)
        #expect(run.responses.count == 4, "\(run.endReason ?? "")")
        for response in run.responses {
            #expect(response.status == 200 && response.failure == nil && response.body.count == size)
            #expect(response.body == file)
        }
    }

    @Test("APNs-shaped answers: status, apns-id and the JSON reason per stream; the server's limit of 3 holds")
    func apnsAnswers() throws {
        let server = try H2TestServer(hostile: "apns")
        let run = try runClient(
            port: server.port, requests: requests(40) { k in k % 4 == 0 ? "/3/device/\(k)/bad" : "/3/device/\(k)" })
        #expect(run.responses.count == 40)
        for response in run.responses {
            let id = "00000000-0000-0000-0000-\(String(format: "%012d", response.tag))"
            #expect(response.apnsId == Array(id.utf8))
            if response.tag % 4 == 0 {
                #expect(response.status == 400)
                #expect(response.body == Array(#"{"reason":"BadDeviceToken"}"#.utf8))
            } else {
                #expect(response.status == 200 && response.body.isEmpty)
            }
        }
        #expect(run.maxOpen <= 3)
        // Not kept when the caller does not read it (fanout push): the same answers, no id.
        var settings = H2ClientSettings()
        settings.keepsApnsId = false
        let idless = try runClient(
            port: server.port, requests: requests(8) { k in k % 4 == 0 ? "/3/device/\(k)/bad" : "/3/device/\(k)" },
            settings: settings)
        #expect(idless.responses.count == 8 && idless.responses.allSatisfy { $0.apnsId.isEmpty })
        #expect(idless.responses.allSatisfy { $0.status == ($0.tag % 4 == 0 ? 400 : 200) })
    }

    @Test("RST_STREAM: every other stream reset by the server fails as reset(CANCEL) and is counted; none hangs")
    func resets() throws {
        let server = try H2TestServer(hostile: "reset")
        let run = try runClient(port: server.port, requests: requests(20))
        #expect(run.responses.count == 20)
        #expect(run.responses.filter { $0.status == 200 }.count == 10)
        #expect(run.responses.filter { $0.failure == .reset(8) }.count == 10)
        #expect(run.resets == 10 && run.received == 10)
    }

    @Test("GOAWAY after 5 answers: the rest fail as GOAWAY (sent and queued alike), handed back; none hangs")
    func goAway() throws {
        let server = try H2TestServer(hostile: "goaway")
        let run = try runClient(port: server.port, requests: requests(30))
        #expect(run.responses.count == 30)
        #expect(run.responses.filter { $0.status == 200 }.count == 5)
        #expect(run.responses.filter { $0.failure == .goAway }.count == 25)
        #expect(run.goAways == 25 && run.closedCalls == 1)
        // Refused above the GOAWAY's last stream id or never sent: handed back for another try.
        #expect(run.responses.filter { $0.failure == .goAway }.allSatisfy { $0.unprocessed?.tag == $0.tag })
        #expect(run.responses.filter { $0.status == 200 }.allSatisfy { $0.unprocessed == nil })
        #expect(run.endReason?.contains("GOAWAY") == true)
    }

    @Test("streams answered between streams left open, then the end: each request ends once, the open ones failed")
    func answeredBetweenOpen() throws {
        // Every other stream is answered: records leave the middle of the connection's list of open streams; the
        // rest are still listed when the deadline closes the connection, and each must be failed once.
        let server = try H2TestServer(hostile: "half")
        let run = try runClient(port: server.port, requests: requests(20), deadlineMillis: 500)
        #expect(run.responses.count == 20)
        #expect(Set(run.responses.map(\.tag)) == Set(0..<20))
        #expect(run.responses.filter { $0.status == 200 }.count == 10)
        #expect(run.responses.filter { $0.failure == .connectionEnded }.count == 10)
        #expect(run.received == 10 && run.ended == 10 && run.endReason == "test deadline")
    }

    @Test("a server that never answers: closing the connection fails every open and queued request once")
    func silent() throws {
        let server = try H2TestServer(hostile: "silent")
        let run = try runClient(port: server.port, requests: requests(10), deadlineMillis: 500)
        #expect(run.responses.count == 10 && run.responses.allSatisfy { $0.failure == .connectionEnded })
        #expect(run.ended == 10 && run.endReason == "test deadline")
        // Sent and open when the connection ended: the server may have processed them, so they are not handed back.
        #expect(run.responses.allSatisfy { $0.unprocessed == nil && $0.submittedNanos > 0 })
    }

    @Test("nothing listening: connect fails, every request fails once with connectionEnded")
    func refused() throws {
        let run = try runClient(port: H2TestServer.freePort(), requests: requests(3))
        #expect(run.responses.map(\.failure) == [.connectionEnded, .connectionEnded, .connectionEnded])
        #expect(run.endReason?.contains("ECONNREFUSED") == true)
        #expect(run.responses.allSatisfy { $0.unprocessed?.tag == $0.tag }, "never sent: handed back")
    }

    @Test("requests released at once go out in writes of at most requestsPerWrite (the server starts on the first)")
    func writtenInPieces() throws {
        let loop = try EventLoop()
        for (perWrite, least, most) in [(10, 3, 5), (1000, 1, 2)] {
            var settings = H2ClientSettings()
            settings.requestsPerWrite = perWrite
            let connection = H2ClientConnection(loop: loop, output: { _ in }, settings: settings)
            for r in requests(30) { connection.submit(r) }
            #expect(connection.queuedRequests == 30, "queued until the server's SETTINGS")
            let before = connection.writes
            // The server's SETTINGS: the 30 requests go out, then the SETTINGS ACK.
            let settingsFrame: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0]
            settingsFrame.withUnsafeBytes { connection.receive($0) }
            #expect(connection.requestsSubmitted == 30 && connection.queuedRequests == 0)
            let writes = connection.writes - before
            #expect(writes >= least && writes <= most, "\(writes) writes with \(perWrite) requests per write")
            connection.close()
        }
        try loop.close()
    }

    @Test("a burst submitted while writes are held: a write per requestsPerWrite, the rest at release; else one each")
    func heldWrites() throws {
        let loop = try EventLoop()
        for hold in [false, true] {
            var settings = H2ClientSettings()
            settings.requestsPerWrite = 8
            let connection = H2ClientConnection(loop: loop, output: { _ in }, settings: settings)
            let settingsFrame: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0]
            settingsFrame.withUnsafeBytes { connection.receive($0) }
            let before = connection.writes
            if hold { connection.holdWrites() }
            for r in requests(20) { connection.submit(r) }
            #expect(connection.requestsSubmitted == 20, "handed to nghttp2 at once, held or not")
            if hold {
                #expect(connection.writes - before == 2, "after the 8th and the 16th")
                connection.releaseWrites()
                #expect(connection.writes - before == 3 && !connection.holdsWrites, "the last 4 at release")
            } else {
                #expect(connection.writes - before == 20, "one write per request")
            }
            connection.close()
        }
        try loop.close()
    }
}
