import FanoutAPNs
import FanoutCore
import FanoutMetrics
import FanoutSim
import FanoutWire
import Foundation
import UVLoop

/// `fanout push`: the scenario's pushes sent over HTTP/2 at their intended times, on one libuv loop. The events
/// and their payloads come from the run engine's feed (`EventFeed`: the core's `PayloadEncoder`, the scenario's
/// payload faults and priorities, as `fanout run` encodes them); the device tokens from the population `fanout serve`
/// builds for the same scenario and seed (`WorkerEngine.tokenFollowersBySource`), so a serve of that scenario
/// knows every one (several targets: serve shards, each push to its device's; PushRun+Targets.swift). Or a trace's
/// push lines (PushRun+Trace.swift). Open loop: an event due while every stream is busy waits in a connection's
/// queue, and its wait counts in its latency.
public final class PushRun {
    /// nil when a trace's push lines are sent (`trace`, PushRun+Trace.swift).
    public let scenario: Scenario?
    public let options: PushOptions
    private let world: World?
    /// Per token source, the request path of each follower (`/3/device/TOKEN`), made once, and the target (serve
    /// shard) its device belongs to (all 0 with one target).
    let targets: [[[UInt8]]]
    let owners: [[UInt8]]
    private let topics: [[UInt8]]
    private let bundles: [[UInt8]]
    let token: ProviderToken?
    let trace: PushTrace?
    // Hot fields are `@exclusivity(unchecked)`: the run is confined to its loop's thread, no access overlaps another.
    @exclusivity(unchecked) var results = PushResults()

    // The run, on the loop.
    var loop: EventLoop?
    @exclusivity(unchecked) var connections: [H2ClientConnection] = []
    /// The target (`options.targets`) of each connection opened, by identity (all 0 with one target).
    @exclusivity(unchecked) var groupOf: [ObjectIdentifier: Int] = [:]
    /// Connections that ended, kept until the run is over (one may still be inside its own callback).
    private var retired: [H2ClientConnection] = []
    @exclusivity(unchecked)
    var connectTo: [(host: String, tls: TLSContext?, settings: H2ClientSettings, authority: String?)] = []
    private var reconnectsLeft = 0
    /// Requests waiting for a connection to their target (none was live when they were due or retried; one is being
    /// opened).
    @exclusivity(unchecked) var orphans: [(request: H2ClientRequest, group: Int)] = []
    private var feed: EventFeed?
    private var cursor: FeedCursor?
    private var timer: UVLoop.Timer?
    private var secondTimer: UVLoop.Timer?
    private var deadline: UVLoop.Timer?
    private var signals: [SignalWatcher] = []
    var t0Nanos: UInt64 = 0
    var t0UnixNanos: Int64 = 0
    private var connected = false
    private var started = false
    @exclusivity(unchecked) private var scheduleDone = false
    @exclusivity(unchecked) private var ending = false
    @exclusivity(unchecked) private var finished = false
    @exclusivity(unchecked) var inFlight = 0
    /// Answers by status (0–599), folded into `results.byStatus` each second and at the end: no hashing per answer.
    @exclusivity(unchecked) private var statusCounts = [Int](repeating: 0, count: 600)
    @exclusivity(unchecked) private var secondLatency = LatencyHistogram()
    @exclusivity(unchecked) private var secondLag = LatencyHistogram()
    private var secondStartNanos: UInt64 = 0
    private var seconds = 0
    private var startError: String?
    /// The interval spool could not be written: the run stops, and fails with this.
    private var spoolError: (any Error)?
    private var progress: ((PushProgress) -> Void)?

    /// Builds the scenario's population as `fanout serve` does, at `nowSeconds` (or ``PushOptions/epochSeconds``).
    public init(scenario: Scenario, options: PushOptions, nowSeconds: Int64) throws {
        precondition(options.connections >= 1)
        self.scenario = scenario
        self.options = options
        trace = nil
        let engine = WorkerEngine(
            world: World(scenario: scenario, shard: .whole, epochSeconds: options.epochSeconds ?? nowSeconds),
            index: 0, count: 1, hrtime: { EventLoop.hrtimeNanos })
        world = engine.world
        engine.rotateScenarioShare { _, _ in }
        (targets, owners) = PushRun.followerPaths(engine, targetCount: options.targets.count)
        topics = scenario.apps.map { Array(($0.bundle + ".push-type.liveactivity").utf8) }
        bundles = scenario.apps.map { Array($0.bundle.utf8) }
        if let keyId = options.authKeyId, let pem = options.authKeyPEM, let team = options.team {
            token = ProviderToken(keyId: keyId, team: team, signer: try ES256Signer(pem: pem, name: keyId).sign)
        } else {
            token = nil
        }
        results.scenario = scenario.name
        results.seed = scenario.seed
        results.target = options.shownTargets
        results.connections = options.connections
        results.authenticated = token != nil
        results.maxScheduleLagNanos = options.maxScheduleLagNanos
        results.shard = options.shard.isWhole ? nil : options.shard.description
        results.configHash = scenario.configHash
        results.requestedStartSeconds = options.startAtUnixNanos.map { Double($0) / 1e9 }
    }

    /// Sends `trace`'s push lines (the public initializer is in PushRun+Trace.swift).
    init(trace: PushTrace, options: PushOptions, token: ProviderToken?) {
        (scenario, world, targets, owners, topics, bundles) = (nil, nil, [], [], [], [])
        (self.trace, self.options, self.token) = (trace, options, token)
    }

    /// latency.hlog's intervals held in memory by the run (0: each second's go to disk, ``PushIntervalSpool``) and
    /// spooled so far.
    public var intervalsHeld: Int { results.intervals.count }
    public var intervalsSpooled: Int { results.spooled?.count ?? 0 }

    /// Connects, waits for every connection's SETTINGS, sends the schedule, waits for the answers (at most
    /// `drainSeconds` after the last event), closes everything; `progress` is called once a second, and held only
    /// while the run goes on (a closure that captures the run makes no cycle: LeakSanitizer found one in a test).
    public func run(progress: ((PushProgress) -> Void)? = nil) throws -> PushResults {
        self.progress = progress
        defer { self.progress = nil }
        results.spooled = try PushIntervalSpool()
        let loop = try EventLoop()
        self.loop = loop
        try resolveTargets(loop)
        reconnectsLeft = options.maxReconnects
        let leadNanos = Int64(options.connectLeadSeconds * 1e9)
        let nowNanos = Int64(Date().timeIntervalSince1970 * 1e9)
        if let startAt = options.startAtUnixNanos, startAt - nowNanos > leadNanos {
            // A start far ahead: the connections are opened shortly before it, not left idle until then (a server
            // may close an idle connection).
            let wait = UVLoop.Timer(loop: loop) { [unowned self] timer in
                let left = startAt - Int64(Date().timeIntervalSince1970 * 1e9)
                if left > leadNanos {
                    timer.start(afterMillis: UInt64((left - leadNanos) / 1_000_000) + 1)
                    return
                }
                timer.close()
                self.deadline = nil
                do {
                    try self.connect()
                } catch {
                    self.startError = "\(error)"
                    self.stop()
                }
            }
            wait.start(afterMillis: UInt64((startAt - nowNanos - leadNanos) / 1_000_000))
            deadline = wait
        } else {
            try connect()
        }
        if options.stopOnSignals {
            for signal in [SIGINT, SIGTERM] {
                signals.append(try SignalWatcher(loop: loop, signal: signal) { [unowned self] _, _ in
                    self.results.interrupted = true
                    self.ending = true
                    if !self.started { self.startError = "interrupted before the schedule started" }
                    self.stop()
                })
            }
        }
        loop.run()
        try loop.close()
        self.loop = nil
        connections = []
        retired = []
        if let startError { throw PushError(startError) }
        if let spoolError { throw PushError("cannot spool latency.hlog's intervals: \(spoolError)") }
        foldStatuses()
        return results
    }

    /// Opens the connections; the schedule starts once every one is ready (``ready()``), or the run fails when
    /// they are not within `connectTimeoutSeconds`.
    private func connect() throws {
        guard let loop else { throw PushError("no loop") }
        var ready = 0
        let all = options.connections * connectTo.count
        for group in connectTo.indices {
            for _ in 0..<options.connections {
                let connection = try openConnection(group: group)
                connection.onReady = { [unowned self] _ in
                    ready += 1
                    if ready == all { self.ready() }
                }
                connections.append(connection)
            }
        }
        let connectDeadline = UVLoop.Timer(loop: loop) { [unowned self] timer in
            timer.close()
            self.deadline = nil
            guard !self.connected else { return }
            self.startError = "no HTTP/2 connection to \(self.results.target) within "
                + "\(self.options.connectTimeoutSeconds) s"
            self.stop()
        }
        connectDeadline.start(afterMillis: UInt64(options.connectTimeoutSeconds * 1000))
        deadline = connectDeadline
    }

    /// Every connection is ready: the schedule starts now, or at `startAtUnixNanos`.
    private func ready() {
        guard !connected, !finished, let loop else { return }
        connected = true
        deadline?.close()
        deadline = nil
        guard let startAt = options.startAtUnixNanos else { return start() }
        let waitNanos = startAt - Int64(Date().timeIntervalSince1970 * 1e9)
        guard waitNanos > 0 else { return start() }
        // The loop's timer (whole milliseconds, and late by up to a loop turn) until less than 3 ms are left, then a
        // sleep for the rest: the skew is the sleep's overshoot, not the timer's resolution.
        let wait = UVLoop.Timer(loop: loop) { [unowned self] timer in
            let left = startAt - Int64(Date().timeIntervalSince1970 * 1e9)
            if left >= 3_000_000 {
                timer.start(afterMillis: UInt64(left / 1_000_000) - 2)
                return
            }
            if left > 0 { usleep(useconds_t(left / 1000)) }
            timer.close()
            self.deadline = nil
            self.start()
        }
        wait.start(afterMillis: waitNanos >= 3_000_000 ? UInt64(waitNanos / 1_000_000) - 2 : 0)
        deadline = wait
    }

    private func start() {
        guard !started, !finished, let loop else { return }
        started = true
        t0Nanos = EventLoop.hrtimeNanos
        let wall = Date().timeIntervalSince1970
        t0UnixNanos = Int64(wall * 1e9)
        results.startedAtSeconds = wall
        if let startAt = options.startAtUnixNanos { results.startSkewNanos = t0UnixNanos - startAt }
        secondStartNanos = t0Nanos
        feed = world.map { EventFeed(world: $0, consumers: 1, hrtime: { EventLoop.hrtimeNanos }) }
        cursor = feed.map { FeedCursor(feed: $0) }
        timer = UVLoop.Timer(loop: loop) { [unowned self] _ in self.tick() }
        let second = UVLoop.Timer(loop: loop) { [unowned self] _ in self.closeSecond() }
        second.start(afterMillis: 1000, repeatMillis: 1000)
        secondTimer = second
        tick()
    }

    private func tick() {
        guard !scheduleDone, !finished, cursor != nil || trace != nil else { return }
        let now = EventLoop.hrtimeNanos
        let elapsed = now > t0Nanos ? now - t0Nanos : 0
        var next = trace.flatMap { sendTrace($0, upTo: elapsed) }
        if var cursor {
            while let (batch, k) = cursor.peek(), batch.events[k].intendedNanos <= elapsed {
                cursor.advance()
                dispatch(batch, k)
            }
            next = cursor.peek().map { $0.0.events[$0.1].intendedNanos }
            self.cursor = cursor
        }
        if let next {
            let due = t0Nanos &+ next
            let now = EventLoop.hrtimeNanos
            // Whole milliseconds, rounded up: the timer never fires before the event is due.
            timer?.start(afterMillis: due > now ? (due - now + 999_999) / 1_000_000 : 0)
        } else {
            scheduleDone = true
            results.scheduleSeconds = Double(EventLoop.hrtimeNanos - t0Nanos) / 1e9
            timer?.close()
            timer = nil
            if let loop {
                let drain = UVLoop.Timer(loop: loop) { [unowned self] timer in
                    timer.close()
                    self.deadline = nil
                    self.ending = true
                    self.stop()
                }
                drain.start(afterMillis: UInt64(options.drainSeconds * 1000))
                deadline = drain
            }
            finishIfDone()
        }
    }

    /// One event's pushes: one per follower of a token source, or one broadcast to a channel.
    private func dispatch(_ batch: EventBatch, _ k: Int) {
        guard let world, let scenario, batch.sends(k) else { return }
        let event = batch.events[k]
        guard options.shard.isWhole || event.index % options.shard.count == options.shard.index else { return }
        let source = event.source
        let app = world.sourceApp[source]
        let body = Array(batch.payload[Int(batch.payloadStart[k])..<Int(batch.payloadStart[k + 1])])
        let due = t0Nanos &+ event.intendedNanos
        let priority = Array(String(batch.priority[k]).utf8)
        let expirationSeconds = scenario.faults.offline.map { Int64($0.expirationSeconds) }
        let wallSeconds = (t0UnixNanos + Int64(event.intendedNanos)) / 1_000_000_000
        let clockSeconds = options.epochSeconds.map { $0 + Int64(event.intendedNanos / 1_000_000_000) } ?? wallSeconds
        let expiration = Array(String(expirationSeconds.map { clockSeconds + $0 } ?? 0).utf8)
        var authorization: [UInt8]?
        if let token {
            do {
                authorization = try token.authorization(nowSeconds: wallSeconds)
                results.tokensIssued = token.tokensIssued
            } catch {
                // The event's requests, unsent, are counted sent and failed: sent = answered + failed + unanswered.
                let n = world.sourceIsBroadcast[source] ? connectTo.count : targets[source].count
                results.sent += n
                results.failures["provider token: \(error)", default: 0] += n
                return
            }
        }
        results.events += 1
        // The headers every request of the event shares, in one list (each request adds its own id).
        var headers = HeaderList()
        let broadcast = world.sourceIsBroadcast[source]
        if broadcast {
            var channel: [UInt8] = []
            world.appendChannelId(source: source, to: &channel)
            var encoded: [UInt8] = []
            Base64.append(encoding: channel, to: &encoded)
            headers.append(name: PushRun.channelIdName, value: encoded)
        } else {
            headers.append(name: PushRun.topicName, value: topics[app])
        }
        headers.append(name: PushRun.pushTypeName, value: PushRun.liveActivity)
        headers.append(name: PushRun.priorityName, value: priority)
        headers.append(name: PushRun.expirationName, value: expiration)
        if let authorization { headers.append(name: PushRun.authorizationName, value: authorization) }
        let tag = Int(truncatingIfNeeded: due), content = H2RequestContent(headers: headers, body: body)
        if broadcast {
            results.broadcasts += 1
            for group in connectTo.indices {  // every serve shard: one request each
                send(H2ClientRequest(
                    path: Array("/4/broadcasts/apps/".utf8) + bundles[app], content: content,
                    uniqueHeader: PushRun.requestId(
                        "apns-request-id", seed: scenario.seed, event: event.index, push: 0),
                    tag: tag), group: group)
            }
            return
        }
        for (n, path) in targets[source].enumerated() {
            results.tokenPushes += 1
            let id = PushRun.requestId("apns-id", seed: scenario.seed, event: event.index, push: n)
            send(
                H2ClientRequest(path: path, content: content, uniqueHeader: id, tag: tag),
                group: Int(owners[source][n]))
        }
    }

    func send(_ request: consuming H2ClientRequest, group: Int) {
        results.sent += 1
        inFlight += 1
        route(request, group: group)
    }

    /// Whether a connection may still be opened in place of one that ended (work is left).
    var mayReconnect: Bool { reconnectsLeft > 0 && !ending && !finished && (!scheduleDone || inFlight > 0) }

    // MARK: Outcomes

    func completed(_ connection: H2ClientConnection, _ response: H2ClientResponse) {
        if let request = response.unprocessed, !ending, !finished {
            // Not processed by the server: sent again (to another connection, or to the one opened next).
            results.retries += 1
            route(request, group: groupOf[ObjectIdentifier(connection)] ?? 0)
            return
        }
        inFlight -= 1
        let due = UInt64(truncatingIfNeeded: response.tag)
        if response.submittedNanos > 0 {
            results.submitted += 1
            let lag = response.submittedNanos > due ? response.submittedNanos - due : 0
            // Into the second's histogram only: the run's totals are the sum of its seconds (`closeSecond`).
            secondLag.record(min(lag, HdrLayout.highestTrackableValue))
        }
        if let failure = response.failure {
            if ending && failure == .connectionEnded {
                results.unansweredAtEnd += 1
                if response.submittedNanos == 0 { results.queuedAtEnd += 1 }
            } else {
                results.failures[failure.description, default: 0] += 1
            }
        } else {
            if response.status >= 0 && response.status < statusCounts.count {
                statusCounts[response.status] += 1
            } else {
                results.byStatus[response.status, default: 0] += 1
            }
            if !response.body.isEmpty { results.byReason[PushRun.reason(response.body), default: 0] += 1 }
            let latency = min(response.endNanos > due ? response.endNanos - due : 0, HdrLayout.highestTrackableValue)
            secondLatency.record(latency)
        }
        finishIfDone()
    }

    func connectionClosed(_ connection: H2ClientConnection) {
        results.connectionEnds[connection.endReason ?? "closed", default: 0] += 1
        if !started && !finished {
            let target = options.targets[groupOf[ObjectIdentifier(connection)] ?? 0]
            startError = "connection to \(target) failed: \(connection.endReason ?? "closed")"
            stop()
            return
        }
        guard !finished, !ending, let k = connections.firstIndex(where: { $0 === connection }) else {
            finishIfDone()
            return
        }
        // A connection ended during the run (a GOAWAY, a reset, a lost server): another one takes its place; what
        // it had open or queued has failed already (counted), what comes next goes to the others or to it.
        retired.append(connection)
        connections.remove(at: k)
        if mayReconnect {
            reconnectsLeft -= 1
            results.reconnects += 1
            do {
                connections.append(try openConnection(group: groupOf[ObjectIdentifier(connection)] ?? 0))
            } catch {
                results.connectionEnds["reconnect failed: \(error)", default: 0] += 1
            }
        }
        let waiting = orphans
        orphans = []
        for (request, group) in waiting { route(request, group: group) }
        if connections.isEmpty && (!scheduleDone || inFlight > 0) {
            results.connectionsLost = true
            ending = true
            stop()
            return
        }
        finishIfDone()
    }

    private func finishIfDone() {
        guard scheduleDone, !finished, inFlight == 0 else { return }
        stop()
    }

    /// Closes every connection (what is open or queued fails: unanswered at the end when `ending`) and timer.
    private func stop() {
        guard !finished else { return }
        finished = true
        if started {
            results.elapsedSeconds = Double(EventLoop.hrtimeNanos - t0Nanos) / 1e9
            if !scheduleDone { results.scheduleSeconds = results.elapsedSeconds }
        }
        ending = ending || !scheduleDone
        // Waiting for a connection that will not come: unanswered at the end, never sent.
        results.unansweredAtEnd += orphans.count
        results.queuedAtEnd += orphans.count
        inFlight -= orphans.count
        orphans = []
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
        for s in signals { s.close() }
        signals = []
        feed?.cancel()
    }

    private func foldStatuses() {
        for status in statusCounts.indices where statusCounts[status] > 0 {
            results.byStatus[status, default: 0] += statusCounts[status]
            statusCounts[status] = 0
        }
    }

    /// The second's histograms are added into the run's totals and emptied (every sample counted once, there).
    private func foldSecond() {
        results.latency.add(secondLatency)
        results.scheduleLag.add(secondLag)
        secondLatency.reset()
        secondLag.reset()
    }

    /// The second's intervals go to the log; the progress line.
    private func closeSecond(final: Bool = false) {
        foldStatuses()
        let now = EventLoop.hrtimeNanos
        for (tag, h) in [secondLatency, secondLag].enumerated() where !h.isEmpty || !final {
            do {
                try results.spooled?.append(
                    tag: tag, index: seconds, startNanos: secondStartNanos - t0Nanos,
                    lengthNanos: now - secondStartNanos, histogram: h)
            } catch {
                spoolError = spoolError ?? error
                break
            }
        }
        if spoolError != nil && !final { return stop() }  // stop() closes the second itself (final)
        seconds += 1
        progress?(PushProgress(
            seconds: seconds, sent: results.sent, answered: results.answered, inFlight: inFlight,
            queued: connections.reduce(0) { $0 + $1.queuedRequests },
            latencyP99Nanos: secondLatency.valueAtPercentile(99), scheduleLagP99Nanos: secondLag.valueAtPercentile(99)))
        foldSecond()
        secondStartNanos = now
    }
}

