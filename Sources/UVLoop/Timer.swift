internal import CLibUV

/// Where a handle is in libuv's lifecycle (libuv `docs/src/handle.rst`).
enum HandleState {
    /// Initialised (`uv_*_init` returned 0); libuv holds one retain on the owner.
    case open
    /// Passed to `uv_close`; the close callback has not run yet.
    case closing
    /// The close callback ran (or init failed): the memory is freed, the retain balanced.
    case closed
}

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
/// Lifecycle: ``close()`` it exactly once; its memory and the loop's retain on this object are
/// released in libuv's close callback (see ``EventLoop``). Loop affinity: see ``EventLoop``.
public final class Timer {
    public typealias Callback = (Timer) -> Void

    /// The loop this timer belongs to (kept alive by the timer).
    public let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_timer_t>
    private var state: HandleState
    /// Set in `init`, dropped in the close callback (which breaks any reference cycle through it).
    private var callback: Callback?

    /// Creates a stopped timer on `loop` (`uv_timer_init`).
    ///
    /// - Precondition: `loop` is not closed.
    public init(loop: EventLoop, _ callback: @escaping Callback) {
        loop.preconditionUsable("Timer.init")
        self.loop = loop
        self.callback = callback
        handle = .allocate(capacity: 1)
        handle.initialize(to: uv_timer_t())
        state = .open
        // uv_timer_init cannot fail (libuv 1.x always returns 0).
        checkInvariant(uv_timer_init(loop.pointer, handle), "uv_timer_init")
        uv_handle_set_data(CLibUV_timer_as_handle(handle), Unmanaged.passRetained(self).toOpaque())
        loop.ownerCreated()
        loop.handleOpened()
    }

    deinit {
        // An open or closing handle holds a retain on its owner, so only a closed one gets here.
        precondition(state == .closed, "Timer deinitialised before its close callback ran")
        loop.ownerDestroyed()
    }

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

    /// Whether the timer is started (`uv_is_active`).
    public var isActive: Bool {
        state == .open && uv_is_active(CLibUV_timer_as_handle(handle)) != 0
    }

    /// Whether an active timer keeps ``EventLoop/run()`` from returning (`uv_ref`/`uv_unref`);
    /// `true` by default.
    public var isReferenced: Bool {
        get {
            preconditionOpen("isReferenced")
            return uv_has_ref(CLibUV_timer_as_handle(handle)) != 0
        }
        set {
            preconditionOpen("isReferenced")
            if newValue {
                uv_ref(CLibUV_timer_as_handle(handle))
            } else {
                uv_unref(CLibUV_timer_as_handle(handle))
            }
        }
    }

    // MARK: Closing

    /// Whether ``close()`` has been called (the close callback may still be pending).
    public var isClosed: Bool {
        state != .open
    }

    /// Stops the timer and closes it (`uv_close`). The callback will not run again. Its memory is
    /// released in the close callback, on the next loop iteration (or in ``EventLoop/close()``).
    /// Safe inside any callback, including this timer's own.
    ///
    /// - Precondition: not closed before.
    public func close() {
        preconditionOpen("close")
        state = .closing
        loop.handleClosing()
        uv_close(CLibUV_timer_as_handle(handle)) { handle in Timer.handleClosed(handle) }
    }

    // MARK: libuv callbacks (capture-free, forward to one method)

    private static func timerFired(_ handle: UnsafeMutablePointer<uv_timer_t>?) {
        guard let handle, let data = uv_handle_get_data(CLibUV_timer_as_handle(handle)) else {
            preconditionFailure("timer callback without an owner")
        }
        Unmanaged<Timer>.fromOpaque(data).takeUnretainedValue().fire()
    }

    private static func handleClosed(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
        guard let handle, let data = uv_handle_get_data(handle) else {
            preconditionFailure("timer close callback without an owner")
        }
        // Balances `passRetained` in `init`; the owner may be deinitialised when `owner` goes.
        let owner = Unmanaged<Timer>.fromOpaque(data).takeRetainedValue()
        owner.finishClose()
    }

    private func fire() {
        callback?(self)
    }

    private func finishClose() {
        precondition(state == .closing, "close callback for a timer that is not closing")
        handle.deinitialize(count: 1)
        handle.deallocate()
        state = .closed
        callback = nil
        loop.handleClosed()
    }

    private func preconditionOpen(_ operation: StaticString) {
        precondition(state == .open, "Timer.\(operation) used after close()")
    }
}
