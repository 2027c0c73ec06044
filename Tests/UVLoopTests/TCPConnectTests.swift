import Foundation
import Testing
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

/// A Python echo server on 127.0.0.1 (one connection, echoes until EOF), started and killed by the test.
private final class PythonEcho {
    let process = Process()
    let port: Int
    private let output = Pipe()

    init() throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            """
            import socket, sys
            s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
            print(s.getsockname()[1], flush=True)
            c, _ = s.accept()
            while True:
                b = c.recv(65536)
                if not b: break
                c.sendall(b)
            c.close()
            """,
        ]
        process.standardOutput = output
        try process.run()
        let line = output.fileHandleForReading.availableData
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw UVError(code: -1, operation: "python echo did not start") }
        self.port = port
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// A port nothing listens on (bound, then closed).
private func closedPort() -> Int {
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

@Suite("UVLoop TCP client connect")
struct TCPConnectTests {
    @Test("connect to a Python echo server, send 256 KiB, read it back, close: every handle closed")
    func echo() throws {
        let server = try PythonEcho()
        try withLoop { loop in
            let payload = (0..<(256 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            var received: [UInt8] = []
            var results: [Bool] = []
            try TCPStream.connect(loop: loop, host: "127.0.0.1", port: server.port) { result in
                switch result {
                case .success(let stream):
                    results.append(true)
                    try? stream.startReading(onRead: { s, bytes in
                        received += bytes
                        if received.count == payload.count { s.close() }
                    }, onEnd: { _, _ in })
                    payload.withUnsafeBytes { stream.write($0) }
                case .failure:
                    results.append(false)
                }
            }
            loop.run()
            #expect(results == [true])
            #expect(received == payload)
        }
    }

    @Test("write(gathering:): 300 chunks (~90 KiB, past its first block) echoed back in order; an empty one: nothing")
    func gatheredWrite() throws {
        let server = try PythonEcho()
        try withLoop { loop in
            let chunks = (0..<300).map { k in (0..<(1 + k * 7 % 600)).map { UInt8(truncatingIfNeeded: $0 &* 3 &+ k) } }
            let payload = chunks.flatMap { $0 }
            var received: [UInt8] = []
            var pending: [Int] = []
            try TCPStream.connect(loop: loop, host: "127.0.0.1", port: server.port) { result in
                guard case .success(let stream) = result else { return }
                try? stream.startReading(onRead: { s, bytes in
                    received += bytes
                    if received.count >= payload.count { s.close() }
                }, onEnd: { _, _ in })
                stream.write(gathering: { _ in })
                pending.append(stream.pendingWriteBytes)
                stream.write(gathering: { gather in
                    for chunk in chunks { chunk.withUnsafeBytes { gather.append($0) } }
                })
                pending.append(stream.pendingWriteBytes)
            }
            loop.run()
            #expect(pending == [0, payload.count])
            #expect(received == payload)
        }
    }

    @Test("a port nothing listens on: the callback gets ECONNREFUSED once and the stream is closed")
    func refused() throws {
        let port = closedPort()
        try withLoop { loop in
            var errors: [UVError] = []
            var successes = 0
            let stream = try TCPStream.connect(loop: loop, host: "127.0.0.1", port: port) { result in
                switch result {
                case .success(let s): successes += 1; s.close()
                case .failure(let error): errors.append(error)
                }
            }
            loop.run()
            #expect(successes == 0)
            #expect(errors.map(\.name) == ["ECONNREFUSED"])
            #expect(stream.isClosed)
        }
    }

    @Test("closing the stream before the connection is up: the callback gets ECANCELED, nothing leaks")
    func cancelled() throws {
        let server = try PythonEcho()
        try withLoop { loop in
            var errors: [String] = []
            let stream = try TCPStream.connect(loop: loop, host: "127.0.0.1", port: server.port) { result in
                if case .failure(let error) = result { errors.append(error.name) } else { errors.append("connected") }
            }
            stream.close()
            loop.run()
            #expect(errors == ["ECANCELED"])
        }
    }

    @Test("a malformed address throws and leaves no handle open; names resolve to a numeric address")
    func badAddressAndResolve() throws {
        try withLoop { loop in
            #expect(throws: UVError.self) {
                try TCPStream.connect(loop: loop, host: "not an address", port: 80) { _ in }
            }
            loop.run()
            let local = try TCPStream.resolve("localhost", loop: loop)
            let literal = try TCPStream.resolve("10.1.2.3", loop: loop)
            #expect(local == "127.0.0.1")
            #expect(literal == "10.1.2.3")
            #expect(throws: UVError.self) { try TCPStream.resolve("no-such-host.invalid", loop: loop) }
        }
    }
}
