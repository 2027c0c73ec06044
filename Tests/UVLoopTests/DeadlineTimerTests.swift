import Testing
import UVLoop

@Suite("UVLoop DeadlineTimer")
struct DeadlineTimerTests {
    /// 200 deadlines, each a pseudo-random 50–950 µs after the previous callback, re-armed from the callback: every
    /// one fires, none before its deadline, on a `timerfd` (armed with the deadline in nanoseconds). How late they
    /// fire depends on the machine (a loaded one, a sanitizer's) and is not asserted here.
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
            // Returns with nothing active (a stopped timer that still held the loop would not let it return until
            // its deadline fired, and fired would be 2).
            let stoppedWithHandlesActive = loop.run()
            #expect(!stoppedWithHandlesActive && fired == 1)
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
