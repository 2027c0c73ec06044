import Testing
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

@Suite("UVLoop Poll")
struct PollTests {
    @Test func reportsReadableThenClosesAndTheLoopCloses() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer {
            Glibc.close(fds[0])
            Glibc.close(fds[1])
        }
        try withLoop { loop in
            var seen: [(Int32, Poll.Events)] = []
            let poll = try Poll(loop: loop, socket: fds[0]) { poll, status, events in
                seen.append((status, events))
                var byte: UInt8 = 0
                _ = read(poll.socket, &byte, 1)
                poll.close()  // inside its own callback
            }
            try poll.start([.readable])
            #expect(poll.isActive)
            #expect(loop.openHandles == 1)
            var byte: UInt8 = 7
            #expect(write(fds[1], &byte, 1) == 1)
            loop.run()
            #expect(seen.count == 1)
            #expect(seen.first?.0 == 0)
            #expect(seen.first?.1.contains(.readable) == true)
            #expect(poll.isClosed)
        }
    }

    @Test func writableStopAndCloseRemaining() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer {
            Glibc.close(fds[0])
            Glibc.close(fds[1])
        }
        try withLoop { loop in
            var writable = 0
            let poll = try Poll(loop: loop, socket: fds[0]) { poll, _, events in
                if events.contains(.writable) { writable += 1 }
                poll.stop()
            }
            try poll.start([.readable])
            // A second handle on a socket a started one watches is refused, and leaves nothing open.
            #expect(throws: UVError.self) { _ = try Poll(loop: loop, socket: fds[0]) { _, _, _ in } }
            #expect(loop.openHandles == 1)
            try poll.start([.readable, .writable])
            loop.run()  // returns once the stopped handle leaves nothing active
            #expect(writable == 1)
            #expect(!poll.isActive)
            #expect(loop.closeRemainingHandles() == 1)
            #expect(poll.isClosed)
        }
    }
}
