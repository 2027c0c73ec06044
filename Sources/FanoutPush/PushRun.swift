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
    /// Connections that ended, kept until the next sweep (one may still be inside its own callback).
    var retired: [H2ClientConnection] = []
    @exclusivity(unchecked)
    var connectTo: [(host: String, tls: TLSContext?, settings: H2ClientSettings, authority: String?)] = []
    var reconnectsLeft = 0
    /// Requests waiting for a ready connection to their target (none was when they were due or handed back; one is
    /// being opened), from `orphanHead` on, at most ``heldLimit``.
    @exclusivity(unchecked) var orphans: [(request: H2ClientRequest, group: Int)?] = []
    @exclusivity(unchecked) var orphanHead = 0
    /// The `--connections` places of every target, each with its connection and its reconnect state, and the slot
    /// of each connection opened (by identity).
    var slots: [ConnectionSlot] = []
    var slotOf: [ObjectIdentifier: Int] = [:]
    /// Connections ready before the start (the schedule starts when all are).
    var readyAtStart = 0
    /// Every connection's deadlines (connect, request, PING), swept by `sweepTimer`.
    var deadlines = ClientDeadlines(connectSeconds: 0, requestSeconds: 0, pingIntervalSeconds: 0)
    var sweepTimer: UVLoop.Timer?
    var feed: EventFeed?
    private var cursor: FeedCursor?
    /// The schedule's timer, to the microsecond (a `timerfd`): an event is handed over when it is due, not at the
    /// next whole millisecond.
    var timer: DeadlineTimer?
    /// Closes each second at t0 + k s (the intervals of every shard started together line up).
    var secondTimer: DeadlineTimer?
    var deadline: UVLoop.Timer?
    var signals: [SignalWatcher] = []
    var t0Nanos: UInt64 = 0
    /// The loop's idle time (waiting for events) at t0: its busy share over the run tells whose wait a held-up
    /// schedule was (``PushResults/loopBusyShare``).
    var idleAtT0Nanos: UInt64 = 0
    var t0UnixNanos: Int64 = 0
    var connected = false
    var started = false
    @exclusivity(unchecked) var scheduleDone = false
    @exclusivity(unchecked) var ending = false
    @exclusivity(unchecked) var finished = false
    @exclusivity(unchecked) var inFlight = 0
    /// Answers by status (0–599), folded into `results.byStatus` each second and at the end: no hashing per answer.
    @exclusivity(unchecked) var statusCounts = [Int](repeating: 0, count: 600)
    /// The second's histograms (``PushResults``' of the same names), added into the run's when it closes.
    @exclusivity(unchecked) var secondLatency = LatencyHistogram()
    @exclusivity(unchecked) var secondAnswered = LatencyHistogram()
    @exclusivity(unchecked) var secondLag = LatencyHistogram()
    @exclusivity(unchecked) var secondDispatch = LatencyHistogram()
    @exclusivity(unchecked) var secondWait = LatencyHistogram()
    /// Seconds closed so far: second k is t0 + k s … t0 + (k + 1) s.
    var seconds = 0
    var startError: String?
    /// The schedule's t0 (UNIX nanoseconds): `--start-at`, or the instant the barrier fixes (PushRun+Barrier.swift).
    lazy var startAtUnixNanos: Int64? = options.startAtUnixNanos
    /// `--barrier`: the directory's poll timer (what was read of it is `results.barrier`).
    var barrierTimer: UVLoop.Timer?
    /// The interval spool could not be written: the run stops, and fails with this.
    var spoolError: (any Error)?
    var progress: ((PushProgress) -> Void)?

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
        token = try PushRun.providerToken(options)
        describe(name: scenario.name, seed: scenario.seed, configHash: scenario.configHash)
        results.epochSeconds = options.epochSeconds
    }

    /// `--auth-key`'s provider token (nil: the pushes carry no authorization).
    static func providerToken(_ options: PushOptions) throws -> ProviderToken? {
        guard let keyId = options.authKeyId, let pem = options.authKeyPEM, let team = options.team else { return nil }
        return ProviderToken(keyId: keyId, team: team, signer: try ES256Signer(pem: pem, name: keyId).sign)
    }

    /// What summary.json says of the run before anything is sent, a scenario's or a trace's alike: what it sends
    /// (`name`, `seed`, `configHash`) and how (the options: targets, connections, shard, authentication, start).
    func describe(name: String, seed: UInt64, configHash: String) {
        results.scenario = name
        results.seed = seed
        results.target = options.shownTargets
        results.connections = options.connections
        results.authenticated = token != nil
        results.maxScheduleLagNanos = options.maxScheduleLagNanos
        results.shard = options.shard.isWhole ? nil : options.shard.description
        results.configHash = configHash
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
        try loop.countIdleTime()
        try resolveTargets(loop)
        reconnectsLeft = options.maxReconnects
        if options.startAtUnixNanos != nil || options.barrierDirectory != nil {
            results.maxStartSkewNanos = options.maxStartSkewNanos
        }
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
        deadlines = ClientDeadlines(
            connectSeconds: options.connectTimeoutSeconds, requestSeconds: options.requestTimeoutSeconds,
            pingIntervalSeconds: options.pingIntervalSeconds)
        for group in connectTo.indices {
            for _ in 0..<options.connections {
                slots.append(ConnectionSlot(group: group))
                let k = slots.count - 1
                let connection = try openConnection(slot: k, first: true)
                slots[k].live = connection
                connections.append(connection)
            }
        }
        startSweep(loop)
        let connectDeadline = UVLoop.Timer(loop: loop) { [unowned self] timer in
            timer.close()
            self.deadline = nil
            guard !self.connected else { return }
            self.startError = "no HTTP/2 connection to \(self.results.target) within "
                + "\(self.options.connectTimeoutSeconds) s"
            self.stop()
        }
        connectDeadline.start(afterMillis: UInt64(min(max(options.connectTimeoutSeconds, 0.001), 86_400) * 1000))
        deadline = connectDeadline
    }

    /// Every connection is ready: the schedule starts now, or at `startAtUnixNanos`, or once the barrier is met.
    func ready() {
        guard !connected, !finished, loop != nil else { return }
        connected = true
        deadline?.close()
        deadline = nil
        if options.barrierDirectory != nil { return meetBarrier() }
        startAtOrRefuse()
    }

    /// The schedule starts now, or at `startAtUnixNanos`; or, ready too late for it, refuses to.
    func startAtOrRefuse() {
        guard !finished, let loop else { return }
        guard let startAt = startAtUnixNanos else { return start() }
        let waitNanos = startAt - Int64(Date().timeIntervalSince1970 * 1e9)
        if -waitNanos > options.maxStartSkewNanos {
            // Ready too late to start with the others: nothing is sent (a barrier, not a deadline).
            results.startSkewNanos = -waitNanos
            let what = options.barrierDirectory == nil ? "--start-at" : "the start the barrier fixed"
            results.startRefused =
                "ready " + String(format: "%.3f", Double(-waitNanos) / 1e9) + " s after \(what), more than "
                + "--max-start-skew " + String(format: "%g", Double(options.maxStartSkewNanos) / 1e9) + " s"
            return stop()
        }
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
        idleAtT0Nanos = loop.idleNanos
        let wall = Date().timeIntervalSince1970
        t0UnixNanos = Int64(wall * 1e9)
        results.startedAtSeconds = wall
        results.startedUnixNanos = t0UnixNanos
        if let startAt = startAtUnixNanos { results.startSkewNanos = t0UnixNanos - startAt }
        feed = world.map { EventFeed(world: $0, consumers: 1, hrtime: { EventLoop.hrtimeNanos }) }
        cursor = feed.map { FeedCursor(feed: $0) }
        timer = DeadlineTimer(loop: loop) { [unowned self] _ in self.tick() }
        let second = DeadlineTimer(loop: loop) { [unowned self] timer in
            self.closeSecond()
            if !self.finished { timer.start(atHrtimeNanos: self.t0Nanos &+ UInt64(self.seconds + 1) * 1_000_000_000) }
        }
        second.start(atHrtimeNanos: t0Nanos &+ 1_000_000_000)
        secondTimer = second
        tick()
    }

    private func tick() {
        guard !scheduleDone, !finished, cursor != nil || trace != nil else { return }
        let now = EventLoop.hrtimeNanos
        let elapsed = now > t0Nanos ? now - t0Nanos : 0
        // What is due now goes out in pieces (`requestsPerWrite`), not a write per request.
        for c in connections { c.holdWrites() }
        var next = trace.flatMap { sendTrace($0, upTo: elapsed) }
        if var cursor {
            while let (batch, k) = cursor.peek(), batch.events[k].intendedNanos <= elapsed {
                cursor.advance()
                dispatch(batch, k)
            }
            next = cursor.peek().map { $0.0.events[$0.1].intendedNanos }
            self.cursor = cursor
        }
        for c in connections { c.releaseWrites() }
        if let next {
            // To the microsecond: the timer fires when the event is due, not at the next whole millisecond.
            timer?.start(atHrtimeNanos: t0Nanos &+ next)
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
                failUnsent(n, "provider token: \(error)", due: due)
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
                        .apnsRequestId, seed: scenario.seed, event: event.index, push: 0),
                    tag: tag), group: group)
            }
            return
        }
        for (n, path) in targets[source].enumerated() {
            results.tokenPushes += 1
            let id = PushRun.requestId(.apnsId, seed: scenario.seed, event: event.index, push: n)
            send(
                H2ClientRequest(path: path, content: content, uniqueHeader: id, tag: tag),
                group: Int(owners[source][n]))
        }
    }
}
