import FanoutCore
import FanoutMetrics

/// Large broadcasts applied in slices (`sliceBroadcasts`): a fan-out yields between batches once another
/// source's event is due and resumes when nothing is; a newer event of the same source finishes them first.
extension WorkerEngine {
    /// A broadcast is waiting to reach the rest of its subscribers.
    public var hasPendingSlices: Bool { sliceHead < slices.count }

    /// Continues the oldest interrupted broadcast (it may yield again at `yieldAtNanos`).
    public func runSlice() {
        guard hasPendingSlices else { return }
        if !virtual { advanceInterval(to: Int(realNow() / WorkerEngine.realIntervalNanos)) }
        resume(sliceHead, yieldAt: yieldAtNanos)
        dropFinishedSlices()
    }

    /// Completes every pending slice of `source`, oldest first.
    func finishSlices(of source: Int) {
        var k = sliceHead
        while k < slices.count && slicesPerSource[source] > 0 {
            if !slices[k].done && slices[k].event.source == source { resume(k, yieldAt: .max) }
            k += 1
        }
        dropFinishedSlices()
    }

    func dropFinishedSlices() {
        while sliceHead < slices.count && slices[sliceHead].done { sliceHead += 1 }
        if sliceHead == slices.count {
            slices.removeAll(keepingCapacity: true)
            sliceBytes.removeAll(keepingCapacity: true)
            sliceHead = 0
        }
    }

    func resume(_ k: Int, yieldAt: UInt64) {
        let slice = slices[k]
        let start = Int(slice.payloadStart)
        let end = start + Int(slice.payloadCount)
        let app = world.sourceApp[slice.event.source]
        var next = Int(slice.next)
        sliceBytes.withUnsafeBytes { bytes in
            pushType.withUnsafeBytes { pt in
                topics[app].withUnsafeBytes { tp in
                    let headers = PushHeaders(
                        pushType: .string(pt), topic: .string(tp),
                        priority: .integer(slice.priority), expiration: .integer(0))
                    let payload = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
                    let flight = pipeline.resume(
                        kind: .channel, resolution: .channel(slice.channel), headers: headers, payload: payload)
                    next = applySubscribers(
                        slice.event, flight, payload: payload, channel: slice.channel, from: next, yieldAt: yieldAt)
                }
            }
        }
        slices[k].next = Int32(next)
        if next >= pipeline.router.subscribers[Int(slice.channel)].count {
            slices[k].done = true
            slicesPerSource[slice.event.source] -= 1
        }
    }
}
