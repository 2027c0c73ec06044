import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import Histogram

/// One worker's share of a run: its slice of the devices (device `d` belongs to worker `d % n`), its
/// own `Pipeline`, its own histograms. It sees every source event and handles the recipients on its
/// devices; only its thread touches it (shared-nothing, wrk2's model).
///
/// Per source event: the payload is encoded once (as a backend would for all its recipients); each
/// token push is then validated, routed and applied on its own; a broadcast is validated and routed
/// once and applied by every local subscriber. Rules read the virtual clock of the event's intended
/// time, so counts do not depend on timing, worker count or machine.
public final class WorkerEngine {
    public let world: World
    public let index: Int
    public let count: Int
    public let pipeline: Pipeline
    /// The whole run so far (finished intervals).
    public internal(set) var recorder = LatencyRecorder()
    /// The current interval of the histogram log (a second of run time, a simulated minute in
    /// virtual time); every sample is recorded here and folded into `recorder` when it ends.
    var current = LatencyRecorder()
    var currentInterval = 0
    /// Finished intervals not yet handed to the coordinator, compressed (V2 encoding): a few
    /// kilobytes each. `takeFinished` empties it once a second, so it does not grow with the run.
    public internal(set) var encodedIntervals: [EncodedInterval] = []
    /// The interval being recorded (every earlier one is finished).
    public var intervalIndex: Int { currentInterval }
    /// End-to-end latency since the last progress snapshot.
    public internal(set) var interval = LatencyRecorder.makeHistogram()
    /// Local completion per event, for the events from `completionBase` on (earlier ones were handed
    /// over by `takeFinished`): the intended time, nanoseconds after the run start when the last local
    /// recipient was applied (0: none) and the number of local recipients.
    public internal(set) var local = EventCompletions()
    public internal(set) var completionBase = 0
    /// The most events whose completion columns were held at once (a check that they stay bounded).
    public private(set) var peakRetainedEvents = 0
    public private(set) var eventsProcessed = 0

    // Local activities (index = the pipeline's activity id). Local devices are interned in order;
    // `deviceNumbers` maps the pipeline's device id to the global device number (`globalDevice`).
    private var deviceNumbers: [Int32] = []
    var slot: [UInt8] = []
    private var generation: [UInt32] = []
    /// Local followers of each token-delivered source.
    private var followers: [[Int32]]

    // Scratch, reused for every push.
    private var encoder = PayloadEncoder()
    private var payload: [UInt8] = []
    var content: [UInt8] = []
    private var token: [UInt8] = []
    var channel: [UInt8] = []
    let topics: [[UInt8]]
    let pushType = Array("liveactivity".utf8)
    private var pushCounter = 0

    // Pushes held for offline devices: records plus their payload bytes, flushed at window ends.
    struct Held {
        var activity: Int32
        var event: Int32
        var intendedNanos: UInt64
        var expirationMillis: Int64
        var payloadStart: Int32
        var payloadCount: Int32
        var priority: Int8
        var broadcast: Bool
        var superseded: Bool
    }
    var held: [Held] = []
    var heldBytes: [UInt8] = []
    /// Superseded records still in `held`; compacted away once they are the majority, so with
    /// coalescing the storage follows the offline activities, not the traffic to them.
    var heldSuperseded = 0
    /// Compaction starts at this many superseded records (tests move it); and how often it ran.
    var heldCompactAt = 1024
    var heldCompactions = 0
    /// The most records `held` had at once.
    var peakHeld = 0

    // Broadcasts applied in slices (real time): a fan-out stops at a batch boundary once the next
    // scheduled event is due (`yieldAtNanos`), so that event is not held up by thousands of applies;
    // the rest waits here, first in first out, with a copy of its payload.
    struct Slice {
        var event: SourceEvent
        var channel: Int32
        var next: Int32
        var priority: Int64
        var payloadStart: Int32
        var payloadCount: Int32
        var done: Bool
    }
    var slices: [Slice] = []
    var sliceHead = 0
    var sliceBytes: [UInt8] = []
    /// Unfinished slices per source: a newer event of a source waits for them (per-source order).
    var slicesPerSource: [Int32]
    /// Real time: the intended time and source of the next scheduled event (set by the worker loop
    /// before each `process` or `runSlice`); a broadcast yields once the clock passes it, unless that
    /// event is of the same source (it would wait for the broadcast anyway). `.max`: never yield.
    public var yieldAtNanos: UInt64 = .max
    public var yieldForSource = -1
    /// A broadcast applies for at least this long before it yields, so that resuming (the payload is
    /// scanned again) stays a small share of the work.
    public static let sliceQuantumNanos: UInt64 = 250_000
    /// Broadcast fan-outs that were interrupted at least once.
    public private(set) var slicedFanouts = 0
    /// The newest held push of each activity that has one (sparse: only offline devices).
    var latestHeld: [Int32: Int32] = [:]

    // Time: nanoseconds since the run start, real or virtual.
    /// Real time once `startRealClock` is called; virtual time until then.
    public enum Clock {
        case real(startHrtime: UInt64)
        case virtual
    }
    public private(set) var clock: Clock = .virtual
    let hrtime: @Sendable () -> UInt64
    /// The scenario's artificial service time per delivery (0: none); in real time the instant
    /// (hrtime) the deliveries have paid for so far, in virtual time the cost of this event so far.
    let costNanos: UInt64
    var costDeadline: UInt64 = 0
    var costPaid: UInt64 = 0
    /// Virtual mode: a single server per worker working at measured speed. The event starts at
    /// max(intended, busyUntil); elapsed CPU time advances the virtual clock.
    private var busyUntil: UInt64 = 0
    private var eventVirtualStart: UInt64 = 0
    private var eventRealStart: UInt64 = 0

    public init(world: World, index: Int, count: Int, hrtime: @escaping @Sendable () -> UInt64) {
        self.world = world
        self.index = index
        self.count = count
        self.hrtime = hrtime
        costNanos = UInt64(world.scenario.costNanosPerDelivery)
        pipeline = Pipeline(schemas: world.schemas, rules: world.scenario.rules)
        followers = Array(repeating: [], count: world.scenario.sources.count)
        slicesPerSource = Array(repeating: 0, count: world.scenario.sources.count)
        topics = world.scenario.apps.map { Array(($0.bundle + ".push-type.liveactivity").utf8) }
        payload.reserveCapacity(8192)
        heldBytes.reserveCapacity(1 << 16)
        populate()
    }

    /// Creates this worker's devices and their activities (`request`s at the start of the run).
    private func populate() {
        let scenario = world.scenario
        // Every broadcast channel exists on every worker, registered for its source's app, so that a
        // worker without subscribers still routes it (zero local deliveries) and judges its topic alike.
        var bundles: [[UInt8]] = scenario.apps.map { Array($0.bundle.utf8) }
        for s in 0..<scenario.sources.count where world.sourceIsBroadcast[s] {
            channel.removeAll(keepingCapacity: true)
            world.appendChannelId(source: s, to: &channel)
            let app = bundles[world.sourceApp[s]].withUnsafeBytes { pipeline.store.internApp($0) }
            channel.withUnsafeBytes { _ = pipeline.router.registerChannel($0, app: app) }
        }
        var idBytes: [UInt8] = []
        var deviceBytes: [UInt8] = []
        let startMillis = world.epochSeconds * 1000
        // Count first, so that every column is allocated once at its final size.
        var expected = 0
        var contentBytes = 0
        var perSource = [Int](repeating: 0, count: scenario.sources.count)
        var d = index
        while d < scenario.population.devices {
            deviceBytes.removeAll(keepingCapacity: true)
            world.appendDeviceId(d, to: &deviceBytes)
            if deviceBytes.withUnsafeBytes({ world.shard.contains(deviceId: $0) }) { deviceNumbers.append(Int32(d)) }
            d += count
        }
        for d in deviceNumbers.lazy.map({ Int($0) }) {
            let n = world.activityCount(device: d)
            expected += n
            for k in 0..<n {
                let source = world.source(device: d, slot: k)
                perSource[source] += 1
                contentBytes += world.recordSize(schema: world.appSchema[world.sourceApp[source]])
            }
        }
        for source in 0..<scenario.sources.count where perSource[source] > 0 {
            if world.sourceIsBroadcast[source] {
                channel.removeAll(keepingCapacity: true)
                world.appendChannelId(source: source, to: &channel)
                channel.withUnsafeBytes { pipeline.router.reserveSubscribers(channel: $0, count: perSource[source]) }
            } else {
                followers[source].reserveCapacity(perSource[source])
            }
        }
        pipeline.store.reserveCapacity(
            activities: expected, devices: deviceNumbers.count, contentBytes: contentBytes,
            idBytes: expected * 20)
        pipeline.router.reserveUpdateTokens(expected, bytes: expected * 64)
        slot.reserveCapacity(expected)
        generation.reserveCapacity(expected)
        for d in deviceNumbers.lazy.map({ Int($0) }) {
            deviceBytes.removeAll(keepingCapacity: true)
            world.appendDeviceId(d, to: &deviceBytes)
            for k in 0..<world.activityCount(device: d) {
                let source = world.source(device: d, slot: k)
                let app = world.sourceApp[source]
                idBytes.removeAll(keepingCapacity: true)
                world.appendActivityId(device: d, slot: k, to: &idBytes)
                token.removeAll(keepingCapacity: true)
                world.appendToken(device: d, slot: k, generation: 0, to: &token)
                makeContent(schema: world.appSchema[app], event: -1, source: source, final: false)
                channel.removeAll(keepingCapacity: true)
                if world.sourceIsBroadcast[source] { world.appendChannelId(source: source, to: &channel) }
                let created = idBytes.withUnsafeBytes { id in
                    deviceBytes.withUnsafeBytes { dev in
                        bundles[app].withUnsafeBytes { bundle in
                            token.withUnsafeBytes { tok in
                                channel.withUnsafeBytes { ch in
                                    content.withUnsafeBytes { c in
                                        pipeline.request(
                                            id: id, device: dev, app: bundle, schema: world.appSchema[app], content: c,
                                            staleDate: nil, relevance: Double(k), token: tok,
                                            channel: world.sourceIsBroadcast[source] ? ch : nil, nowMillis: startMillis)
                                    }
                                }
                            }
                        }
                    }
                }
                guard let a = created else { continue }
                precondition(Int(a) == slot.count && globalDevice(a) == d)
                slot.append(UInt8(k))
                generation.append(0)
                if !world.sourceIsBroadcast[source] { followers[source].append(a) }
            }
        }
        bundles.removeAll()
    }

    public var activityCount: Int { slot.count }

    /// The global device number of a local activity.
    @inline(__always)
    func globalDevice(_ a: Int32) -> Int {
        Int(deviceNumbers[Int(pipeline.store.device[Int(a)])])
    }

    /// Switches to real time: event times are nanoseconds after `start` on the monotonic clock.
    public func startRealClock(atHrtime start: UInt64) {
        clock = .real(startHrtime: start)
    }

    /// Interval lengths of the histogram log.
    public static let realIntervalNanos: UInt64 = 1_000_000_000
    public static let virtualIntervalNanos: UInt64 = 60_000_000_000

    public var intervalNanos: UInt64 {
        if case .real = clock { return WorkerEngine.realIntervalNanos }
        return WorkerEngine.virtualIntervalNanos
    }

    // MARK: Time

    @inline(__always)
    func now() -> UInt64 {
        switch clock {
        case .real(let start): return hrtime() &- start
        case .virtual: return eventVirtualStart &+ max(hrtime() &- eventRealStart, costPaid)
        }
    }

    @inline(__always)
    func nowMillis(_ event: SourceEvent) -> Int64 {
        world.epochSeconds * 1000 + Int64(event.intendedNanos / 1_000_000)
    }

    // MARK: Events

    /// Handles one source event; in real time `lagNanos` is how late the harness got to it.
    public func process(_ event: SourceEvent) {
        // Per-source order: a newer event of a source waits until that source's earlier fan-outs have
        // reached every local subscriber.
        if event.source >= 0, slicesPerSource[event.source] > 0 { finishSlices(of: event.source) }
        eventRealStart = hrtime()
        if case .virtual = clock {
            eventVirtualStart = max(event.intendedNanos, busyUntil)
            costPaid = 0
        }
        let started = now()
        switch clock {
        case .real: advanceInterval(to: Int(started / WorkerEngine.realIntervalNanos))
        case .virtual: advanceInterval(to: Int(event.intendedNanos / WorkerEngine.virtualIntervalNanos))
        }
        current.record(.scheduleLag, nanos: started &- min(started, event.intendedNanos))
        let e = event.index - completionBase
        while local.count <= e {
            local.intendedNanos.append(0)
            local.lastNanos.append(0)
            local.recipients.append(0)
        }
        peakRetainedEvents = max(peakRetainedEvents, local.count)
        local.intendedNanos[e] = event.intendedNanos
        switch event.kind {
        case .offlineWindowEnd: flushHeld(event)
        case .update, .end: fanOut(event)
        }
        eventsProcessed += 1
        if case .virtual = clock { busyUntil = now() }
    }

    func advanceInterval(to index: Int) {
        if index != currentInterval {
            finishInterval()
            currentInterval = index
        }
    }

    // MARK: Fan-out

    private func fanOut(_ event: SourceEvent) {
        let scenario = world.scenario
        let source = event.source
        // A source that has ended sends nothing more (its end push went out at the end time).
        if event.kind == .update, let end = world.sourceEndSeconds[source],
            Double(event.intendedNanos) >= end * 1e9
        {
            return
        }
        let app = world.sourceApp[source]
        let e = UInt64(event.index)
        let seed = scenario.seed
        startCost(event)
        // Encode once for all recipients.
        let t0 = hrtime()
        makeContent(schema: world.appSchema[app], event: event.index, source: source, final: event.kind == .end)
        var timestamp = world.epochSeconds + Int64(event.index)
        if Mix.unit(Mix.hash(seed, 0x00, e)) < scenario.faults.outOfOrderShare { timestamp -= 10 }
        let relevance = Double(Mix.hash(seed, 0x4E, e) % 100)
        let schema = world.schemas[world.appSchema[app]]
        let nowSeconds = world.epochSeconds + Int64(event.intendedNanos / 1_000_000_000)
        let dismissal =
            event.kind == .end
            ? scenario.lifecycle.dismissalAfterSeconds.map { nowSeconds + Int64($0) } : nil
        _ = content.withUnsafeBytes { c in
            encoder.encode(
                event: event.kind == .end ? .end : .update, timestamp: timestamp, content: c, schema: schema,
                staleDate: nowSeconds + 3600, dismissalDate: dismissal, relevanceScore: relevance)
        }
        payload.removeAll(keepingCapacity: true)
        encoder.withPayload { payload.append(contentsOf: $0) }
        let broadcast = world.sourceIsBroadcast[source]
        applyPayloadFaults(e, broadcast: broadcast)
        current.record(.encode, nanos: hrtime() &- t0)
        let priority: Int64 =
            Mix.unit(Mix.hash(seed, 0x10, e)) < scenario.priority10Share ? 10 : (broadcast ? 1 : 5)
        if broadcast {
            broadcastPush(event, priority: priority)
        } else {
            var k = 0
            while k < followers[source].count {
                tokenPush(event, to: followers[source][k], priority: priority)
                k += 1
            }
        }
    }

    /// Malformed: the payload is cut in half. Oversized: a padding member pushes it past the limit.
    private func applyPayloadFaults(_ e: UInt64, broadcast: Bool) {
        let faults = world.scenario.faults
        let u = Mix.unit(Mix.hash(world.scenario.seed, 0xFA, e))
        if u < faults.malformedShare {
            payload.removeLast(payload.count / 2)
        } else if u < faults.malformedShare + faults.oversizedShare {
            let limit = broadcast ? 5120 : 4096
            var padded: [UInt8] = Array("{\"pad\":\"".utf8)
            padded.append(contentsOf: repeatElement(UInt8(ascii: "x"), count: limit))
            padded.append(contentsOf: Array("\",".utf8))
            padded.append(contentsOf: payload.dropFirst())
            payload = padded
        }
    }

    private func tokenPush(_ event: SourceEvent, to a: Int32, priority: Int64) {
        let seed = world.scenario.seed
        let d = globalDevice(a)
        let k = Int(slot[Int(a)])
        let key = UInt64(d) << 8 | UInt64(k)
        let nowMs = nowMillis(event)
        // The device rotates its token while this push is in flight: it goes to the old token.
        var rotated = false
        if Mix.unit(Mix.hash(seed, 0x40, UInt64(event.index), key)) < world.scenario.faults.rotationShare {
            generation[Int(a)] &+= 1
            token.removeAll(keepingCapacity: true)
            world.appendToken(device: d, slot: k, generation: generation[Int(a)], to: &token)
            token.withUnsafeBytes { pipeline.rotate(a, token: $0) }
            rotated = true
        }
        token.removeAll(keepingCapacity: true)
        world.appendToken(device: d, slot: k, generation: generation[Int(a)] &- (rotated ? 1 : 0), to: &token)
        let expiration: Int64 =
            world.scenario.faults.offline.map {
                world.epochSeconds + Int64(event.intendedNanos / 1_000_000_000) + Int64($0.expirationSeconds)
            } ?? 0
        let sampled = pushCounter % world.scenario.stageSampleEvery == 0
        pushCounter &+= 1
        let app = world.sourceApp[event.source]
        payload.withUnsafeBytes { p in
            pushType.withUnsafeBytes { pt in
                topics[app].withUnsafeBytes { tp in
                    token.withUnsafeBytes { tok in
                        let headers = PushHeaders(
                            pushType: .string(pt), topic: .string(tp), priority: .integer(priority),
                            expiration: .integer(expiration))
                        let t0 = sampled ? hrtime() : 0
                        var flight = pipeline.begin(kind: .token, target: tok)
                        guard pipeline.validate(&flight, headers: headers, payload: p) == nil else { return }
                        let t1 = sampled ? hrtime() : 0
                        guard case .routed = pipeline.route(&flight), case .activity(let target) = flight.resolution
                        else { return }
                        let t2 = sampled ? hrtime() : 0
                        if sampled {
                            current.record(.validate, nanos: t1 &- t0)
                            current.record(.route, nanos: t2 &- t1)
                        }
                        if isOffline(target, event) {
                            hold(target, event, headers: headers, payload: p, broadcast: false)
                            return
                        }
                        pipeline.deliver(flight, to: target, nowMillis: nowMs)
                        payCost()
                        let end = now()
                        if sampled { current.record(.apply, nanos: hrtime() &- t2) }
                        delivered(target, event, endNanos: end, count: 1)
                    }
                }
            }
        }
    }

    private func broadcastPush(_ event: SourceEvent, priority: Int64) {
        let source = event.source
        // One worker of one shard counts the push's verdict; every worker applies it to its subscribers.
        let owner = source % count == index && world.shard.countsBroadcast(source: source)
        channel.removeAll(keepingCapacity: true)
        world.appendChannelId(source: source, to: &channel)
        if Mix.unit(Mix.hash(world.scenario.seed, 0xC4, UInt64(event.index))) < world.scenario.faults.channelChurnShare
        {
            // The backend pushes to the channel it has just deleted and replaced: an id APNs no longer knows.
            JSONWriter.append("-deleted", to: &channel)
        }
        let app = world.sourceApp[source]
        payload.withUnsafeBytes { p in
            pushType.withUnsafeBytes { pt in
                topics[app].withUnsafeBytes { tp in
                    channel.withUnsafeBytes { ch in
                        let headers = PushHeaders(
                            pushType: .string(pt), topic: .string(tp), priority: .integer(priority),
                            expiration: .integer(0))
                        let t0 = hrtime()
                        var flight = pipeline.begin(kind: .channel, target: ch)
                        guard pipeline.validate(&flight, headers: headers, payload: p, countsVerdict: owner) == nil
                        else { return }
                        let t1 = hrtime()
                        guard case .routed = pipeline.route(&flight, countsVerdict: owner),
                            case .channel(let c) = flight.resolution
                        else { return }
                        let t2 = hrtime()
                        current.record(.validate, nanos: t1 &- t0)
                        current.record(.route, nanos: t2 &- t1)
                        let next = applySubscribers(event, flight, channel: c, from: 0, yieldAt: yieldAtNanos)
                        if next < pipeline.router.subscribers[Int(c)].count {
                            // Interrupted: keep the payload and the position for `runSlice`.
                            slices.append(
                                Slice(
                                    event: event, channel: c, next: Int32(next), priority: priority,
                                    payloadStart: Int32(sliceBytes.count), payloadCount: Int32(p.count), done: false))
                            sliceBytes.append(contentsOf: p)
                            slicesPerSource[source] += 1
                            slicedFanouts += 1
                        }
                    }
                }
            }
        }
    }

    /// Applies a broadcast by the local subscribers from index `first`; the clock is read once per
    /// batch of 64 and the batch recorded with that (latest) time, an upper bound for its members.
    /// Stops after a batch once the clock has passed `yieldAt`; returns where it stopped (the
    /// subscriber count when done).
    func applySubscribers(
        _ event: SourceEvent, _ flight: Pipeline.InFlight, channel c: Int32, from first: Int,
        yieldAt: UInt64
    ) -> Int {
        let nowMs = nowMillis(event)
        var batch: UInt64 = 0
        var applied: UInt64 = 0
        var k = first
        let subscriberCount = pipeline.router.subscribers[Int(c)].count
        let applyStart = hrtime()
        let mayYield = yieldAt != .max && yieldForSource != event.source
        let earliestYield = now() &+ WorkerEngine.sliceQuantumNanos
        while k < subscriberCount {
            let a = pipeline.router.subscribers[Int(c)][k]
            k += 1
            if isOffline(a, event) {
                // Broadcasts carry expiration 0: APNs does not store them for offline devices.
                pipeline.settle(.expired, for: a)
                continue
            }
            pipeline.deliver(flight, to: a, nowMillis: nowMs)
            payCost()
            maybeDismiss(a, event)
            batch += 1
            if batch == 64 || k == subscriberCount {
                let end = recordBatch(event, count: batch)
                applied += batch
                batch = 0
                if mayYield && end >= yieldAt && end >= earliestYield && k < subscriberCount { break }
            }
        }
        if batch > 0 {
            recordBatch(event, count: batch)
            applied += batch
        }
        if applied > 0 {
            current.record(.apply, nanos: (hrtime() &- applyStart) / applied, count: applied)
        }
        return k
    }

    @inline(__always) @discardableResult
    private func recordBatch(_ event: SourceEvent, count: UInt64) -> UInt64 {
        let end = now()
        let latency = end &- min(end, event.intendedNanos)
        current.record(.endToEnd, nanos: latency, count: count)
        _ = interval.record(min(latency, LatencyRecorder.highestTrackableNanos), count: count)
        let e = event.index - completionBase
        local.lastNanos[e] = max(local.lastNanos[e], end)
        local.recipients[e] &+= Int32(count)
        return end
    }

    @inline(__always)
    func delivered(_ a: Int32, _ event: SourceEvent, endNanos: UInt64, count: UInt64) {
        let latency = endNanos &- min(endNanos, event.intendedNanos)
        current.record(.endToEnd, nanos: latency)
        _ = interval.record(min(latency, LatencyRecorder.highestTrackableNanos))
        let e = event.index - completionBase
        local.lastNanos[e] = max(local.lastNanos[e], endNanos)
        local.recipients[e] &+= 1
        maybeDismiss(a, event)
    }

    @inline(__always)
    private func maybeDismiss(_ a: Int32, _ event: SourceEvent) {
        let key = UInt64(globalDevice(a)) << 8 | UInt64(slot[Int(a)])
        if Mix.unit(Mix.hash(world.scenario.seed, 0xD1, UInt64(event.index), key)) < world.scenario.faults.dismissShare
        {
            pipeline.dismiss(a, nowMillis: nowMillis(event))
        }
    }

}
