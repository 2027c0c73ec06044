import FanoutCore
import Foundation
import Testing

@Suite struct LockTests {
    /// Four threads add 100,000 each to one counter under the lock: no increment is lost (without the lock,
    /// the read-modify-write races and TSan reports it).
    @Test func excludesConcurrentWriters() {
        final class Counter: @unchecked Sendable {
            let lock = Lock()
            var value = 0
        }
        let counter = Counter()
        let group = DispatchGroup()
        for _ in 0..<4 {
            DispatchQueue.global().async(group: group) {
                for _ in 0..<100_000 { counter.lock.withLock { counter.value += 1 } }
            }
        }
        group.wait()
        #expect(counter.lock.withLock { counter.value } == 400_000)
    }

    /// `lock()`/`unlock()` pair as `withLock` does; `withLock` releases when its body throws.
    @Test func releasesOnThrow() {
        struct Boom: Error {}
        let lock = Lock()
        #expect(throws: Boom.self) { try lock.withLock { throw Boom() } }
        lock.lock()
        lock.unlock()
        #expect(lock.withLock { 7 } == 7)
    }
}
