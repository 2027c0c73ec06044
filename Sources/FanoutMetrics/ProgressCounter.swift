import FanoutCore

/// A count of work done that one thread adds to and another reads (a long phase's progress line: devices built,
/// bytes written), and the reader's request that the work stop early (an interrupted build: the adder checks
/// ``stopRequested`` where it adds). Adders batch (every thousand devices, every chunk), so the lock is taken
/// rarely.
public final class ProgressCounter: @unchecked Sendable {
    // @unchecked: `count` and `stopping` are touched only under `lock`.
    private let lock = Lock()
    private var count = 0
    private var stopping = false

    public init() {}

    public func add(_ n: Int) { lock.withLock { count += n } }

    public var value: Int { lock.withLock { count } }

    /// Asks the work counted here to stop early (it may be checked from any thread).
    public func requestStop() { lock.withLock { stopping = true } }

    /// Whether ``requestStop()`` was called.
    public var stopRequested: Bool { lock.withLock { stopping } }
}
