internal import FanoutCore

/// Process-wide lifetime counts, for leak checks at shutdown (see ``EventLoop/liveLoopsInProcess``).
final class ProcessCounts: @unchecked Sendable {
    // @unchecked: `loops` and `handleOwners` are only read or written while holding `lock`.
    static let shared = ProcessCounts()

    private let lock = Lock()
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
