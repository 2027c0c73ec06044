import FanoutHistogramLog
import FanoutMetrics

/// What a worker hands to the coordinator: progress samples once a second with the intervals and
/// event completions that can no longer change, and the rest at the end.
extension WorkerEngine {
    /// Cumulative counts, the end-to-end histogram since the previous sample (then reset) and what
    /// `takeFinished` hands over.
    public func takeSample() -> ProgressSample {
        let finished = takeFinished()
        let sample = ProgressSample(
            accounting: pipeline.accounting, interval: HistogramCodec.encode(interval),
            eventsProcessed: eventsProcessed,
            intervalIndex: currentInterval, intervals: finished.intervals, completions: finished.completions)
        interval.reset()
        return sample
    }

    /// Folds the current interval into the run's totals and keeps its compressed encoding.
    func finishInterval() {
        for metric in Metric.allCases where current[metric].totalCount > 0 {
            encodedIntervals.append(
                EncodedInterval(
                    index: currentInterval, metric: metric, bytes: HistogramCodec.encodeCompressed(current[metric])))
        }
        recorder.add(current)
        current.reset()
    }

    /// Everything measured and not yet handed over, for the coordinator to merge: the last
    /// intervals and the completion of every remaining event (pushes still held for offline devices
    /// at the end never complete).
    public func result() -> WorkerResult {
        finishInterval()
        var result = WorkerResult(
            accounting: pipeline.accounting, recorder: recorder,
            completions: takeCompletions(upTo: completionBase + local.count), activities: activityCount,
            eventsProcessed: eventsProcessed, intervals: encodedIntervals, intervalNanos: intervalNanos)
        encodedIntervals = []
        result.slicedFanouts = slicedFanouts
        return result
    }

    /// Hands over what can no longer change: the finished intervals, and the completion of the events
    /// no held push or unfinished broadcast slice refers to. The worker then forgets them, so its
    /// memory follows the offline window and the slices, not the length of the run.
    public func takeFinished() -> (intervals: [EncodedInterval], completions: CompletionChunk) {
        let intervals = encodedIntervals
        encodedIntervals = []
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
