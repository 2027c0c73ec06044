import Foundation
import Testing
import UVLoop

@Suite("UVLoop Wakeup")
struct WakeupTests {
    @Test func sendsBeforeTheLoopRunsCoalesceIntoOneCallback() throws {
        try withLoop { loop in
            var callbacks = 0
            let wakeup = try Wakeup(loop: loop) { _ in callbacks += 1 }
            for _ in 0..<100 {
                #expect(wakeup.send())
            }
            loop.runOnce()
            #expect(callbacks == 1)
            wakeup.close()
        }
    }

    /// The worker pattern: a producer thread queues items and sends; the callback, on the loop
    /// thread, drains the queue. Sends coalesce, nothing is lost.
    @Test func drainsEverythingAnotherThreadQueued() throws {
        let itemCount = 20_000
        try withLoop { loop in
            let queue = Locked<[Int]>([])
            let loopThread = pthread_self()
            var received: [Int] = []
            var callbacks = 0
            var offThread = 0
            let wakeup = try Wakeup(loop: loop) { wakeup in
                callbacks += 1
                if pthread_equal(pthread_self(), loopThread) == 0 {
                    offThread += 1
                }
                received += queue.withLock { items in
                    defer { items.removeAll(keepingCapacity: true) }
                    return items
                }
                if received.count == itemCount {
                    wakeup.close()
                }
            }
            let sender = wakeup.sender
            let producerDone = spawnThread {
                for item in 0..<itemCount {
                    queue.withLock { $0.append(item) }
                    sender.send()
                }
            }
            loop.run()
            producerDone.wait()
            #expect(received == Array(0..<itemCount))
            #expect(callbacks >= 1 && callbacks <= itemCount)
            #expect(offThread == 0)
            #expect(wakeup.isClosed)
        }
    }

    @Test func sendAfterCloseReturnsFalse() throws {
        try withLoop { loop in
            let wakeup = try Wakeup(loop: loop) { _ in Issue.record("closed wakeup fired") }
            #expect(wakeup.send())
            wakeup.close()
            #expect(wakeup.send() == false)
            #expect(wakeup.sender.send() == false)
            loop.run()
        }
    }

    /// `close()` races with a thread that keeps sending: the sender's lock makes every send either
    /// reach the open handle or return false, never touch a closing one.
    @Test func closingWhileAnotherThreadSendsIsSafe() throws {
        try withLoop { loop in
            let sends = Locked(0)
            var callbacks = 0
            let wakeup = try Wakeup(loop: loop) { wakeup in
                callbacks += 1
                if callbacks == 50 {
                    wakeup.close()
                }
            }
            let sender = wakeup.sender
            let producerDone = spawnThread {
                while sender.send() {
                    sends.withLock { $0 += 1 }
                }
            }
            loop.run()
            producerDone.wait()
            #expect(callbacks == 50)
            #expect(sends.withLock { $0 } >= 50)
        }
    }

    /// Shutting a worker down from outside: the wakeup's callback closes the worker's handles,
    /// so `run()` returns.
    @Test func anotherThreadStopsAWorkerLoop() throws {
        try withLoop { loop in
            var ticks = 0
            let ticker = Timer(loop: loop) { _ in ticks += 1 }
            ticker.start(afterMillis: 1, repeatMillis: 1)
            let stopRequest = try Wakeup(loop: loop) { wakeup in
                ticker.close()
                wakeup.close()
            }
            let sender = stopRequest.sender
            let requesterDone = spawnThread {
                Thread.sleep(forTimeInterval: 0.02)
                sender.send()
            }
            #expect(loop.run() == false)
            requesterDone.wait()
            #expect(ticker.isClosed && stopRequest.isClosed)
        }
    }

    @Test func theSenderMayOutliveItsWakeup() throws {
        var sender: Wakeup.Sender?
        try withLoop { loop in
            let wakeup = try Wakeup(loop: loop) { _ in }
            sender = wakeup.sender
            wakeup.close()
        }
        #expect(sender?.send() == false)
    }
}
