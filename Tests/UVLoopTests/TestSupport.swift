import Foundation
import Testing
import UVLoop

/// Runs `body` with a fresh loop of its own (tests run in parallel, so nothing here looks at
/// process-wide counts), then closes the loop and checks the lifecycle contract: `uv_loop_close`
/// returned 0, no handle is open, no `Timer`/`Wakeup` of this loop is alive, and the loop object
/// itself has been freed (nothing retains it any more).
func withLoop(
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (EventLoop) throws -> Void
) throws {
    weak var weakLoop: EventLoop?
    do {
        let loop = try EventLoop()
        weakLoop = loop
        try body(loop)
        try loop.close()
        #expect(loop.isClosed, sourceLocation: sourceLocation)
        #expect(loop.openHandles == 0, sourceLocation: sourceLocation)
        #expect(loop.closingHandles == 0, sourceLocation: sourceLocation)
        #expect(loop.liveHandleOwners == 0, sourceLocation: sourceLocation)
    }
    #expect(weakLoop == nil, "the loop outlived its test", sourceLocation: sourceLocation)
}

/// A value shared between a test thread and a producer thread.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Starts `body` on a new thread; the returned semaphore is signalled when it finishes.
func spawnThread(_ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        body()
        done.signal()
    }
    thread.start()
    return done
}
