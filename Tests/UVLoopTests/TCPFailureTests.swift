import Foundation
import Testing
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

/// Connects to 127.0.0.1:`port` with a small receive buffer; the socket is the caller's.
private func connectSmall(port: Int) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var small: Int32 = 4096
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return fd
}

/// Closes `fd` with a reset (SO_LINGER 0): the peer's next read or write fails with ECONNRESET/EPIPE.
private func reset(_ fd: Int32) {
    var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    Glibc.close(fd)
}

@Suite("UVLoop TCP failures: SIGPIPE, errors and drains end their stream")
struct TCPFailureTests {
    @Test("creating a loop ignores SIGPIPE for the process (libuv writes with plain write(2))")
    func brokenPipeIgnored() throws {
        try withLoop { _ in
            var action = sigaction()
            sigaction(SIGPIPE, nil, &action)
            #expect(unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self) == 1, "SIG_IGN")
            #expect(EventLoop.ignoresBrokenPipe)
        }
    }

    @Test("a peer's reset closes the stream even if its owner does nothing; writes after it do not kill the process")
    func resetClosesTheStream() throws {
        try withLoop { loop in
            var accepted: TCPStream?
            var ends: [UVError?] = []
            var listener: TCPListener?
            listener = try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { stream in
                listener?.close()  // one connection is enough
                accepted = stream
                let chunk = [UInt8](repeating: 7, count: 1 << 16)
                // Writes queued before and after the reset: a write to a reset socket is EPIPE (SIGPIPE ignored).
                for _ in 0..<32 { chunk.withUnsafeBytes { stream.write($0) } }
                try? stream.startReading(onRead: { s, _ in
                    chunk.withUnsafeBytes { s.write($0) }
                }, onEnd: { _, error in ends.append(error) })
            }
            let port = listener!.localPort
            let done = spawnThread {
                let fd = connectSmall(port: port)
                _ = "x".withCString { send(fd, $0, 1, 0) }
                usleep(50_000)
                reset(fd)
            }
            var timedOut = false
            let guardTimer = Timer(loop: loop) { t in
                timedOut = true
                t.close()
                loop.closeRemainingHandles()
            }
            guardTimer.start(afterMillis: 10_000)
            guardTimer.isReferenced = false
            loop.run()
            if !guardTimer.isClosed { guardTimer.close() }
            done.wait()
            #expect(!timedOut && accepted?.isClosed == true, "the failed stream closed itself")
            #expect(ends.count == 1 && ends.first! != nil, "the owner heard of the error once: \(ends)")
        }
    }

    @Test("closeWhenDrained to a peer that never reads closes at its deadline, cancelling the queued writes")
    func drainDeadline() throws {
        try withLoop { loop in
            var accepted: TCPStream?
            let finished = DispatchSemaphore(value: 0)
            var listener: TCPListener?
            listener = try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { stream in
                listener?.close()
                accepted = stream
                let chunk = [UInt8](repeating: 1, count: 1 << 20)
                for _ in 0..<32 { chunk.withUnsafeBytes { stream.write($0) } }  // far more than the kernel holds
                stream.closeWhenDrained(withinMillis: 200)
            }
            let port = listener!.localPort
            let done = spawnThread {
                let fd = connectSmall(port: port)
                finished.wait()  // never reads
                Glibc.close(fd)
            }
            loop.run()  // returns only once the stream has closed
            finished.signal()
            done.wait()
            let stream = try #require(accepted)
            #expect(stream.isClosed)
            #expect(stream.drainDeadlinesMissed == 1)
            #expect(stream.bytesWritten < 32 << 20, "the queued writes were cancelled, not written")
        }
    }
}
