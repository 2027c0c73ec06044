internal import CLibUV

#if canImport(Glibc)
import Glibc
#endif

/// A libuv signal handle (`uv_signal_t`): the callback runs on the loop's thread when the process receives
/// the signal (libuv turns the signal into loop I/O, so the callback may do anything a callback may).
/// Lifecycle and loop affinity as ``Timer``.
public final class SignalWatcher: UVHandle {
    public typealias Callback = (SignalWatcher, Int32) -> Void

    private var callback: Callback?

    /// Watches `signal` (e.g. `SIGINT`); the watcher is active until ``UVHandle/close()``.
    public init(loop: EventLoop, signal: Int32, _ callback: @escaping Callback) throws(UVError) {
        self.callback = callback
        // uv_signal_init fails only when libuv cannot set up its process-wide signal pipe.
        try super.init(loop: loop, uv_signal_t(), "uv_signal_init") { loop, handle in uv_signal_init(loop, handle) }
        // A process inherits its parent's signal mask (a test runner or a supervisor may block SIGTERM); a
        // blocked signal would never reach libuv, so the calling thread, which runs the loop, unblocks it.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        do {
            try check(
                uv_signal_start(raw(uv_signal_t.self), { h, signal in SignalWatcher.fired(h, signal) }, signal),
                "uv_signal_start")
        } catch {
            close()
            throw error
        }
    }

    override func didClose() {
        callback = nil
    }

    private static func fired(_ handle: UnsafeMutablePointer<uv_signal_t>?, _ signal: Int32) {
        let owner = UVHandle.owner(handle, SignalWatcher.self)
        owner.callback?(owner, signal)
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
