import Testing
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

/// The lifecycle every handle shares (``UVHandle``): a second `close()` does nothing, whether it comes before
/// the close callback ran, after it, from the handle's own callback or after the loop's owner closed the handle;
/// the loop then closes with `uv_loop_close` returning 0 and nothing alive (``withLoop``).
@Suite("UVLoop handle lifecycle")
struct HandleLifecycleTests {
    /// Closes `handle` twice, checks the second close changed nothing, lets the close callback run, closes it a
    /// third time.
    private func closeTwice(_ handle: UVHandle, on loop: EventLoop, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!handle.isClosed, sourceLocation: sourceLocation)
        #expect(loop.openHandles >= 1, sourceLocation: sourceLocation)
        let open = loop.openHandles
        let closing = loop.closingHandles
        handle.close()
        #expect(handle.isClosed, sourceLocation: sourceLocation)
        #expect(loop.closingHandles == closing + 1, sourceLocation: sourceLocation)
        handle.close()
        #expect(handle.isClosed, sourceLocation: sourceLocation)
        #expect(loop.openHandles == open, sourceLocation: sourceLocation)
        #expect(loop.closingHandles == closing + 1, "a second close() counted again", sourceLocation: sourceLocation)
        #expect(!handle.isActive && !handle.isReferenced, sourceLocation: sourceLocation)
        loop.runNoWait()
        #expect(loop.openHandles == open - 1, sourceLocation: sourceLocation)
        #expect(loop.closingHandles == closing, sourceLocation: sourceLocation)
        handle.close()
        #expect(loop.openHandles == open - 1, "close() after the close callback counted again",
            sourceLocation: sourceLocation)
    }

    @Test("a second close() of a timer does nothing, also from its own callback, and the loop closes with 0")
    func timer() throws {
        try withLoop { loop in
            let timer = Timer(loop: loop) { _ in }
            timer.start(afterMillis: 60_000)
            closeTwice(timer, on: loop)
        }
        try withLoop { loop in
            var fired = 0
            let timer = Timer(loop: loop) { timer in
                fired += 1
                timer.close()
                timer.close()
            }
            timer.start(afterMillis: 0)
            loop.run()
            #expect(fired == 1)
            #expect(loop.openHandles == 0)
        }
    }

    @Test("a second close() of a wakeup does nothing; its sender stays refused; the loop closes with 0")
    func wakeup() throws {
        try withLoop { loop in
            let wakeup = try Wakeup(loop: loop) { _ in }
            #expect(wakeup.send())
            closeTwice(wakeup, on: loop)
            #expect(!wakeup.sender.send())
        }
    }

    @Test("a second close() of a poll handle does nothing and the loop closes with 0")
    func poll() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer {
            Glibc.close(fds[0])
            Glibc.close(fds[1])
        }
        try withLoop { loop in
            let poll = try Poll(loop: loop, socket: fds[0]) { _, _, _ in }
            try poll.start([.readable])
            closeTwice(poll, on: loop)
        }
    }

    @Test("a second close() of a signal watcher does nothing and the loop closes with 0")
    func signal() throws {
        try withLoop { loop in
            // SIGWINCH: ignored by default, so nothing happens when libuv restores the default after the close.
            let watcher = try SignalWatcher(loop: loop, signal: SIGWINCH) { _, _ in }
            closeTwice(watcher, on: loop)
        }
    }

    @Test("a second close() of a TCP listener and of both ends of a connection does nothing; the loop closes with 0")
    func tcp() throws {
        try withLoop { loop in
            var accepted: TCPStream?
            var connected: TCPStream?
            let listener = try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { stream in accepted = stream }
            try TCPStream.connect(loop: loop, host: "127.0.0.1", port: listener.localPort) { result in
                connected = try? result.get()
            }
            while accepted == nil || connected == nil {
                loop.runOnce()
            }
            closeTwice(listener, on: loop)
            if let accepted { closeTwice(accepted, on: loop) }
            if let connected { closeTwice(connected, on: loop) }
        }
    }

    @Test("a stream closed while its drain is pending, then closed again, leaves nothing open")
    func tcpDrainThenClose() throws {
        try withLoop { loop in
            var accepted: TCPStream?
            var connected: TCPStream?
            let listener = try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { stream in accepted = stream }
            try TCPStream.connect(loop: loop, host: "127.0.0.1", port: listener.localPort) { result in
                connected = try? result.get()
            }
            while accepted == nil || connected == nil {
                loop.runOnce()
            }
            listener.close()
            let bytes = [UInt8](repeating: 7, count: 1 << 22)
            bytes.withUnsafeBytes { connected?.write($0) }
            connected?.closeWhenDrained(withinMillis: 60_000)
            connected?.close()
            connected?.close()
            accepted?.close()
            accepted?.close()
            loop.run()
            #expect(loop.openHandles == 0)
        }
    }

    @Test("closeRemainingHandles closes every kind of handle without a type switch; their own close() is then a no-op")
    func closedByTheLoopsOwner() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer {
            Glibc.close(fds[0])
            Glibc.close(fds[1])
        }
        try withLoop { loop in
            let handles: [UVHandle] = try [
                Timer(loop: loop) { _ in },
                Wakeup(loop: loop) { _ in },
                Poll(loop: loop, socket: fds[0]) { _, _, _ in },
                SignalWatcher(loop: loop, signal: SIGWINCH) { _, _ in },
                TCPListener(loop: loop, host: "127.0.0.1", port: 0) { $0.close() },
            ]
            #expect(loop.closeRemainingHandles(tcpOnly: true) == 1)
            #expect(handles.filter { $0.isClosed }.count == 1)
            #expect(loop.closeRemainingHandles() == handles.count - 1)
            #expect(handles.allSatisfy { $0.isClosed })
            #expect(loop.closeRemainingHandles() == 0)
            for handle in handles { handle.close() }
            #expect(loop.closingHandles == handles.count)
        }
    }

    @Test("a second close() of a deadline timer does nothing and the loop closes with 0")
    func deadlineTimer() throws {
        try withLoop { loop in
            let timer = DeadlineTimer(loop: loop) { _ in }
            timer.start(atHrtimeNanos: EventLoop.hrtimeNanos + 60_000_000_000)
            timer.close()
            timer.close()
            #expect(timer.isClosed && !timer.isActive)
            loop.run()
            timer.close()
        }
    }
}

@Suite("UVLoop SocketAddress")
struct SocketAddressTests {
    @Test("parses IPv4 and IPv6 literals with their port")
    func parses() throws {
        let v4 = try SocketAddress(host: "127.0.0.1", port: 8080)
        #expect(!v4.isIPv6)
        #expect(v4.host == "127.0.0.1")
        #expect(v4.port == 8080)
        let v6 = try SocketAddress(host: "::1", port: 443)
        #expect(v6.isIPv6)
        #expect(v6.host == "::1")
        #expect(v6.port == 443)
        let full = try SocketAddress(host: "2001:db8::ff00:42:8329", port: 65535)
        #expect(full.isIPv6 && full.host == "2001:db8::ff00:42:8329" && full.port == 65535)
        var any = try SocketAddress(host: "0.0.0.0", port: 0)
        #expect(any.port == 0)
        any.port = 9
        #expect(any.port == 9 && any.host == "0.0.0.0")
        var anyV6 = try SocketAddress(host: "::", port: 0)
        anyV6.port = 4433
        #expect(anyV6.port == 4433 && anyV6.host == "::")
    }

    @Test(
        "rejects what is not an address literal, and ports outside 0...65535, with UVError EINVAL",
        arguments: [
            ("", 80), ("localhost", 80), ("1.2.3", 80), ("256.1.1.1", 80), ("1.2.3.4.5", 80), (" 127.0.0.1", 80),
            ("::g", 80), ("1:2:3:4:5:6:7:8:9", 80), ("127.0.0.1:80", 80), ("[::1]", 80),
            ("127.0.0.1", -1), ("127.0.0.1", 65536), ("::1", 1 << 40),
        ])
    func rejects(host: String, port: Int) {
        let error = #expect(throws: UVError.self) { _ = try SocketAddress(host: host, port: port) }
        #expect(error?.code == UVError.invalidArgumentCode)
        #expect(error?.operation == (host.contains(":") ? "uv_ip6_addr" : "uv_ip4_addr"))
    }

    @Test("a listener, a connect and ReusePortSockets given junk throw before opening anything")
    func junkOpensNothing() throws {
        try withLoop { loop in
            #expect(throws: UVError.self) { _ = try TCPListener(loop: loop, host: "not an address", port: 0) { _ in } }
            #expect(throws: UVError.self) { try TCPStream.connect(loop: loop, host: "::zz", port: 1) { _ in } }
            #expect(throws: UVError.self) { _ = try ReusePortSockets.bind(host: "1.2.3", port: 0, count: 2) }
            #expect(loop.openHandles == 0)
            #expect(loop.liveHandleOwners == 0)
        }
    }

    @Test("ReusePortSockets binds IPv4 and IPv6 (where the host has ::1), port 0 giving every socket one free port")
    func reusePort() throws {
        for host in ["127.0.0.1", "::1"] {
            var sockets: [Int32] = []
            var port = 0
            do {
                (sockets, port) = try ReusePortSockets.bind(host: host, port: 0, count: 3)
            } catch {
                // No IPv6 loopback here.
                if host == "::1" && (error.name == "EADDRNOTAVAIL" || error.name == "EAFNOSUPPORT") { continue }
                throw error
            }
            #expect(sockets.count == 3)
            #expect(port > 0)
            try withLoop { loop in
                var listeners: [TCPListener] = []
                for fd in sockets {
                    listeners.append(try TCPListener(loop: loop, socket: fd) { $0.close() })
                }
                #expect(listeners.allSatisfy { $0.localPort == port })
                // The listeners own the sockets now: closing them closes the sockets.
                for listener in listeners { listener.close() }
            }
        }
    }
}
