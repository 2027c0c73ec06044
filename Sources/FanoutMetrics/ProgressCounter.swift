import FanoutCore

/// A count of work done that one thread adds to and another reads (a long phase's progress line: devices built,
/// bytes written). Adders batch (every thousand devices, every chunk), so the lock is taken rarely.
public final class ProgressCounter: @unchecked Sendable {
    // @unchecked: `count` is touched only under `lock`.
    private let lock = Lock()
    private var count = 0

    public init() {}

    public func add(_ n: Int) {
        lock.lock()
        count += n
        lock.unlock()
    }

    public var value: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }
}
