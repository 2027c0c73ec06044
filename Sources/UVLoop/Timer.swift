internal import CLibUV

/// A libuv timer (`uv_timer_t`) whose callback runs on its loop's thread.
///
/// The callback is set once, at creation; it receives the timer, so it can re-arm, stop or
/// close it without capturing it. Timers have millisecond granularity on the loop clock
/// (``EventLoop/nowMillis``). For exact open-loop cadence arm one-shot timers at absolute
/// deadlines with ``start(atLoopMillis:)`` rather than relying on a repeat interval, and on each
/// callback run everything that is already due.
///
/// libuv 1.44 runs every timer whose deadline has passed in one pass, including timers (re)armed
/// *during* that pass with a deadline that has passed: a timer that re-arms itself for "now" from
/// its own callback keeps running and starves I/O until its deadlines move into the future.
///
/// Lifecycle: ``UVHandle/close()`` it (a second close does nothing); its memory and the loop's retain on this
/// object are released in libuv's close callback (see ``UVHandle``). Loop affinity: see ``EventLoop``.
public final class Timer: UVHandle {
    public typealias Callback = (Timer) -> Void

    /// Set in `init`, dropped in the close callback (which breaks any reference cycle through it).
    private var callback: Callback?

    /// Creates a stopped timer on `loop` (`uv_timer_init`).
    ///
    /// - Precondition: `loop` is not closed.
    public init(loop: EventLoop, _ callback: @escaping Callback) {
        self.callback = callback
        do {
            try super.init(loop: loop, uv_timer_t(), "uv_timer_init") { loop, timer in uv_timer_init(loop, timer) }
        } catch {
            // uv_timer_init cannot fail (libuv 1.x always returns 0).
            preconditionFailure("libuv call failed unexpectedly: \(error)")
        }
    }

    private var handle: UnsafeMutablePointer<uv_timer_t> { raw(uv_timer_t.self) }

    // MARK: Arming

    /// Starts (or restarts) the timer: the callback runs `afterMillis` after the loop's current
    /// time (``EventLoop/nowMillis``), then every `repeatMillis` if that is not 0 (`uv_timer_start`).
    ///
    /// - Precondition: the timer is not closing or closed.
    public func start(afterMillis: UInt64, repeatMillis: UInt64 = 0) {
        preconditionOpen("start")
        // Fails only for a closing handle or a NULL callback, both excluded here.
        checkInvariant(
            uv_timer_start(handle, { timer in Timer.timerFired(timer) }, afterMillis, repeatMillis),
            "uv_timer_start"
        )
    }

    /// Starts the timer as a one-shot that fires when the loop clock reaches `deadlineMillis`
    /// (an absolute ``EventLoop/nowMillis`` value). A deadline that has passed fires on the next
    /// timer pass of the loop.
    ///
    /// Deadlines do not drift: each one is absolute, unlike a repeat interval measured from
    /// the moment the callback ran.
    public func start(atLoopMillis deadlineMillis: UInt64) {
        let now = loop.nowMillis
        start(afterMillis: deadlineMillis > now ? deadlineMillis - now : 0)
    }

    /// Restarts a repeating timer with its repeat interval as the timeout (`uv_timer_again`).
    ///
    /// - Throws: ``UVError`` `EINVAL` if the timer has never been started.
    public func again() throws(UVError) {
        preconditionOpen("again")
        try check(uv_timer_again(handle), "uv_timer_again")
    }

    /// Stops the timer; the callback will not run until it is started again (`uv_timer_stop`).
    public func stop() {
        preconditionOpen("stop")
        checkInvariant(uv_timer_stop(handle), "uv_timer_stop")
    }

    /// The repeat interval in milliseconds; 0 for a one-shot. Setting it takes effect at the next
    /// expiry (`uv_timer_set_repeat`).
    public var repeatMillis: UInt64 {
        get {
            preconditionOpen("repeatMillis")
            return uv_timer_get_repeat(handle)
        }
        set {
            preconditionOpen("repeatMillis")
            uv_timer_set_repeat(handle, newValue)
        }
    }

    /// Milliseconds until the timer fires, relative to ``EventLoop/nowMillis``; 0 if it is
    /// stopped or already due (`uv_timer_get_due_in`).
    public var dueInMillis: UInt64 {
        preconditionOpen("dueInMillis")
        return uv_timer_get_due_in(handle)
    }

    override func didClose() {
        callback = nil
    }

    // MARK: libuv callback (capture-free, forwards to one method)

    private static func timerFired(_ handle: UnsafeMutablePointer<uv_timer_t>?) {
        UVHandle.owner(handle, Timer.self).fire()
    }

    private func fire() {
        callback?(self)
    }
}
