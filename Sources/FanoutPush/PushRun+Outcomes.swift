import FanoutMetrics
import FanoutWire
import UVLoop

/// A request's life in push's histograms, every request recorded once (into the second's histograms; the run's are
/// the sum of its seconds): `dispatchLag` when the generator hands it to a connection, then `streamWait`,
/// `scheduleLag`, `latency` and (answered) `answeredLatency` when it ends — answered, failed, or unanswered at the
/// end (censored at the run's end). `latency`'s count is the requests sent.
extension PushRun {
    func send(_ request: consuming H2ClientRequest, group: Int) {
        results.sent += 1
        inFlight += 1
        let now = EventLoop.hrtimeNanos
        request.handedNanos = now
        // The generator's own lateness: intended time → handed to a connection.
        secondDispatch.record(PushRun.span(from: UInt64(truncatingIfNeeded: request.tag), to: now))
        route(request, group: group)
    }

    /// `to − from`, 0 when `to` is earlier, at most the histograms' highest trackable value.
    @inline(__always)
    static func span(from: UInt64, to: UInt64) -> UInt64 {
        min(to > from ? to - from : 0, HdrLayout.highestTrackableValue)
    }

    /// `n` requests due at `due` that could not be made (a provider token that could not be signed): counted sent
    /// and failed (sent = answered + failed + unanswered), their latency now.
    func failUnsent(_ n: Int, _ reason: String, due: UInt64) {
        results.sent += n
        results.failures[reason, default: 0] += n
        secondLatency.record(PushRun.span(from: due, to: EventLoop.hrtimeNanos), count: UInt64(n))
    }

    /// A request that ends without having been submitted by a connection (no connection for it, or still waiting for
    /// one at the end): its wait and latency until now. `failure` nil: unanswered at the end.
    func endUnrouted(tag: Int, handedNanos: UInt64, failure: String?) {
        inFlight -= 1
        let now = EventLoop.hrtimeNanos
        secondWait.record(PushRun.span(from: handedNanos, to: now))
        secondLatency.record(PushRun.span(from: UInt64(truncatingIfNeeded: tag), to: now))
        if let failure {
            results.failures[failure, default: 0] += 1
        } else {
            results.unansweredAtEnd += 1
            results.queuedAtEnd += 1
        }
    }

    // MARK: Outcomes

    func completed(_ connection: H2ClientConnection, _ response: H2ClientResponse) {
        if let request = response.unprocessed, !ending, !finished {
            // Not processed by the server (never sent, refused by a GOAWAY or REFUSED_STREAM): sent again, to a
            // ready connection or held for the one opened next.
            results.retries += 1
            route(request, group: groupOf[ObjectIdentifier(connection)] ?? 0)
            return
        }
        inFlight -= 1
        let due = UInt64(truncatingIfNeeded: response.tag)
        // Into the second's histograms only: the run's totals are the sum of its seconds (`closeSecond`).
        if response.submittedNanos > 0 {
            results.submitted += 1
            secondLag.record(PushRun.span(from: due, to: response.submittedNanos))
        }
        // The server's back-pressure: handed to a connection → submitted (never submitted: until its end).
        let waited = response.submittedNanos > 0 ? response.submittedNanos : response.endNanos
        secondWait.record(PushRun.span(from: response.handedNanos, to: waited))
        // Every request's end, failures and the unanswered included (fail closed).
        let latency = PushRun.span(from: due, to: response.endNanos)
        secondLatency.record(latency)
        if let failure = response.failure {
            if ending && (failure == .connectionEnded || failure == .streamIdsExhausted) {
                results.unansweredAtEnd += 1
                if response.submittedNanos == 0 { results.queuedAtEnd += 1 }
            } else {
                results.failures[PushRun.failureKey(failure), default: 0] += 1
            }
        } else {
            if response.status >= 0 && response.status < statusCounts.count {
                statusCounts[response.status] += 1
            } else {
                results.byStatus[response.status, default: 0] += 1
            }
            if !response.body.isEmpty { results.byReason[PushRun.reasonKey(response.body), default: 0] += 1 }
            secondAnswered.record(latency)
        }
        finishIfDone()
    }

    func finishIfDone() {
        guard scheduleDone, !finished, inFlight == 0 else { return }
        stop()
    }

    /// Closes every connection (what is open or queued fails: unanswered at the end when `ending`) and timer.
    func stop() {
        guard !finished else { return }
        finished = true
        if started {
            let elapsed = EventLoop.hrtimeNanos - t0Nanos
            results.elapsedSeconds = Double(elapsed) / 1e9
            if !scheduleDone { results.scheduleSeconds = results.elapsedSeconds }
            if let loop, elapsed > 0 {
                let idle = loop.idleNanos &- idleAtT0Nanos
                results.loopBusyShare = max(0, min(1, 1 - Double(idle) / Double(elapsed)))
            }
        }
        ending = ending || !scheduleDone
        // Waiting for a connection that will not come: unanswered at the end, never sent (censored at the end).
        let waiting = orphans[orphanHead...]
        orphans = []
        orphanHead = 0
        for case let (request, _)? in waiting {
            endUnrouted(tag: request.tag, handedNanos: request.handedNanos, failure: nil)
        }
        for k in slots.indices {
            slots[k].retry?.close()
            slots[k].retry = nil
        }
        sweepTimer?.close()
        sweepTimer = nil
        for c in connections { c.close(reason: ending ? "closed at the end of the run" : "run complete") }
        if started {
            closeSecond(final: true)
        } else {
            foldSecond()
        }
        timer?.close()
        timer = nil
        secondTimer?.close()
        secondTimer = nil
        deadline?.close()
        deadline = nil
        barrierTimer?.close()
        barrierTimer = nil
        for s in signals { s.close() }
        signals = []
        feed?.cancel()
    }

    func foldStatuses() {
        for status in statusCounts.indices where statusCounts[status] > 0 {
            results.byStatus[status, default: 0] += statusCounts[status]
            statusCounts[status] = 0
        }
    }

    /// The second's histograms, in ``PushIntervalSpool/tags``' order.
    var secondHistograms: [LatencyHistogram] {
        [secondLatency, secondLag, secondAnswered, secondDispatch, secondWait]
    }

    /// The second's histograms are added into the run's totals and emptied (every sample counted once, there).
    func foldSecond() {
        results.latency.add(secondLatency)
        results.answeredLatency.add(secondAnswered)
        results.scheduleLag.add(secondLag)
        results.dispatchLag.add(secondDispatch)
        results.streamWait.add(secondWait)
        secondLatency.reset()
        secondAnswered.reset()
        secondLag.reset()
        secondDispatch.reset()
        secondWait.reset()
    }

    /// Second k (t0 + k s … t0 + (k + 1) s; the last one ends with the run) goes to the log; the progress line.
    func closeSecond(final: Bool = false) {
        foldStatuses()
        let now = EventLoop.hrtimeNanos
        let startNanos = UInt64(seconds) * 1_000_000_000
        let lengthNanos = now > t0Nanos &+ startNanos ? now - (t0Nanos &+ startNanos) : 0
        for (tag, h) in secondHistograms.enumerated() where !h.isEmpty || !final {
            do {
                try results.spooled?.append(
                    tag: tag, index: seconds, startNanos: startNanos, lengthNanos: lengthNanos, histogram: h)
            } catch {
                spoolError = spoolError ?? error
                break
            }
        }
        if spoolError != nil && !final { return stop() }  // stop() closes the second itself (final)
        seconds += 1
        progress?(PushProgress(
            seconds: seconds, sent: results.sent, answered: results.answered, inFlight: inFlight,
            queued: connections.reduce(heldRequests) { $0 + $1.queuedRequests },
            latencyP99Nanos: secondLatency.valueAtPercentile(99), scheduleLagP99Nanos: secondLag.valueAtPercentile(99),
            dispatchLagP99Nanos: secondDispatch.valueAtPercentile(99),
            streamWaitP99Nanos: secondWait.valueAtPercentile(99)))
        foldSecond()
    }
}
