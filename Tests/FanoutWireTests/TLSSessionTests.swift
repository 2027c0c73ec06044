import FanoutWire
import Foundation
import Testing

/// Two sessions (a client, a server) of the same certificate, talking in memory.
private struct SessionPair {
    let directory: URL
    let client: TLSSession
    let server: TLSSession

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let (cert, key) = try TestBackend.certificate(in: directory)
        server = try TLSSession(context: TLSContext(certificateFile: cert, keyFile: key))
        client = try TLSSession(
            clientContext: TLSContext(clientCAFile: cert, insecure: false), serverName: "localhost")
    }

    /// What `from` has written, all of it.
    static func drain(_ from: TLSSession) -> [UInt8] {
        var bytes: [UInt8] = []
        from.takeCiphertext { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// `bytes` into `into` in pieces of the sizes in `sizes` (cycled), each by `receive` or (every third) `feed`
    /// then `readPlaintext`; the plaintext that came out.
    static func deliver(_ bytes: [UInt8], to into: TLSSession, sizes: [Int]) throws -> [UInt8] {
        var plain: [UInt8] = []
        var at = 0
        var k = 0
        while at < bytes.count {
            let n = min(sizes[k % sizes.count], bytes.count - at)
            let piece = Array(bytes[at..<at + n])
            try piece.withUnsafeBytes { (piece: UnsafeRawBufferPointer) throws -> Void in
                if k % 3 == 2 {
                    try into.feed(piece)
                    try into.readPlaintext { plain.append(contentsOf: $0) }
                } else {
                    try into.receive(piece) { plain.append(contentsOf: $0) }
                }
            }
            at += n
            k += 1
        }
        return plain
    }

    func handshake() throws {
        try client.startHandshake()
        for _ in 0..<8 where !(client.handshakeDone && server.handshakeDone) {
            _ = try SessionPair.deliver(SessionPair.drain(client), to: server, sizes: [1, 5, 300, 7000])
            _ = try SessionPair.deliver(SessionPair.drain(server), to: client, sizes: [3, 16_389])
        }
    }
}

/// `bytes` encrypted by `session`.
private func write(_ bytes: [UInt8], _ session: TLSSession) throws {
    try bytes.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws -> Void in try session.writePlaintext(bytes) }
}

@Suite("TLSSession over its own BIO")
struct TLSSessionTests {
    @Test("1 MiB each way in pieces cutting records anywhere (1 byte to 40 KB, receive and feed): bytes intact")
    func piecesAcrossRecords() throws {
        let pair = try SessionPair()
        defer { try? FileManager.default.removeItem(at: pair.directory) }
        try pair.handshake()
        #expect(pair.client.handshakeDone && pair.server.handshakeDone)
        let size = 1 << 20
        let up: [UInt8] = (0..<size).map { k in UInt8(truncatingIfNeeded: k &* 13 &+ k >> 11) }
        let down: [UInt8] = (0..<size).map { k in UInt8(truncatingIfNeeded: k &* 29 &+ k >> 9) }
        // Written in uneven plaintext pieces (records of many sizes), all waiting before any is read.
        var at = 0
        for n in [1, 100, 16_384, 16_385, 70_000, 5] where at < size {
            try write(Array(up[at..<min(size, at + n)]), pair.client)
            at += n
        }
        try write(Array(up[at...]), pair.client)
        try write(down, pair.server)
        #expect(pair.client.hasCiphertext && pair.server.hasCiphertext)
        let toServer = SessionPair.drain(pair.client)
        let toClient = SessionPair.drain(pair.server)
        #expect(!pair.client.hasCiphertext && toServer.count > size)
        let received = try SessionPair.deliver(toServer, to: pair.server, sizes: [1, 4, 5, 17, 16_000, 40_000, 999])
        #expect(received == up)
        #expect(try SessionPair.deliver(toClient, to: pair.client, sizes: [7, 16_406, 2, 33_000]) == down)
    }

    @Test("ciphertext written while its taker runs (a reentrant write) comes out next, in order")
    func reentrantTake() throws {
        let pair = try SessionPair()
        defer { try? FileManager.default.removeItem(at: pair.directory) }
        try pair.handshake()
        try write(Array("first".utf8), pair.client)
        var pieces: [[UInt8]] = []
        pair.client.takeCiphertext { bytes in
            pieces.append(Array(bytes))
            if pieces.count == 1 { try? write(Array("second".utf8), pair.client) }
        }
        #expect(pieces.count == 2 && !pair.client.hasCiphertext)
        let plain = try SessionPair.deliver(pieces.flatMap { $0 }, to: pair.server, sizes: [10])
        #expect(plain == Array("firstsecond".utf8))
    }
}
