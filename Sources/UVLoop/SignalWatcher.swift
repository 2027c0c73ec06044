internal import CLibUV

#if canImport(Glibc)
import Glibc
#endif

/// A libuv signal handle (`uv_signal_t`): the callback runs on the loop's thread when the process receives
/// the signal (libuv turns the signal into loop I/O, so the callback may do anything a callback may).
/// Lifecycle and loop affinity as ``Timer``.
public final class SignalWatcher {
    public typealias Callback = (SignalWatcher, Int32) -> Void

    public let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_signal_t>
    private var state: HandleState
    private var callback: Callback?

    /// Watches `signal` (e.g. `SIGINT`); the watcher is active until ``close()``.
    public init(loop: EventLoop, signal: Int32, _ callback: @escaping Callback) throws(UVError) {
        loop.preconditionUsable("SignalWatcher.init")
        self.loop = loop
        self.callback = callback
        handle = .allocate(capacity: 1)
        handle.initialize(to: uv_signal_t())
        state = .open
        checkInvariant(uv_signal_init(loop.pointer, handle), "uv_signal_init")
        uv_handle_set_data(CLibUV_signal_as_handle(handle), Unmanaged.passRetained(self).toOpaque())
        loop.ownerCreated()
        loop.handleOpened()
        // A process inherits its parent's signal mask (a test runner or a supervisor may block SIGTERM); a
        // blocked signal would never reach libuv, so the calling thread, which runs the loop, unblocks it.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        do {
            try check(uv_signal_start(handle, { h, signal in SignalWatcher.fired(h, signal) }, signal), "uv_signal_start")
        } catch {
            close()
            throw error
        }
    }

    deinit {
        precondition(state == .closed, "SignalWatcher deinitialised before its close callback ran")
        loop.ownerDestroyed()
    }

    /// Whether the watcher keeps ``EventLoop/run()`` from returning; `true` by default.
    public var isReferenced: Bool {
        get { state == .open && uv_has_ref(CLibUV_signal_as_handle(handle)) != 0 }
        set {
            guard state == .open else { return }
            if newValue { uv_ref(CLibUV_signal_as_handle(handle)) } else { uv_unref(CLibUV_signal_as_handle(handle)) }
        }
    }

    public var isClosed: Bool { state != .open }

    /// Stops watching and closes the handle (`uv_close`); a second call does nothing.
    public func close() {
        guard state == .open else { return }
        state = .closing
        loop.handleClosing()
        uv_close(CLibUV_signal_as_handle(handle)) { handle in SignalWatcher.handleClosed(handle) }
    }

    private static func fired(_ handle: UnsafeMutablePointer<uv_signal_t>?, _ signal: Int32) {
        guard let handle, let data = uv_handle_get_data(CLibUV_signal_as_handle(handle)) else { return }
        let owner = Unmanaged<SignalWatcher>.fromOpaque(data).takeUnretainedValue()
        owner.callback?(owner, signal)
    }

    private static func handleClosed(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
        guard let handle, let data = uv_handle_get_data(handle) else {
            preconditionFailure("signal close callback without an owner")
        }
        let owner = Unmanaged<SignalWatcher>.fromOpaque(data).takeRetainedValue()
        precondition(owner.state == .closing, "close callback for a signal handle that is not closing")
        owner.handle.deinitialize(count: 1)
        owner.handle.deallocate()
        owner.state = .closed
        owner.callback = nil
        owner.loop.handleClosed()
    }
}

/// SIGINT and SIGTERM that arrive while no loop watches them (between a program's start line and its loops'
/// ``SignalWatcher``s, or after the last watcher closed and libuv restored the default, which ends the process):
/// noted instead, so a loop that starts watching can act on one that came first.
public enum PendingSignals {
    /// Written by the handler only (a signal handler may store a flag and nothing more).
    nonisolated(unsafe) private static var caught: Int32 = 0

    /// Notes SIGINT and SIGTERM from now on, until a ``SignalWatcher`` takes the signal over.
    public static func catchUntilWatched() {
        signal(SIGINT) { _ in PendingSignals.caught = 1 }
        signal(SIGTERM) { _ in PendingSignals.caught = 1 }
    }

    /// Whether SIGINT or SIGTERM came while only ``catchUntilWatched()`` was catching them.
    public static var pending: Bool { caught != 0 }
}
