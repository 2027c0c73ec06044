import FanoutMetrics

/// What a worker hands to the coordinator: progress samples once a second with the intervals and
/// event completions that can no longer change, and the rest at the end.
extension WorkerEngine {
    /// Cumulative counts and what `takeFinished` hands over.
    public func takeSample() -> ProgressSample {
        let finished = takeFinished()
        return ProgressSample(
            accounting: pipeline.accounting, eventsProcessed: eventsProcessed, intervalIndex: currentInterval,
            intervals: finished.intervals, completions: finished.completions)
    }

    /// Hands the current interval's histograms over (the recorder starts the next one empty).
    func finishInterval() {
        guard !recorder.isEmpty else { return }
        finishedIntervals.append(WorkerInterval(index: currentInterval, histograms: recorder.takeInterval()))
    }

    /// Everything measured and not yet handed over, for the coordinator to merge: the last
    /// intervals and the completion of every remaining event (pushes still held for offline devices
    /// at the end never complete).
    public func result() -> WorkerResult {
        finishInterval()
        var result = WorkerResult(
            accounting: pipeline.accounting,
            completions: takeCompletions(upTo: completionBase + local.count), activities: activityCount,
            eventsProcessed: eventsProcessed, intervals: finishedIntervals, intervalNanos: intervalNanos)
        finishedIntervals = []
        result.slicedFanouts = slicedFanouts
        result.eventsSkipped = eventsSkipped
        result.clockReads = clockReads
        return result
    }

    /// Hands over what can no longer change: the finished intervals, and the completion of the events
    /// no held push or unfinished broadcast slice refers to. The worker then forgets them, so its
    /// memory follows the offline window and the slices, not the length of the run.
    public func takeFinished() -> (intervals: [WorkerInterval], completions: CompletionChunk) {
        let intervals = finishedIntervals
        finishedIntervals = []
        return (intervals, takeCompletions(upTo: completionFrontier()))
    }

    /// The first event whose local completion may still change.
    func completionFrontier() -> Int {
        var frontier = completionBase + local.count
        for h in held where !h.superseded { frontier = min(frontier, Int(h.event)) }
        var k = sliceHead
        while k < slices.count {
            if !slices[k].done { frontier = min(frontier, slices[k].event.index) }
            k += 1
        }
        return frontier
    }

    private func takeCompletions(upTo end: Int) -> CompletionChunk {
        let n = max(0, end - completionBase)
        let chunk = CompletionChunk(base: completionBase, events: local.prefix(n))
        local.removeFirst(n)
        completionBase += n
        return chunk
    }
}
