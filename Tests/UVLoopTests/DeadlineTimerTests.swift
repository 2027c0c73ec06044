import Testing
import UVLoop

@Suite("UVLoop DeadlineTimer")
struct DeadlineTimerTests {
    /// 200 deadlines, each a pseudo-random 50–950 µs after the previous callback, re-armed from the callback: none
    /// fires before its deadline, and the median lateness is well under a millisecond. A timer rounding the
    /// deadline up to the loop's next millisecond (libuv's `Timer`) is late by ~0.5 ms at the median here.
    @Test("fires at its absolute deadline to the microsecond, never before it (Linux: a timerfd)")
    func precise() throws {
        try withLoop { loop in
            var lateness: [UInt64] = []
            var early = 0
            var deadline: UInt64 = 0
            var state: UInt64 = 0x9E37_79B9_7F4A_7C15
            func next() -> UInt64 {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return 50_000 + (state >> 33) % 900_000
            }
            let timer = DeadlineTimer(loop: loop) { timer in
                let now = EventLoop.hrtimeNanos
                if now < deadline { early += 1 } else { lateness.append(now - deadline) }
                if lateness.count + early < 200 {
                    deadline = EventLoop.hrtimeNanos + next()
                    timer.start(atHrtimeNanos: deadline)
                } else {
                    timer.close()
                }
            }
            #expect(timer.isPrecise)
            deadline = EventLoop.hrtimeNanos + next()
            timer.start(atHrtimeNanos: deadline)
            #expect(timer.isActive)
            loop.run()
            #expect(early == 0)
            #expect(lateness.count == 200)
            let median = lateness.sorted()[lateness.count / 2]
            #expect(median < 300_000, "median lateness \(median) ns")
        }
    }

    @Test("a passed deadline fires on the next pass; a stopped timer does not fire and does not keep the loop alive")
    func passedAndStopped() throws {
        try withLoop { loop in
            var fired = 0
            let timer = DeadlineTimer(loop: loop) { _ in fired += 1 }
            timer.start(atHrtimeNanos: 0)
            loop.run()
            #expect(fired == 1)
            #expect(!timer.isActive)
            // Not re-armed: nothing keeps the loop running.
            #expect(!loop.isAlive)
            timer.start(atHrtimeNanos: EventLoop.hrtimeNanos + 5_000_000)
            #expect(loop.isAlive)
            timer.stop()
            #expect(!timer.isActive)
            #expect(!loop.isAlive)
            let started = EventLoop.hrtimeNanos
            loop.run()
            #expect(fired == 1)
            #expect(EventLoop.hrtimeNanos - started < 5_000_000)
            // Re-armed for later before the earlier deadline: only the later one fires.
            timer.start(atHrtimeNanos: EventLoop.hrtimeNanos + 1_000_000)
            let later = EventLoop.hrtimeNanos + 20_000_000
            timer.start(atHrtimeNanos: later)
            loop.run()
            #expect(fired == 2)
            #expect(EventLoop.hrtimeNanos >= later)
            timer.close()
            #expect(timer.isClosed)
        }
    }

    @Test("closed from its own callback; closed by the loop's owner (closeRemainingHandles), then close() is harmless")
    func closing() throws {
        try withLoop { loop in
            var fired = 0
            let timer = DeadlineTimer(loop: loop) { timer in
                fired += 1
                timer.close()
            }
            timer.start(atHrtimeNanos: EventLoop.hrtimeNanos + 100_000)
            loop.run()
            #expect(fired == 1)
            #expect(timer.isClosed)
            #expect(loop.openHandles == loop.closingHandles)
        }
        try withLoop { loop in
            var fired = 0
            let timer = DeadlineTimer(loop: loop) { _ in fired += 1 }
            timer.start(atHrtimeNanos: EventLoop.hrtimeNanos + 1_000_000_000)
            #expect(loop.closeRemainingHandles() == 1)
            loop.run()
            #expect(fired == 0)
            timer.close()
        }
    }
}
