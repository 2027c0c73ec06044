internal import CLibUV

#if canImport(Glibc)
import Glibc
#endif

/// A libuv event loop: one `uv_loop_t`, allocated and initialised (`uv_loop_init`) by this object.
///
/// **Loop affinity.** A loop and every handle (``UVHandle``) on it are used by one thread at a
/// time, the thread that runs the loop; callbacks run on that thread, inside ``run()``,
/// ``runOnce()`` or ``runNoWait()``. None of these types is `Sendable`, so Swift 6's strict
/// concurrency checking keeps them in one isolation region; create the loop on the worker thread
/// that runs it. The one object made for other threads is ``Wakeup/Sender``.
///
/// **Lifecycle.** Close every handle (``UVHandle/close()``), then call
/// ``close()``, which lets pending close callbacks run and requires `uv_loop_close` to return 0.
/// A handle keeps its owner alive until libuv's close callback, and an owner keeps its loop
/// alive, so no owner can outlive the loop's memory. ``closeRemainingHandles()`` is the shutdown
/// path for code that lost track of its handles (for example after an error).
///
/// ```swift
/// let loop = try EventLoop()
/// let timer = Timer(loop: loop) { timer in timer.close() }
/// timer.start(afterMillis: 10)
/// loop.run()          // returns when no active handle is left
/// try loop.close()
/// ```
public final class EventLoop {
    /// The loop's memory; valid until ``close()`` succeeds (or `deinit` closes an idle loop).
    let pointer: UnsafeMutablePointer<uv_loop_t>

    /// Whether ``close()`` has succeeded; the loop can no longer be used.
    public private(set) var isClosed = false

    /// Whether the loop is inside `uv_run` (so callbacks are running or may run).
    public private(set) var isRunning = false

    /// The read buffer every TCP stream on this loop reads into: libuv reads into it and calls the
    /// read callback before it allocates again, and one thread runs the loop, so one buffer serves
    /// every connection (thousands of idle connections cost no read buffers).
    let readBuffer = UnsafeMutableRawPointer.allocate(byteCount: EventLoop.readBufferBytes, alignment: 16)
    static let readBufferBytes = 64 * 1024

    /// Handles on this loop whose `uv_*_init` succeeded and whose close callback has not run yet.
    /// Each of them holds one retain on its owner. `uv_loop_close` succeeds only when this is 0.
    public private(set) var openHandles = 0

    /// Of ``openHandles``, those already passed to `uv_close`, waiting for their close callback.
    public private(set) var closingHandles = 0

    /// Handle objects (``UVHandle``) created on this loop and not yet deinitialised.
    public private(set) var liveHandleOwners = 0

    /// SIGPIPE ignored once per process, before the first loop exists: libuv writes with plain
    /// `write`/`writev`, so a write to a peer that reset its connection raises SIGPIPE, whose default
    /// action ends the process. Ignored, the write fails with `EPIPE` and only that stream closes.
    private static let brokenPipeIgnored: Bool = {
        signal(SIGPIPE, SIG_IGN)
        return true
    }()

    /// Whether SIGPIPE is ignored in this process (it is once any loop has been created).
    public static var ignoresBrokenPipe: Bool { brokenPipeIgnored }

    /// Creates and initialises a loop (`uv_loop_init`). The first loop of the process ignores SIGPIPE.
    public init() throws(UVError) {
        _ = EventLoop.brokenPipeIgnored
        let pointer = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        pointer.initialize(to: uv_loop_t())
        do {
            try check(uv_loop_init(pointer), "uv_loop_init")
        } catch {
            pointer.deinitialize(count: 1)
            pointer.deallocate()
            readBuffer.deallocate()
            throw error
        }
        self.pointer = pointer
        ProcessCounts.shared.addLoops(1)
    }

    deinit {
        // A handle retains its owner and the owner retains this loop, so when the loop goes away
        // no handle is open: an idle loop that was never closed can still be closed cleanly.
        if !isClosed {
            precondition(openHandles == 0, "EventLoop deinitialised with \(openHandles) open handle(s)")
            checkInvariant(uv_loop_close(pointer), "uv_loop_close")
            pointer.deinitialize(count: 1)
            pointer.deallocate()
        }
        readBuffer.deallocate()
        ProcessCounts.shared.addLoops(-1)
    }

    // MARK: Running

    /// Runs until no active and referenced handle is left, or until ``stop()`` (`UV_RUN_DEFAULT`).
    ///
    /// - Returns: `true` if the loop was stopped while handles were still active.
    @discardableResult
    public func run() -> Bool {
        run(mode: UV_RUN_DEFAULT)
    }

    /// Polls for I/O once, blocking if there is nothing pending (`UV_RUN_ONCE`).
    ///
    /// - Returns: `true` if there is more to do (active handles remain).
    @discardableResult
    public func runOnce() -> Bool {
        run(mode: UV_RUN_ONCE)
    }

    /// Polls for I/O once without blocking (`UV_RUN_NOWAIT`).
    ///
    /// - Returns: `true` if there is more to do (active handles remain).
    @discardableResult
    public func runNoWait() -> Bool {
        run(mode: UV_RUN_NOWAIT)
    }

    /// Makes ``run()`` return after the current iteration (`uv_stop`). Call it from a callback;
    /// from another thread, send a ``Wakeup`` whose callback stops the loop.
    ///
    /// libuv 1.44 quirk: a stop requested while the loop is *not* running makes the next `uv_run`
    /// return at once, without running an iteration.
    public func stop() {
        preconditionUsable("stop()")
        uv_stop(pointer)
    }

    /// Whether the loop has active and referenced handles, active requests or closing handles
    /// (`uv_loop_alive`).
    public var isAlive: Bool {
        preconditionUsable("isAlive")
        return uv_loop_alive(pointer) != 0
    }

    private func run(mode: uv_run_mode) -> Bool {
        preconditionUsable("run")
        precondition(!isRunning, "EventLoop.run is not reentrant: called from inside a callback of the same loop")
        isRunning = true
        defer { isRunning = false }
        return uv_run(pointer, mode) != 0
    }

    // MARK: Time

    /// The loop's clock in milliseconds (`uv_now`): cached at the start of each iteration, so it
    /// is the reference for timer deadlines (``Timer/start(atLoopMillis:)``).
    public var nowMillis: UInt64 {
        preconditionUsable("nowMillis")
        return uv_now(pointer)
    }

    /// Refreshes ``nowMillis`` from the monotonic clock (`uv_update_time`).
    public func updateTime() {
        preconditionUsable("updateTime()")
        uv_update_time(pointer)
    }

    /// Monotonic high-resolution time in nanoseconds since an arbitrary origin: `uv_hrtime`'s clock and units
    /// (libuv reads `CLOCK_MONOTONIC` with `clock_gettime`), read directly (through libuv it cost ~20 instructions
    /// more a read, several reads a request). Safe from any thread.
    public static var hrtimeNanos: UInt64 {
        var t = timespec()
        guard clock_gettime(CLOCK_MONOTONIC, &t) == 0 else { return 0 }  // as libuv answers a failed read
        return UInt64(t.tv_sec) &* 1_000_000_000 &+ UInt64(t.tv_nsec)
    }

    // MARK: Shutdown

    /// Closes the loop (`uv_loop_close`) and frees its memory.
    ///
    /// If every handle has been passed to `close()` but some close callbacks are still pending,
    /// runs the loop without blocking until they have run. Then calls `uv_loop_close`, which must
    /// return 0.
    ///
    /// - Throws: ``UVError`` `EBUSY` if a handle is still open (not closed); the loop stays usable,
    ///   so close the handle (or call ``closeRemainingHandles()``) and try again.
    /// - Precondition: the loop is not running and not closed.
    public func close() throws(UVError) {
        preconditionUsable("close()")
        precondition(!isRunning, "EventLoop.close() called from inside a callback of the same loop")
        if openHandles == closingHandles {
            while closingHandles > 0 {
                // Only close callbacks can run: every handle is closing, so nothing is active.
                runNoWait()
            }
        }
        try check(uv_loop_close(pointer), "uv_loop_close")
        pointer.deinitialize(count: 1)
        pointer.deallocate()
        isClosed = true
    }

    /// Closes every handle on this loop that is not closing yet, through its owner (`uv_walk`).
    /// Their close callbacks run on the next iteration (or in ``close()``). With `tcpOnly`, only TCP
    /// listeners and streams (a server's shutdown: every connection, draining or not, while its timers
    /// and wakeups stay).
    ///
    /// - Returns: the number of handles this call closed.
    @discardableResult
    public func closeRemainingHandles(tcpOnly: Bool = false) -> Int {
        preconditionUsable("closeRemainingHandles()")
        var walk = (closed: 0, tcpOnly: tcpOnly)
        withUnsafeMutablePointer(to: &walk) { state in
            uv_walk(pointer, { handle, state in EventLoop.closeWalkedHandle(handle, state) }, state)
        }
        return walk.closed
    }

    private static func closeWalkedHandle(
        _ handle: UnsafeMutablePointer<uv_handle_t>?,
        _ state: UnsafeMutableRawPointer?
    ) {
        guard let handle, let state, uv_is_closing(handle) == 0 else { return }
        let walk = state.assumingMemoryBound(to: (closed: Int, tcpOnly: Bool).self)
        guard let data = uv_handle_get_data(handle) else {
            preconditionFailure("a libuv handle without an owner on a UVLoop loop")
        }
        if walk.pointee.tcpOnly && uv_handle_get_type(handle) != UV_TCP { return }
        // Every handle on a UVLoop loop is a UVHandle's, put in its `data` by UVHandle.init.
        Unmanaged<UVHandle>.fromOpaque(data).takeUnretainedValue().close()
        walk.pointee.closed += 1
    }

    // MARK: Process-wide counts

    /// `EventLoop` objects alive in this process (all threads).
    public static var liveLoopsInProcess: Int {
        ProcessCounts.shared.liveLoops
    }

    /// Handle objects (``UVHandle``) alive in this process (all threads and loops).
    public static var liveHandleOwnersInProcess: Int {
        ProcessCounts.shared.liveHandleOwners
    }

    // MARK: Bookkeeping for handle owners (loop thread only)

    func preconditionUsable(_ operation: @autoclosure () -> String) {
        precondition(!isClosed, "EventLoop.\(operation()) used after close()")
    }

    func ownerCreated() {
        liveHandleOwners += 1
        ProcessCounts.shared.addHandleOwners(1)
    }

    func ownerDestroyed() {
        liveHandleOwners -= 1
        ProcessCounts.shared.addHandleOwners(-1)
    }

    func handleOpened() {
        openHandles += 1
    }

    func handleClosing() {
        closingHandles += 1
    }

    func handleClosed() {
        closingHandles -= 1
        openHandles -= 1
    }
}
