import Testing
import UVLoop

@Suite("UVLoop Timer")
struct TimerTests {
    @Test func oneShotFiresOnce() throws {
        try withLoop { loop in
            var fired = 0
            let timer = Timer(loop: loop) { _ in fired += 1 }
            timer.start(afterMillis: 1)
            #expect(timer.isActive)
            #expect(timer.repeatMillis == 0)
            loop.run()
            #expect(fired == 1)
            #expect(!timer.isActive)
            loop.run()
            #expect(fired == 1)
            timer.close()
        }
    }

    @Test func repeatingFiresNTimesThenStopsAndCloses() throws {
        let times = 5
        try withLoop { loop in
            var fired = 0
            let timer = Timer(loop: loop) { timer in
                fired += 1
                if fired == times {
                    timer.stop()
                    #expect(!timer.isActive)
                    timer.close()
                }
            }
            timer.start(afterMillis: 1, repeatMillis: 1)
            #expect(timer.repeatMillis == 1)
            loop.run()
            #expect(fired == times)
            #expect(timer.isClosed)
            #expect(loop.closingHandles == 0)
        }
    }

    @Test func firesAtAnAbsoluteDeadline() throws {
        try withLoop { loop in
            let deadlineMillis = loop.nowMillis + 20
            var firedAtMillis: UInt64 = 0
            let timer = Timer(loop: loop) { timer in
                firedAtMillis = timer.loop.nowMillis
                timer.close()
            }
            timer.start(atLoopMillis: deadlineMillis)
            #expect(timer.dueInMillis == 20)
            loop.run()
            #expect(firedAtMillis >= deadlineMillis)
        }
    }

    /// Open-loop cadence: each tick is armed at an absolute deadline computed from the first one,
    /// so the schedule does not drift by the time spent in callbacks.
    @Test func absoluteDeadlinesKeepTheirCadence() throws {
        try withLoop { loop in
            let periodMillis: UInt64 = 3
            let ticks: UInt64 = 10
            let firstMillis = loop.nowMillis + periodMillis
            var tick: UInt64 = 0
            var lateTicks = 0
            let timer = Timer(loop: loop) { timer in
                let dueMillis = firstMillis + tick * periodMillis
                if timer.loop.nowMillis < dueMillis {
                    lateTicks += 1  // early, really: must never happen
                }
                tick += 1
                if tick == ticks {
                    timer.close()
                } else {
                    timer.start(atLoopMillis: firstMillis + tick * periodMillis)
                }
            }
            timer.start(atLoopMillis: firstMillis)
            loop.run()
            #expect(tick == ticks)
            #expect(lateTicks == 0)
            #expect(loop.nowMillis >= firstMillis + (ticks - 1) * periodMillis)
        }
    }

    @Test func aDeadlineInThePastFiresOnTheNextPass() throws {
        try withLoop { loop in
            var fired = 0
            let timer = Timer(loop: loop) { _ in fired += 1 }
            timer.start(atLoopMillis: 0)
            #expect(timer.dueInMillis == 0)
            loop.runNoWait()
            #expect(fired == 1)
            timer.close()
        }
    }

    @Test func timersWithTheSameDeadlineFireInStartOrder() throws {
        try withLoop { loop in
            var order: [Int] = []
            let deadlineMillis = loop.nowMillis + 2
            let timers = (0..<4).map { index in
                Timer(loop: loop) { timer in
                    order.append(index)
                    timer.close()
                }
            }
            for timer in timers.reversed() {
                timer.start(atLoopMillis: deadlineMillis)
            }
            loop.run()
            #expect(order == [3, 2, 1, 0])
        }
    }

    @Test func closesItselfInsideItsCallback() throws {
        weak var weakTimer: Timer?
        try withLoop { loop in
            var fired = 0
            let timer = Timer(loop: loop) { timer in
                fired += 1
                timer.close()
            }
            weakTimer = timer
            timer.start(afterMillis: 0, repeatMillis: 1)
            loop.run()
            #expect(fired == 1)
            #expect(timer.isClosed)
        }
        #expect(weakTimer == nil)
    }

    @Test func closingAnotherTimerInACallbackCancelsIt() throws {
        try withLoop { loop in
            let victim = Timer(loop: loop) { _ in Issue.record("closed timer fired") }
            victim.start(afterMillis: 1)
            let killer = Timer(loop: loop) { killer in
                victim.close()
                killer.close()
            }
            killer.start(afterMillis: 0)
            loop.run()
            #expect(victim.isClosed)
        }
    }

    @Test func againRestartsWithTheRepeatInterval() throws {
        try withLoop { loop in
            let timer = Timer(loop: loop) { _ in }
            timer.start(afterMillis: 60_000, repeatMillis: 7)
            try timer.again()
            #expect(timer.dueInMillis == 7)
            timer.repeatMillis = 9
            try timer.again()
            #expect(timer.dueInMillis == 9)
            timer.close()
        }
    }

    @Test func againOnATimerNeverStartedThrowsEINVAL() throws {
        try withLoop { loop in
            let timer = Timer(loop: loop) { _ in }
            let error = #expect(throws: UVError.self) { try timer.again() }
            #expect(error?.name == "EINVAL")
            #expect(error?.code == UVError.invalidArgumentCode)
            #expect(error?.operation == "uv_timer_again")
            #expect(error?.message == "invalid argument")
            #expect(error.map(String.init(describing:)) == "uv_timer_again: EINVAL (invalid argument)")
            timer.close()
        }
    }

    @Test func stoppedTimerDoesNotFire() throws {
        try withLoop { loop in
            let timer = Timer(loop: loop) { _ in Issue.record("stopped timer fired") }
            timer.start(afterMillis: 0)
            timer.stop()
            #expect(!timer.isActive)
            #expect(timer.dueInMillis == 0)
            #expect(loop.run() == false)
            timer.close()
        }
    }
}
