import Foundation
import Testing
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

/// A blocking client on another thread: connects, sends, reads until the server closes.
private func client(port: Int, send: [UInt8]) -> [UInt8] {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { Glibc.close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return [] }
    _ = send.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
    shutdown(fd, Int32(SHUT_WR))
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        received += buffer[0..<n]
    }
    return received
}

@Suite("UVLoop TCP and signals")
struct TCPTests {
    @Test("a listener on port 0 echoes 1 MiB to a client, then every handle closes and uv_loop_close returns 0")
    func echo() throws {
        try withLoop { loop in
            var streams: [TCPStream] = []
            var ended = 0
            let listener = try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { stream in
                streams.append(stream)
                try? stream.startReading(
                    onRead: { s, bytes in s.write(bytes) },
                    onEnd: { s, error in
                        #expect(error == nil)
                        ended += 1
                        s.closeWhenDrained()
                    })
            }
            let port = listener.localPort
            #expect(port > 0)
            let payload = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let result = Locked<[UInt8]>([])
            let done = try Wakeup(loop: loop) { w in
                listener.close()
                w.close()
            }
            let sender = done.sender
            Thread.detachNewThread {
                let echoed = client(port: port, send: payload)
                result.withLock { $0 = echoed }
                sender.send()
            }
            loop.run()
            #expect(result.withLock { $0 } == payload)
            #expect(ended == 1)
            #expect(streams.count == 1 && streams[0].bytesRead == payload.count && streams[0].bytesWritten == payload.count)
            #expect(streams.allSatisfy { $0.isClosed })
        }
    }

    @Test("binding a port in use throws EADDRINUSE and leaves no open handle")
    func portInUse() throws {
        try withLoop { loop in
            let first = try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { $0.close() }
            #expect(throws: UVError.self) {
                _ = try TCPListener(loop: loop, host: "127.0.0.1", port: first.localPort) { $0.close() }
            }
            first.close()
            loop.run()
        }
    }

    @Test("a signal reaches its watcher on the loop thread, even when the thread had it blocked")
    func signal() throws {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGUSR2)
        pthread_sigmask(SIG_BLOCK, &blocked, nil)
        try withLoop { loop in
            var seen: Int32 = 0
            let watcher = try SignalWatcher(loop: loop, signal: SIGUSR2) { w, signal in
                seen = signal
                w.close()
            }
            _ = watcher
            kill(getpid(), SIGUSR2)
            loop.run()
            #expect(seen == SIGUSR2)
        }
    }
}
