internal import CLibUV

/// A one-shot timer that fires at an absolute ``EventLoop/hrtimeNanos`` instant, to the microsecond, on its
/// loop's thread: for a schedule denser than libuv's millisecond timers (``Timer``), such as `fanout serve
/// --trigger`'s 2,000 events a second.
///
/// A libuv timer's deadline is whole milliseconds on the loop's cached clock, so an event due 0.3 ms from now
/// runs up to a millisecond late (the deadline rounded up) plus the kernel's wake-up slack. On Linux this timer
/// is a `timerfd` (`CLOCK_MONOTONIC`, the clock of `uv_hrtime`) armed with the absolute deadline in nanoseconds
/// and watched by a ``Poll`` handle: the loop's `epoll_wait` returns when it expires. Elsewhere, or if the
/// `timerfd` cannot be created, it falls back to a ``Timer`` armed with the deadline rounded up to the next
/// millisecond, and armed again if it fires early (``isPrecise`` is false then).
///
/// Lifecycle: ``close()`` it (the `timerfd` is closed then, after its poll handle; a second close does nothing).
/// If the loop's owner closes every handle first (``EventLoop/closeRemainingHandles(tcpOnly:)``), the `timerfd`
/// is closed when this object goes. Loop affinity: see ``EventLoop``.
public final class DeadlineTimer {
    public typealias Callback = (DeadlineTimer) -> Void

    public let loop: EventLoop
    /// The deadline is kept to the microsecond (a `timerfd`); false: to the millisecond (a libuv timer).
    public private(set) var isPrecise = false
    private var poll: Poll?
    private var fallback: Timer?
    private var fd: Int32 = -1
    private var callback: Callback?
    private var armed = false
    private var closed = false
    /// The deadline armed (the fallback checks it: a libuv timer can fire up to a millisecond early, its loop clock
    /// being cached and truncated to the millisecond).
    private var deadline: UInt64 = 0

    /// A stopped timer on `loop`.
    public init(loop: EventLoop, _ callback: @escaping Callback) {
        loop.preconditionUsable("DeadlineTimer.init")
        self.loop = loop
        self.callback = callback
        let fd = CLibUV_timerfd_create()
        if fd >= 0 {
            do {
                // The poll's callback holds this object until the handle is closed (see the lifecycle note).
                poll = try Poll(loop: loop, socket: fd) { [self] _, status, _ in
                    if status == 0 { self.expired() }
                }
                self.fd = fd
            } catch {
                _ = CLibUV_close(fd)
            }
        }
        isPrecise = poll != nil
        if poll == nil {
            fallback = Timer(loop: loop) { [self] _ in
                // Early (the loop's clock is behind): wait for the rest.
                if EventLoop.hrtimeNanos < self.deadline { self.armFallback() } else { self.fire() }
            }
        }
    }

    deinit {
        closeDescriptor()
    }

    /// Arms (or re-arms) the timer for `deadlineNanos`, an ``EventLoop/hrtimeNanos`` instant; one that has passed
    /// fires on the loop's next I/O pass.
    public func start(atHrtimeNanos deadlineNanos: UInt64) {
        precondition(!closed, "DeadlineTimer.start used after close()")
        armed = true
        deadline = deadlineNanos
        if let poll {
            // 0 would disarm: a deadline at the clock's origin is the same as 1 ns after it.
            precondition(CLibUV_timerfd_set(fd, max(deadlineNanos, 1)) == 0, "timerfd_settime failed")
            if !poll.isActive {
                do { try poll.start(.readable) } catch { preconditionFailure("uv_poll_start on a timerfd: \(error)") }
            }
            return
        }
        armFallback()
    }

    /// The fallback's libuv timer for the deadline, in whole milliseconds rounded up.
    private func armFallback() {
        let now = EventLoop.hrtimeNanos
        fallback?.start(afterMillis: deadline > now ? (deadline - now + 999_999) / 1_000_000 : 0)
    }

    /// Disarms the timer; the callback does not run until ``start(atHrtimeNanos:)`` again.
    public func stop() {
        precondition(!closed, "DeadlineTimer.stop used after close()")
        armed = false
        if let poll {
            _ = CLibUV_timerfd_set(fd, 0)
            if poll.isActive { poll.stop() }
            return
        }
        fallback?.stop()
    }

    /// Armed and not fired yet.
    public var isActive: Bool { armed && !closed }

    /// Whether ``close()`` has been called.
    public var isClosed: Bool { closed }

    /// Disarms and closes the timer: its handle (the callback will not run again), then the `timerfd`. Safe inside
    /// any callback, including this timer's own. A second call does nothing, as for every handle (``UVHandle``).
    public func close() {
        guard !closed else { return }
        closed = true
        armed = false
        // A no-op when the loop's owner closed the handle first (closeRemainingHandles).
        poll?.close()
        // uv_close stops a poll handle at once: the descriptor is no longer watched.
        closeDescriptor()
        poll = nil
        fallback?.close()
        fallback = nil
        callback = nil
    }

    private func closeDescriptor() {
        guard fd >= 0 else { return }
        _ = CLibUV_close(fd)
        fd = -1
    }

    /// The `timerfd` is readable: read its expiry count (which re-arms its readiness); 0 (EAGAIN: re-armed for
    /// later since it expired) is not an expiry.
    private func expired() {
        guard !closed, fd >= 0, CLibUV_timerfd_read(fd) > 0 else { return }
        fire()
        // Not re-armed from the callback: nothing to watch until the next start.
        if !armed && !closed, let poll, poll.isActive { poll.stop() }
    }

    private func fire() {
        guard armed, !closed else { return }
        armed = false
        callback?(self)
    }
}
