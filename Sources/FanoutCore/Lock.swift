#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one lock of the house: a `pthread_mutex_t` in its own allocation (a pthread mutex must not move).
///
/// Not `Synchronization.Mutex`: the package supports macOS 14, where it is unavailable. Not `NSLock`: the
/// targets below the CLI do without Foundation where they can, and one type means one behaviour to reason
/// about. Every cross-thread value in fanout (inboxes, snapshots, the hlog writer, process counts) is
/// touched only inside `withLock`.
public final class Lock: @unchecked Sendable {
    // @unchecked: the only state is the mutex itself, which is made for concurrent use.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "pthread_mutex_init: \(rc)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Takes the lock (pair with `unlock()` on every path; `withLock` does it for you).
    @inline(__always)
    public func lock() { pthread_mutex_lock(mutex) }

    @inline(__always)
    public func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` holding the lock; released however `body` returns.
    @inline(__always)
    public func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
