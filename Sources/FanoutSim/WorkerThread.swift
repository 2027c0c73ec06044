import FanoutMetrics
import UVLoop

/// The body of a worker thread: populate, wait at the start gate, run the events from the feed on the
/// worker's own event loop, close the loop, hand over the result. Whatever happens, the thread posts
/// exactly one of finished, failed or stopped, and signals `exited` last.
enum WorkerThread {
    struct InjectedFault: Error, CustomStringConvertible {
        var description: String
    }

    static func main(index: Int, shared: WorkerShared) {
        defer { shared.exited.signal() }
        do {
            if let result = try runWorker(index: index, shared: shared) {
                shared.mailbox.post(.finished(worker: index, result: result))
            } else {
                shared.mailbox.post(.stopped(worker: index))
            }
        } catch {
            shared.mailbox.post(.failed(worker: index, message: "worker \(index): \(error)"))
        }
    }

    /// The worker's result, or nil when the run was stopped (another worker failed).
    static func runWorker(index: Int, shared: WorkerShared) throws -> WorkerResult? {
        let world = shared.world
        let scenario = world.scenario
        if shared.fault == .failBeforeReady(worker: index) {
            throw InjectedFault(description: "injected failure before ready")
        }
        let loop = try EventLoop()
        // Populate before the start gate so that the clock starts with every worker ready.
        let engine = WorkerEngine(
            world: world, index: index, count: shared.workers, hrtime: { EventLoop.hrtimeNanos })
        shared.mailbox.post(.ready(worker: index, activities: engine.activityCount))
        shared.gate.wait()
        if shared.stop.isSet {
            try loop.close()
            return nil
        }
        let startNanos = shared.start.value
        if scenario.clock == .real { engine.startRealClock(atHrtime: startNanos) }
        let slicing = scenario.sliceBroadcasts
        var cursor = FeedCursor(feed: shared.feed)
        var lastProgress = EventLoop.hrtimeNanos
        var stopped = false
        loop.updateTime()
        let loopStartMillis = loop.nowMillis &- (EventLoop.hrtimeNanos &- startNanos) / 1_000_000
        func publishIfDue() {
            let now = EventLoop.hrtimeNanos
            if now &- lastProgress >= 1_000_000_000 {
                lastProgress = now
                shared.mailbox.post(.progress(worker: index, sample: engine.takeSample()))
            }
        }
        let body = Timer(loop: loop) { t in
            if shared.stop.isSet {
                stopped = true
                t.close()
                return
            }
            switch scenario.clock {
            case .real:
                // Run everything already due. libuv timers have 1 ms granularity, so the timer is
                // armed 1 ms early and the last stretch is spun on the monotonic clock: events start
                // at their instant, not up to a millisecond late. With `sliceBroadcasts` a large
                // broadcast stops between groups once the next event is due (the engine's slices);
                // due events go first, the rest of the broadcast runs when nothing is due. After 10 ms
                // of continuous work the loop gets control back, however far behind schedule the worker
                // is (progress samples still go out).
                let sliceEnd = EventLoop.hrtimeNanos &+ 10_000_000
                while EventLoop.hrtimeNanos < sliceEnd {
                    let now = EventLoop.hrtimeNanos &- startNanos
                    let next = cursor.peek()
                    if let (batch, k) = next, batch.events[k].intendedNanos <= now {
                        cursor.advance()
                        if slicing {
                            let following = cursor.peek()
                            engine.yieldAtNanos = following.map { $0.batch.events[$0.k].intendedNanos } ?? .max
                            engine.yieldForSource = following.map { $0.batch.events[$0.k].source } ?? -1
                        }
                        engine.process(batch, k)
                    } else if engine.hasPendingSlices {
                        engine.yieldAtNanos = next.map { $0.batch.events[$0.k].intendedNanos } ?? .max
                        engine.yieldForSource = next.map { $0.batch.events[$0.k].source } ?? -1
                        engine.runSlice()
                    } else if let (batch, k) = next, batch.events[k].intendedNanos - now <= 1_000_000 {
                        while EventLoop.hrtimeNanos &- startNanos < batch.events[k].intendedNanos {}
                    } else {
                        break
                    }
                }
                publishIfDue()
                if engine.hasPendingSlices {
                    t.start(afterMillis: 0)
                } else if let (batch, k) = cursor.peek() {
                    let deadline = batch.events[k].intendedNanos / 1_000_000
                    loop.updateTime()  // the cached loop time is as old as this callback
                    t.start(atLoopMillis: loopStartMillis + (deadline > 0 ? deadline - 1 : 0))
                } else {
                    t.close()
                }
            case .virtual:
                // As fast as the CPU allows, in slices of about 10 ms so the loop stays responsive.
                let sliceEnd = EventLoop.hrtimeNanos &+ 10_000_000
                var more = true
                while true {
                    guard let (batch, k) = cursor.peek() else {
                        more = false
                        break
                    }
                    cursor.advance()
                    engine.process(batch, k)
                    if EventLoop.hrtimeNanos >= sliceEnd { break }
                }
                publishIfDue()
                if more { t.start(afterMillis: 0) } else { t.close() }
            }
        }
        body.start(afterMillis: 0)
        _ = loop.run()
        if shared.fault == .failAtShutdown(worker: index) {
            try loop.close()
            throw InjectedFault(description: "injected failure at shutdown")
        }
        try loop.close()
        if stopped { return nil }
        var result = engine.result()
        if shared.keepState { result.finalState = FinalState(pipeline: engine.pipeline) }
        return result
    }
}
