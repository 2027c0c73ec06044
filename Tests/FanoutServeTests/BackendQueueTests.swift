import Testing

@testable import FanoutServe

@Suite("BackendQueue (the FIFO of BackendSender: requests due while every slot is busy)")
struct BackendQueueTests {
    @Test("a queue that never empties is compacted: its storage stays within twice what waits, order is kept")
    func compactedUnderSteadyBacklog() {
        // A backend slower than the schedule: 3 arrive for every 2 sent, so the queue never empties and only
        // compaction reclaims the sent head (the registrar's queue, before BackendSender, grew to every request).
        var queue = BackendQueue<Int>(compactAfter: 64)
        var next = 0
        var expected = 0
        var peakStorage = 0
        for _ in 0..<20_000 {
            for _ in 0..<3 {
                queue.append(next)
                next += 1
            }
            for _ in 0..<2 {
                #expect(queue.popFirst() == expected)
                expected += 1
            }
            peakStorage = max(peakStorage, queue.storageCount)
            // The taken head held is at most what waits, or at most the threshold.
            #expect(queue.storageCount <= queue.count + max(queue.count, 64))
        }
        #expect(queue.count == 20_000)
        #expect(peakStorage <= 2 * 20_000)
        // 40,000 sent: without compaction the storage would hold all 60,000.
        #expect(queue.storageCount < 60_000)
        #expect(queue.removeAll() == 20_000)
        #expect(queue.isEmpty && queue.storageCount == 0 && queue.popFirst() == nil)
    }

    @Test("the default threshold: a long backlog drained to a few is compacted; drained to none, emptied")
    func defaultThreshold() {
        var queue = BackendQueue<Int>()
        for k in 0..<10_000 { queue.append(k) }
        for k in 0..<9_990 { #expect(queue.popFirst() == k) }
        #expect(queue.count == 10)
        #expect(queue.storageCount < 5_000)
        for k in 9_990..<10_000 { #expect(queue.popFirst() == k) }
        #expect(queue.isEmpty && queue.storageCount == 0)
    }
}
