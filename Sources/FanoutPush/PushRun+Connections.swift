import FanoutWire
import UVLoop

/// One of the `--connections` places of a target: the connection serving it (or being opened for it), and its
/// reconnect state. A connection that drains (a GOAWAY, its stream ids) or ends leaves its slot, and a replacement
/// is opened: at once after a connection that was answered, after a backoff (exponential, with jitter) after one
/// that never was (a failed attempt), until the slot has been without a ready connection for the reconnect budget
/// (then it gives up).
struct ConnectionSlot {
    var group: Int
    /// The slot's connection, connecting or ready (nil while it waits to reconnect, or gave up).
    var live: H2ClientConnection?
    /// Connections that failed (never answered) since the slot last had one answered: the backoff's exponent.
    var failures = 0
    /// Since when the slot has had no ready connection (0: it has one, or had no outage yet).
    var outageSinceNanos: UInt64 = 0
    /// The backoff's timer while one runs.
    var retry: UVLoop.Timer?
    /// The reconnect budget (or `--reconnects`) ran out: no connection is opened for it any more.
    var gaveUp = false

    init(group: Int) { self.group = group }
}

// The connections' lives during a run: ready, draining, closed; their replacements; the deadlines' sweep.
extension PushRun {
    /// Whether a request for target `group` can still get a connection: one of its slots has not given up.
    func mayConnect(group: Int) -> Bool {
        slots.contains { !$0.gaveUp && (connectTo.count == 1 || $0.group == group) }
    }

    /// Whether a connection may still be opened in place of one that ended (work is left, `--reconnects` not spent).
    var mayReconnect: Bool { reconnectsLeft > 0 && !ending && !finished && (!scheduleDone || inFlight > 0) }

    func connectionReady(_ connection: H2ClientConnection) {
        if !connected {
            readyAtStart += 1
            if readyAtStart == slots.count { ready() }
            return
        }
        guard let k = slotOf[ObjectIdentifier(connection)], slots[k].live === connection else { return }
        // The outage is over (the budget's clock stops); the backoff's exponent goes back to 0 only once a
        // connection was answered (``replaceAfter(_:_:)``): a server that accepts and then closes or goes away at
        // once is not reconnected to in a loop.
        slots[k].outageSinceNanos = 0
        releaseOrphans()
    }

    /// A GOAWAY, or the stream ids near their end: the connection finishes what it has open, and its slot gets a
    /// replacement now (its queue comes back as unprocessed requests, routed to the others or held for it).
    func connectionDraining(_ connection: H2ClientConnection) {
        guard connected, !finished, let k = slotOf[ObjectIdentifier(connection)], slots[k].live === connection else {
            return
        }
        slots[k].live = nil
        results.connectionsDrained += 1
        if connection.streamIdsExhausted { results.drainedForStreamIds += 1 }
        replaceAfter(connection, k)
    }

    /// Slot `k`'s replacement for `connection`, which drains or ended: at once when it was answered (the backoff
    /// starts again from 0), after the backoff when it never was (it failed to connect, or the server went away
    /// before answering anything).
    func replaceAfter(_ connection: H2ClientConnection, _ k: Int) {
        let answered = connection.responsesReceived > 0
        if answered { slots[k].failures = 0 }
        replace(k, afterFailure: !answered)
    }

    func connectionClosed(_ connection: H2ClientConnection) {
        results.connectionEnds[connection.endReason ?? "closed", default: 0] += 1
        if !started && !finished {
            let target = options.targets[groupOf[ObjectIdentifier(connection)] ?? 0]
            startError = "connection to \(target) failed: \(connection.endReason ?? "closed")"
            stop()
            return
        }
        guard !finished, let index = connections.firstIndex(where: { $0 === connection }) else {
            finishIfDone()
            return
        }
        // What it had open has failed already (counted), what it had queued came back (unprocessed) and went to
        // the others or waits for a ready connection.
        retired.append(connection)
        connections.remove(at: index)
        if let k = slotOf[ObjectIdentifier(connection)], slots[k].live === connection {
            slots[k].live = nil
            replaceAfter(connection, k)
        }
        if lostEveryConnection() { return }
        finishIfDone()
    }

    /// No connection left and none to come, while work is left: the run stops ("every connection lost").
    @discardableResult
    func lostEveryConnection() -> Bool {
        guard !finished, connections.isEmpty, !slots.contains(where: { !$0.gaveUp }),
            !scheduleDone || inFlight > 0
        else { return false }
        results.connectionsLost = true
        ending = true
        stop()
        return true
    }

    /// Opens slot `k`'s next connection: at once after a loss or a drain, after the backoff after a failed attempt;
    /// gives the slot up when the reconnect budget (from the outage's start) or `--reconnects` is spent.
    func replace(_ k: Int, afterFailure: Bool) {
        guard !finished, !slots[k].gaveUp, slots[k].live == nil, slots[k].retry == nil else { return }
        let now = EventLoop.hrtimeNanos
        if slots[k].outageSinceNanos == 0 { slots[k].outageSinceNanos = now }
        if afterFailure { slots[k].failures += 1 }
        let delayNanos = slots[k].failures == 0 ? 0 : backoffNanos(failures: slots[k].failures)
        let budgetNanos = options.reconnectBudgetSeconds >= 1e9 ? UInt64.max / 2
            : UInt64(max(0, options.reconnectBudgetSeconds) * 1e9)
        guard mayReconnect, (now &+ delayNanos) &- slots[k].outageSinceNanos <= budgetNanos else {
            return giveUp(k)
        }
        guard delayNanos > 0, let loop else { return open(k) }
        results.reconnectBackoffs += 1
        let timer = UVLoop.Timer(loop: loop) { [unowned self] timer in
            timer.close()
            self.slots[k].retry = nil
            self.open(k)
        }
        timer.start(afterMillis: max(1, delayNanos / 1_000_000))
        slots[k].retry = timer
    }

    /// The wait before the attempt after `failures` failed ones: min(max, min·2^(failures−1)), drawn between half
    /// of it and all of it (jitter: slots that failed together do not retry together).
    func backoffNanos(failures: Int) -> UInt64 {
        let low = max(0.001, options.reconnectBackoffMinSeconds)
        let high = max(low, options.reconnectBackoffMaxSeconds)
        let ceiling = min(high, low * Double(1 << UInt64(min(max(failures - 1, 0), 30))))
        return UInt64(Double.random(in: ceiling / 2...ceiling) * 1e9)
    }

    func open(_ k: Int) {
        guard !finished, !slots[k].gaveUp, slots[k].live == nil else { return }
        guard mayReconnect else { return giveUp(k) }
        reconnectsLeft -= 1
        results.reconnects += 1
        do {
            let connection = try openConnection(slot: k)
            slots[k].live = connection
            connections.append(connection)
        } catch {
            results.connectionEnds["reconnect failed: \(error)", default: 0] += 1
            replace(k, afterFailure: true)
        }
    }

    /// Slot `k` opens no more connections; requests waiting for its target fail ("no connection") when no other
    /// slot of it is left.
    func giveUp(_ k: Int) {
        guard !slots[k].gaveUp else { return }
        slots[k].gaveUp = true
        slots[k].retry?.close()
        slots[k].retry = nil
        releaseOrphans()
        lostEveryConnection()
    }

    /// Requests waiting for a ready connection, routed again (to one that is ready now; held again if none is;
    /// failed if none will come).
    func releaseOrphans() {
        guard heldRequests > 0 else { return }
        let waiting = orphans[orphanHead...]
        orphans = []
        orphanHead = 0
        for case let (request, group)? in waiting { route(request, group: group) }
    }

    /// Connections that ended before this sweep, released (their nghttp2 session, its allocator's cache, their
    /// spare stream records): none is inside its own callback any more, and a long run that replaces connections
    /// again and again holds only the live ones.
    func releaseRetired() {
        guard !retired.isEmpty else { return }
        for c in retired {
            groupOf[ObjectIdentifier(c)] = nil
            slotOf[ObjectIdentifier(c)] = nil
        }
        retired.removeAll()
    }

    // MARK: Deadlines

    /// The sweep: every connection's deadlines (``H2ClientConnection/sweep(now:_:)``) and the request deadline of
    /// the requests waiting for a connection, a few times per shortest deadline (10–100 ms).
    func startSweep(_ loop: EventLoop) {
        let shortest = [deadlines.connectNanos, deadlines.requestNanos, deadlines.pingIntervalNanos]
            .filter { $0 > 0 }.min()
        let periodMillis = min(100, max(10, (shortest ?? 400_000_000) / 4 / 1_000_000))
        let timer = UVLoop.Timer(loop: loop) { [unowned self] _ in self.sweep() }
        timer.start(afterMillis: periodMillis, repeatMillis: periodMillis)
        sweepTimer = timer
    }

    func sweep() {
        guard !finished else { return }
        releaseRetired()
        let now = EventLoop.hrtimeNanos
        for c in connections { c.sweep(now: now, deadlines) }
        guard deadlines.requestNanos > 0, now > deadlines.requestNanos else { return }
        let cutoff = now - deadlines.requestNanos
        while orphanHead < orphans.count, let held = orphans[orphanHead], held.request.handedNanos < cutoff {
            orphans[orphanHead] = nil
            orphanHead += 1
            endUnrouted(
                tag: held.request.tag, handedNanos: held.request.handedNanos,
                failure: H2ClientFailure.timeout.description)
        }
        if orphanHead == orphans.count {
            orphans.removeAll(keepingCapacity: orphans.capacity <= 4096)
            orphanHead = 0
        } else if orphanHead > 4096 && orphanHead * 2 > orphans.count {
            orphans.removeFirst(orphanHead)
            orphanHead = 0
        }
        finishIfDone()
    }
}
