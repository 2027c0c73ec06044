import Testing
import UVLoop

@Suite("UVLoop EventLoop")
struct EventLoopTests {
    @Test func initAndCloseReturnZero() throws {
        let loop = try EventLoop()
        #expect(!loop.isClosed)
        #expect(!loop.isAlive)
        try loop.close()
        #expect(loop.isClosed)
    }

    @Test func runWithoutHandlesReturnsAtOnce() throws {
        try withLoop { loop in
            #expect(loop.run() == false)
            #expect(loop.runOnce() == false)
            #expect(loop.runNoWait() == false)
        }
    }

    @Test func idleLoopIsClosedByDeinit() throws {
        weak var weakLoop: EventLoop?
        do {
            let loop = try EventLoop()
            weakLoop = loop
            loop.runNoWait()
        }
        #expect(weakLoop == nil)
    }

    @Test func closeWithAnOpenHandleThrowsBusyAndStaysUsable() throws {
        try withLoop { loop in
            let timer = Timer(loop: loop) { _ in }
            let error = #expect(throws: UVError.self) { try loop.close() }
            #expect(error?.name == "EBUSY")
            #expect(error?.code == UVError.busyCode)
            #expect(error?.operation == "uv_loop_close")
            #expect(!loop.isClosed)
            #expect(loop.openHandles == 1)
            timer.close()
            #expect(loop.closingHandles == 1)
        }
    }

    @Test func closeRunsPendingCloseCallbacks() throws {
        try withLoop { loop in
            let timer = Timer(loop: loop) { _ in }
            let wakeup = try Wakeup(loop: loop) { _ in }
            timer.start(afterMillis: 60_000)
            timer.close()
            wakeup.close()
            #expect(loop.openHandles == 2)
            #expect(loop.closingHandles == 2)
            // No run: EventLoop.close() must let the two close callbacks run itself.
        }
    }

    @Test func closeRemainingHandlesClosesThroughTheOwners() throws {
        weak var weakTimer: Timer?
        weak var weakWakeup: Wakeup?
        var fired = 0
        try withLoop { loop in
            let active = Timer(loop: loop) { _ in fired += 1 }
            active.start(afterMillis: 60_000)
            let idle = Timer(loop: loop) { _ in fired += 1 }
            let wakeup = try Wakeup(loop: loop) { _ in fired += 1 }
            let alreadyClosing = Timer(loop: loop) { _ in }
            alreadyClosing.close()
            weakTimer = active
            weakWakeup = wakeup
            #expect(loop.openHandles == 4)

            #expect(loop.closeRemainingHandles() == 3)
            #expect(active.isClosed && idle.isClosed && wakeup.isClosed)
            #expect(loop.closingHandles == 4)
            #expect(loop.closeRemainingHandles() == 0)
            #expect(wakeup.sender.send() == false)
            loop.run()
            #expect(loop.openHandles == 0)
        }
        #expect(fired == 0)
        #expect(weakTimer == nil)
        #expect(weakWakeup == nil)
    }

    @Test func stopReturnsWhileHandlesAreActive() throws {
        try withLoop { loop in
            var fired = 0
            let timer = Timer(loop: loop) { _ in
                fired += 1
                if fired == 3 {
                    loop.stop()
                }
            }
            timer.start(afterMillis: 1, repeatMillis: 1)
            #expect(loop.run() == true)
            #expect(fired == 3)
            #expect(timer.isActive)
            timer.close()
            #expect(loop.run() == false)
            #expect(fired == 3)
        }
    }

    @Test func runNoWaitDoesNotBlock() throws {
        try withLoop { loop in
            let timer = Timer(loop: loop) { _ in Issue.record("timer fired") }
            timer.start(afterMillis: 60_000)
            // Returns at once with the timer still pending (had it blocked until the timer, the timer would have
            // fired and recorded an issue).
            #expect(loop.runNoWait() == true)
            #expect(loop.isAlive && timer.isActive)
            timer.close()
        }
    }

    @Test func unreferencedHandlesDoNotKeepTheLoopAlive() throws {
        try withLoop { loop in
            let timer = Timer(loop: loop) { _ in Issue.record("timer fired") }
            timer.start(afterMillis: 60_000)
            timer.isReferenced = false
            let wakeup = try Wakeup(loop: loop) { _ in Issue.record("wakeup fired") }
            wakeup.isReferenced = false
            #expect(!timer.isReferenced && !wakeup.isReferenced)
            #expect(loop.run() == false)
            #expect(timer.isActive)
            timer.close()
            wakeup.close()
        }
    }

    /// The loop clock is `uv_hrtime` truncated to whole milliseconds (from the coarse monotonic clock
    /// when that ticks every millisecond or faster) and cached once per iteration. So a timer of N ms
    /// fires when the loop clock has moved N ms, which can be after only N − 1 ms of real time
    /// (N − 2 ms on a coarse clock): measure latency with `hrtimeNanos`, not by counting timer ms.
    @Test func timersFireOnTheTruncatedLoopClock() throws {
        try withLoop { loop in
            let hrtimeBefore = EventLoop.hrtimeNanos
            loop.updateTime()
            let loopBefore = loop.nowMillis
            var firedAtMillis: UInt64 = 0
            var firedAtNanos: UInt64 = 0
            let timer = Timer(loop: loop) { timer in
                firedAtNanos = EventLoop.hrtimeNanos
                firedAtMillis = timer.loop.nowMillis
                timer.close()
            }
            timer.start(afterMillis: 5)
            loop.run()
            #expect(firedAtMillis >= loopBefore + 5)
            #expect(firedAtNanos - hrtimeBefore > 3_000_000)
        }
    }

    /// Both clocks read the same monotonic clock on Linux and macOS, so loop milliseconds and
    /// `hrtimeNanos` can be converted into each other (up to the truncation and coarse-clock lag).
    /// The loop's time is read between two hrtime reads, so it lies between them whatever the scheduler
    /// does meanwhile: libuv's loop clock is the coarse monotonic clock only when its resolution is at most
    /// 1 ms (else the precise one), so it lags by less than 1 ms, plus 1 ms of truncation to milliseconds.
    @Test func loopClockAndHrtimeShareAnOrigin() throws {
        try withLoop { loop in
            let before = EventLoop.hrtimeNanos
            loop.updateTime()
            let loopMillis = loop.nowMillis
            let after = EventLoop.hrtimeNanos
            #expect(loopMillis <= after / 1_000_000)
            #expect(loopMillis + 2 >= before / 1_000_000, "before \(before) ns, loop \(loopMillis) ms")
        }
    }

    @Test func handlesCreatedInsideCallbacksAreAccountedFor() throws {
        weak var weakChild: Timer?
        try withLoop { loop in
            var childFired = false
            let parent = Timer(loop: loop) { parent in
                let child = Timer(loop: parent.loop) { child in
                    childFired = true
                    child.close()
                }
                weakChild = child
                child.start(afterMillis: 0)
                parent.close()
            }
            parent.start(afterMillis: 0)
            #expect(loop.liveHandleOwners == 1)
            #expect(EventLoop.liveHandleOwnersInProcess >= 1)
            #expect(EventLoop.liveLoopsInProcess >= 1)
            loop.run()
            #expect(childFired)
            #expect(loop.openHandles == 0)
        }
        #expect(weakChild == nil)
    }
}
