import FanoutAPNs
import FanoutMetrics
import FanoutWire
import UVLoop

// `--faults` and `--latency` on one loop (docs/INGEST.md §3, *Fault injection*): a fault drawn per request before
// it is judged (503, 429, 500 answered as APNs answers them, or RST_STREAM), answers held until due on one uv timer
// armed for the earliest, stall windows, a GOAWAY to every connection every so often. Nothing here runs unless
// `drawsFaults` / `holdsAnswers` / a `goaway-every`.
extension APNsServer {
    /// The clock of held answers and stall windows.
    var nowNanos: UInt64 { fixedNowNanos ?? EventLoop.hrtimeNanos }

    /// A token push's or broadcast's identity (its token or channel and `aps.timestamp`) and attempt (how many times
    /// it arrived before, on any loop): what its fault and latency draws are keyed by; nil for other requests.
    func drawIdentity(_ r: RequestInput) -> (key: UInt64, attempt: UInt64)? {
        guard let key = ServeFaults.identity(r, tape: &faultTape) else { return nil }
        return (key, faultAttempts.next(key))
    }

    /// This request's fault, if any: drawn from the seed by its identity and attempt, else the loop's next draw.
    func drawFault(_ identity: (key: UInt64, attempt: UInt64)?) -> ServeFaults.Fault? {
        if let identity { return faults.fault(forDraw: faults.faultDraw(key: identity.key, attempt: identity.attempt)) }
        faultDraws += 1
        return faults.fault(forDraw: faults.faultDraw(loop: index, draw: faultDraws))
    }

    /// A token push or a broadcast: did it come back after a refusal (`RetryLedger`)? Is it refused now?
    func trackRetry(_ fault: ServeFaults.Fault?, _ r: RequestInput) {
        retries.track(r, refusedAs: fault.map(Self.retryKind), nowNanos: nowNanos)
    }

    /// A refusing fault as an index of `RetryCounts.kinds`.
    static func retryKind(_ fault: ServeFaults.Fault) -> Int {
        switch fault {
        case .answer(.serviceUnavailable): 0
        case .answer(.tooManyRequests): 1
        case .answer: 2
        case .reset: 3
        }
    }

    /// Answers a request with its fault instead of the service's judgement (nothing is applied), or resets it.
    func inject(
        _ fault: ServeFaults.Fault, _ connection: H2ServerConnection, _ request: H2Request, _ input: RequestInput
    ) {
        switch fault {
        case .reset:
            connectionStats.faults[.reset] += 1
            connection.reset(request, code: .internalError)
        case .answer(let reason):
            switch reason {
            case .serviceUnavailable: connectionStats.faults[.serviceUnavailable] += 1
            case .tooManyRequests: connectionStats.faults[.tooManyRequests] += 1
            default: connectionStats.faults[.internalServerError] += 1
            }
            answer(connection, request, service.injectedAnswer(reason, input))
        }
    }

    /// Holds an answer until it is due: after its drawn latency, and past the end of a stall window it falls in.
    /// False when it is due now (or the server is stopping, or the loop already holds `maxOpenStreamsPerLoop`
    /// answers: counted in `heldOverflow`): then it is sent at once.
    func hold(_ connection: H2ServerConnection, _ request: H2Request, _ response: APNsAnswer, record: Bool) -> Bool {
        guard stoppingSinceNanos == nil else { return false }
        let now = nowNanos
        // Keyed by the request's identity and attempt (`drawKey`) when it has one, else the loop's next draw.
        let delay: UInt64
        if request.drawKey != 0 {
            delay = faults.delayNanos(key: request.drawKey)
        } else {
            latencyDraws += 1
            delay = faults.delayNanos(loop: index, draw: latencyDraws)
        }
        var due = now &+ delay
        var stalled = false
        if let end = faults.stallEnd(elapsedNanos: due &- startNanos) {
            due = startNanos &+ end
            stalled = true
        }
        guard due > now else { return false }
        guard held.count < options.maxOpenStreamsPerLoop else {
            connectionStats.faults[.heldOverflow] += 1
            return false
        }
        if stalled { connectionStats.faults[.stalled] += 1 }
        let earliest = held.earliestDueNanos.map { due < $0 } ?? true
        // Not reused for another stream while held (its stream may be reset meanwhile); released when sent.
        request.retained = true
        held.push(dueNanos: due, connection: connection, request: request, response: response, record: record)
        connectionStats.faults[.held] += 1
        connectionStats.faults.heldNanos.record(min(due - now, HdrLayout.highestTrackableValue))
        connectionStats.faults[.heldPeak] = max(connectionStats.faults[.heldPeak], held.count)
        if earliest { armHoldTimer(now: now) }
        return true
    }

    /// Sends every held answer that is due, and arms the timer for the next one.
    func releaseDueAnswers() {
        let now = nowNanos
        while let entry = held.popDue(nowNanos: now) { send(entry) }
        armHoldTimer(now: now)
    }

    private func send(_ entry: HeldAnswers.Entry) {
        entry.request.retained = false  // its stream closes after this answer (or has): reusable again
        entry.connection.respond(to: entry.request, with: entry.response)
        if entry.record { service.recordService(max(EventLoop.hrtimeNanos &- entry.request.completeNanos, 1)) }
    }

    private func armHoldTimer(now: UInt64) {
        guard fixedNowNanos == nil, let due = held.earliestDueNanos else { return }
        let timer: UVLoop.Timer
        if let existing = holdTimer {
            timer = existing
        } else {
            timer = UVLoop.Timer(loop: loop) { [unowned self] _ in self.releaseDueAnswers() }
            holdTimer = timer
        }
        // Whole milliseconds (libuv's timers), rounded up: an answer is never sent before it is due.
        let wait = due > now ? due - now : 0
        timer.start(afterMillis: max(1, (wait + 999_999) / 1_000_000))
    }

    /// `goaway-every`: a repeating timer from when serving starts.
    func startGoAwayTimer() {
        guard faults.goAwayEveryNanos > 0, goAwayTimer == nil else { return }
        let timer = UVLoop.Timer(loop: loop) { [unowned self] _ in self.goAwayTick() }
        let millis = max(1, faults.goAwayEveryNanos / 1_000_000)
        timer.start(afterMillis: millis, repeatMillis: millis)
        goAwayTimer = timer
    }

    /// Every connection open (past its preface) and not already going away gets a graceful GOAWAY, as APNs sends
    /// when it retires a connection: `{"reason":"Shutdown"}`, NO_ERROR; its open streams are answered, then it
    /// closes.
    func goAwayTick() {
        for c in Array(connections.values) where c.prefaceReceived && !c.goingAway {
            connectionStats.faults[.goAway] += 1
            c.goAway(reason: "Shutdown", endReason: ServeFaults.goAwayEndReason)
        }
    }

    /// At shutdown: every held answer goes now, and the fault timers close.
    func stopFaults() {
        // One at a time: a connection that ends meanwhile takes its other held answers out (counted dropped).
        while let entry = held.popDue(nowNanos: .max) { send(entry) }
        holdTimer?.close()
        holdTimer = nil
        goAwayTimer?.close()
        goAwayTimer = nil
    }
}

extension ServeFaults {
    /// How a connection retired by `goaway-every` is counted in `connections.endReasons`.
    public static let goAwayEndReason = "GOAWAY Shutdown (fault: goaway-every)"
}
