internal import CLibUV

/// A mutex on `uv_mutex_t` (a `pthread_mutex_t` on Unix).
///
/// libuv's mutex rather than `Synchronization.Mutex` because the package supports macOS 14, where
/// `Mutex` is unavailable, and because this module already owns the libuv dependency. The mutex
/// lives in its own allocation: a pthread mutex must not move.
final class UVLock: @unchecked Sendable {
    // @unchecked: the only state is the mutex itself, which is made for concurrent use.
    private let mutex: UnsafeMutablePointer<uv_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: uv_mutex_t())
        checkInvariant(uv_mutex_init(mutex), "uv_mutex_init")
    }

    deinit {
        uv_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        uv_mutex_lock(mutex)
        defer { uv_mutex_unlock(mutex) }
        return try body()
    }
}

/// Process-wide lifetime counts, for leak checks at shutdown (see ``EventLoop/liveLoopsInProcess``).
final class ProcessCounts: @unchecked Sendable {
    // @unchecked: `loops` and `handleOwners` are only read or written while holding `lock`.
    static let shared = ProcessCounts()

    private let lock = UVLock()
    private var loops = 0
    private var handleOwners = 0

    var liveLoops: Int { lock.withLock { loops } }
    var liveHandleOwners: Int { lock.withLock { handleOwners } }

    func addLoops(_ delta: Int) {
        lock.withLock { loops += delta }
    }

    func addHandleOwners(_ delta: Int) {
        lock.withLock { handleOwners += delta }
    }
}
