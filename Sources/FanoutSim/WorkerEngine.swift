import FanoutCore
import FanoutMetrics

/// One worker's share of a run: its slice of the devices (device `d` belongs to worker `d % n`), its
/// own `Pipeline`, its own recorder. It reads the run's events from the shared `EventFeed` (each
/// scheduled and encoded once for all workers) and does work only for the events that reach one of its
/// devices; only its thread touches it (shared-nothing, wrk2's model).
///
/// Per source event: each token push is validated, routed and applied on its own; a broadcast is
/// validated (and its content decoded) once and applied by every local subscriber. Rules read the
/// virtual clock of the event's intended time, so counts do not depend on timing, worker count or
/// machine.
///
/// Time: in virtual time the worker is a single server whose service times come from the scenario's
/// `CostModel` — an event starts at max(its intended time, the end of the previous one) and each stage
/// adds its modelled cost — so a run is a pure function of scenario and seed and reads no clock. In real
/// time the monotonic clock is read where the sampling rule says (`docs/SCENARIOS.md`, Sampling).
///
/// The properties the delivery loop touches are `@exclusivity(unchecked)`: only this worker's thread
/// touches the engine, and no access to one of them overlaps another (a dynamic check per delivery
/// cost more than the delivery's bookkeeping).
public final class WorkerEngine {
    public let world: World
    public let index: Int
    public let count: Int
    public let pipeline: Pipeline
    /// The current interval's histograms: every sample is recorded here, once.
    public let recorder = IntervalRecorder()
    @exclusivity(unchecked) var currentInterval = 0
    /// Finished intervals not yet handed to the coordinator (`takeFinished` empties it once a second).
    public internal(set) var finishedIntervals: [WorkerInterval] = []
    /// The interval being recorded (every earlier one is finished).
    public var intervalIndex: Int { currentInterval }
    /// Local completion per event, for the events from `completionBase` on (earlier ones were handed
    /// over by `takeFinished`): the intended time, nanoseconds after the run start when the last local
    /// recipient was applied (0: none) and the number of local recipients.
    @exclusivity(unchecked) public internal(set) var local = EventCompletions()
    @exclusivity(unchecked) public internal(set) var completionBase = 0
    /// The most events whose completion columns were held at once (a check that they stay bounded).
    @exclusivity(unchecked) public internal(set) var peakRetainedEvents = 0
    /// Events this worker did work for, and events it had no recipient for (and so did nothing for).
    @exclusivity(unchecked) public internal(set) var eventsProcessed = 0
    @exclusivity(unchecked) public internal(set) var eventsSkipped = 0

    // Local activities (index = the pipeline's activity id): the global device number, the slot on
    // the device, the update token's generation.
    @exclusivity(unchecked) var deviceOf: [Int32] = []
    @exclusivity(unchecked) var slot: [UInt8] = []
    @exclusivity(unchecked) var generation: [UInt32] = []
    /// Local followers of each token-delivered source.
    @exclusivity(unchecked) var followers: [[Int32]]
    /// `faults.kickoff` in `fanout serve` (`World.defersKickoff`): the (device, slot) pairs whose activities were
    /// not built at start because their source starts by push-to-start, in build order.
    public internal(set) var kickoffSlots: [(device: Int32, slot: UInt8)] = []
    /// Per broadcast source: its channel's id in the router, and its local subscribers.
    var channelOfSource: [Int32]
    @exclusivity(unchecked) var subscriberCount: [Int]

    // Scratch, reused for every push: the token a push goes to (no array: the per-push path writes it in
    // place), names while populating.
    let tokenScratch = UnsafeMutablePointer<UInt8>.allocate(capacity: World.tokenBytes)
    @exclusivity(unchecked) var token: [UInt8] = []
    @exclusivity(unchecked) var channel: [UInt8] = []
    let topics: [[UInt8]]
    let pushType = Array("liveactivity".utf8)

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
    @exclusivity(unchecked) var held: [Held] = []
    @exclusivity(unchecked) var heldBytes: [UInt8] = []
    /// Superseded records still in `held`; compacted away once they are the majority, so with
    /// coalescing the storage follows the offline activities, not the traffic to them.
    var heldSuperseded = 0
    /// Compaction starts at this many superseded records (tests move it); and how often it ran.
    var heldCompactAt = 1024
    var heldCompactions = 0
    /// The most records `held` had at once.
    var peakHeld = 0
    /// The newest held push of each activity that has one (sparse: only offline devices).
    @exclusivity(unchecked) var latestHeld: [Int32: Int32] = [:]

    // Broadcasts applied in slices (real time, `sliceBroadcasts`): a fan-out stops at a batch boundary
    // once the next scheduled event is due (`yieldAtNanos`); the rest waits here, first in first out,
    // with a copy of its payload.
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
    @exclusivity(unchecked) var slicesPerSource: [Int32]
    /// Real time: the intended time and source of the next scheduled event (set by the worker loop
    /// before each `process` or `runSlice`); a broadcast yields once the clock passes it, unless that
    /// event is of the same source (it would wait for the broadcast anyway). `.max`: never yield.
    public var yieldAtNanos: UInt64 = .max
    public var yieldForSource = -1
    /// A broadcast applies for at least this long before it yields.
    public static let sliceQuantumNanos: UInt64 = 250_000
    /// Broadcast fan-outs that were interrupted at least once.
    public internal(set) var slicedFanouts = 0

    // Time: nanoseconds since the run start.
    /// True in virtual time (the cost model), false once `startRealClock` is called.
    public private(set) var virtual = true
    var realStart: UInt64 = 0
    let hrtime: @Sendable () -> UInt64
    let model: CostModel
    /// Virtual time: the end of the previous event's service, and the instant the current one has reached.
    @exclusivity(unchecked) var busyUntil: UInt64 = 0
    @exclusivity(unchecked) var t: UInt64 = 0
    /// Virtual time: the model's stage costs; one delivery's apply is the model's, or the scenario's
    /// artificial cost when larger.
    let validateStep: UInt64
    let routeStep: UInt64
    let decodeStep: UInt64
    let applyStep: UInt64
    /// The scenario's artificial service time per delivery (0: none); in real time the instant (hrtime)
    /// the deliveries have paid for so far.
    let costNanos: UInt64
    @exclusivity(unchecked) var costDeadline: UInt64 = 0
    /// Real time: stages are timed for one push in `sampleEvery` and one broadcast recipient in as many.
    let sampleEvery: Int
    @exclusivity(unchecked) var pushCounter = 0
    @exclusivity(unchecked) var recipientCounter = 0
    /// Clock reads for measurements (real time; none in virtual time).
    @exclusivity(unchecked) public internal(set) var clockReads = 0

    // The scenario's fault parameters, read once.
    let seed: UInt64
    let dismissShare: Double
    let rotationShare: Double
    let channelChurnShare: Double
    let offlineShare: Double
    let offlineWindowSeconds: Double
    let expirationSeconds: Int64?
    let coalescing: Bool

    /// `progress` counts the devices populated, in batches (a long build's progress line).
    public init(
        world: World, index: Int, count: Int, hrtime: @escaping @Sendable () -> UInt64,
        progress: ProgressCounter? = nil
    ) {
        self.world = world
        self.index = index
        self.count = count
        self.hrtime = hrtime
        let scenario = world.scenario
        model = scenario.costModel
        costNanos = UInt64(scenario.costNanosPerDelivery)
        applyStep = max(UInt64(model.applyNanos), costNanos)
        validateStep = UInt64(model.validateNanos)
        routeStep = UInt64(model.routeNanos)
        decodeStep = UInt64(model.decodeNanos)
        sampleEvery = scenario.stageSampleEvery
        seed = scenario.seed
        dismissShare = scenario.faults.dismissShare
        rotationShare = scenario.faults.rotationShare
        channelChurnShare = scenario.faults.channelChurnShare
        offlineShare = scenario.faults.offline?.share ?? 0
        offlineWindowSeconds = scenario.faults.offline?.windowSeconds ?? 1
        expirationSeconds = scenario.faults.offline.map { Int64($0.expirationSeconds) }
        coalescing = scenario.faults.coalescing
        pipeline = Pipeline(schemas: world.schemas, rules: scenario.rules)
        followers = Array(repeating: [], count: scenario.sources.count)
        channelOfSource = Array(repeating: -1, count: scenario.sources.count)
        subscriberCount = Array(repeating: 0, count: scenario.sources.count)
        slicesPerSource = Array(repeating: 0, count: scenario.sources.count)
        topics = scenario.apps.map { Array(($0.bundle + ".push-type.liveactivity").utf8) }
        heldBytes.reserveCapacity(1 << 16)
        tokenScratch.initialize(repeating: 0, count: World.tokenBytes)
        channel.reserveCapacity(64)
        populate(progress: progress)
    }

    deinit { tokenScratch.deallocate() }

    public var activityCount: Int { slot.count }

    /// The source each activity built at start follows (what `world.source(device:slot:)` draws for its device and
    /// slot), read back from the sources' followers and the channels' subscribers instead of drawn again; -1 where
    /// neither lists it (an activity ended or moved since: draw it). O(activities).
    public func sourcesOfActivities() -> [Int32] {
        var out = [Int32](repeating: -1, count: activityCount)
        for (s, list) in followers.enumerated() {
            for a in list where Int(a) < out.count { out[Int(a)] = Int32(s) }
        }
        for (s, c) in channelOfSource.enumerated() where c >= 0 {
            for a in pipeline.router.subscribers[Int(c)] where Int(a) < out.count { out[Int(a)] = Int32(s) }
        }
        return out
    }

    /// The global device number and the slot on it of local activity `a` (names and tokens derive from them).
    public func deviceAndSlot(of a: Int32) -> (device: Int, slot: Int) {
        (Int(deviceOf[Int(a)]), Int(slot[Int(a)]))
    }

    /// The source local activity `a` follows.
    public func source(of a: Int32) -> Int {
        let (d, k) = deviceAndSlot(of: a)
        return world.source(device: d, slot: k)
    }

    /// Rotates local activity `a`'s update token to its next generation (the old one stops routing at once)
    /// and returns the old and the new token.
    public func rotateToken(of a: Int32) -> (old: [UInt8], new: [UInt8]) {
        let i = Int(a)
        var old: [UInt8] = []
        var new: [UInt8] = []
        world.appendToken(device: Int(deviceOf[i]), slot: Int(slot[i]), generation: generation[i], to: &old)
        generation[i] += 1
        world.appendToken(device: Int(deviceOf[i]), slot: Int(slot[i]), generation: generation[i], to: &new)
        new.withUnsafeBytes { pipeline.rotate(a, token: $0) }
        return (old, new)
    }

    /// Switches to real time: event times are nanoseconds after `start` on the monotonic clock.
    public func startRealClock(atHrtime start: UInt64) {
        virtual = false
        realStart = start
    }

    /// Interval lengths of the histogram log.
    public static let realIntervalNanos: UInt64 = 1_000_000_000
    public static let virtualIntervalNanos: UInt64 = 60_000_000_000

    public var intervalNanos: UInt64 { virtual ? WorkerEngine.virtualIntervalNanos : WorkerEngine.realIntervalNanos }

    // MARK: Time

    /// Reads the monotonic clock (real time only) and counts the read: the sampling rule's cost.
    @inline(__always)
    func readClock() -> UInt64 {
        clockReads &+= 1
        return hrtime()
    }

    /// Real time: nanoseconds since the run start on the monotonic clock.
    @inline(__always)
    func realNow() -> UInt64 { readClock() &- realStart }

    @inline(__always)
    func nowMillis(_ event: SourceEvent) -> Int64 {
        world.epochSeconds * 1000 + Int64(event.intendedNanos / 1_000_000)
    }

    // MARK: Events

    /// Handles event `k` of a batch from the feed.
    public func process(_ batch: EventBatch, _ k: Int) {
        let event = batch.events[k]
        // Per-source order: a newer event of a source waits until that source's earlier fan-outs have
        // reached every local subscriber.
        if event.source >= 0, slicesPerSource[event.source] > 0 { finishSlices(of: event.source) }
        let e = event.index - completionBase
        while local.count <= e {
            local.intendedNanos.append(0)
            local.lastNanos.append(0)
            local.recipients.append(0)
        }
        peakRetainedEvents = max(peakRetainedEvents, local.count)
        local.intendedNanos[e] = event.intendedNanos
        let sends = batch.sends(k)
        let work: Bool
        switch event.kind {
        case .offlineWindowEnd: work = !held.isEmpty
        case .update, .end:
            if !sends {
                work = false
            } else if world.sourceIsBroadcast[event.source] {
                work = subscriberCount[event.source] > 0 || ownsVerdict(of: event.source)
            } else {
                work = !followers[event.source].isEmpty
            }
        }
        // The encode is the backend's, once per event: one worker records its sample.
        let recordsEncode = sends && batch.encodeSampled[k] && event.index % count == index
        guard work || recordsEncode else {
            eventsSkipped += 1
            return
        }
        let start: UInt64
        if virtual {
            start = max(event.intendedNanos, busyUntil)
            t = start
            advanceInterval(to: Int(event.intendedNanos / WorkerEngine.virtualIntervalNanos))
        } else {
            start = realNow()
            advanceInterval(to: Int(start / WorkerEngine.realIntervalNanos))
        }
        if recordsEncode { recorder.record(.encode, nanos: batch.encodeNanos[k]) }
        guard work else { return }
        recorder.record(.scheduleLag, nanos: start &- min(start, event.intendedNanos))
        eventsProcessed += 1
        startCost(event)
        switch event.kind {
        case .offlineWindowEnd: flushHeld(event)
        case .update, .end:
            let from = Int(batch.payloadStart[k])
            let to = Int(batch.payloadStart[k + 1])
            batch.payload.withUnsafeBytes { bytes in
                let payload = UnsafeRawBufferPointer(rebasing: bytes[from..<to])
                let priority = Int64(batch.priority[k])
                if world.sourceIsBroadcast[event.source] {
                    broadcastPush(event, payload: payload, priority: priority)
                } else {
                    tokenPushes(event, payload: payload, priority: priority)
                }
            }
        }
        if virtual { busyUntil = t }
    }

    /// One worker of one shard counts a broadcast push's verdict; every worker applies it to its
    /// subscribers.
    @inline(__always)
    func ownsVerdict(of source: Int) -> Bool {
        source % count == index && world.shard.countsBroadcast(source: source)
    }

    func advanceInterval(to next: Int) {
        if next != currentInterval {
            finishInterval()
            currentInterval = next
        }
    }

    // MARK: Recording

    /// One delivery, applied at `endNanos` (virtual or real): its end-to-end latency and the event's
    /// local completion.
    @inline(__always)
    func delivered(_ a: Int32, _ event: SourceEvent, endNanos: UInt64) {
        recorder.record(.endToEnd, nanos: endNanos &- min(endNanos, event.intendedNanos))
        let e = event.index &- completionBase
        if endNanos > local.lastNanos[e] { local.lastNanos[e] = endNanos }
        local.recipients[e] &+= 1
        maybeDismiss(a, event)
    }

    /// A person dismisses the activity, by the scenario's per-delivery chance.
    @inline(__always)
    func maybeDismiss(_ a: Int32, _ event: SourceEvent) {
        guard dismissShare > 0 else { return }
        let key = UInt64(UInt32(bitPattern: deviceOf[Int(a)])) &<< 8 | UInt64(slot[Int(a)])
        if Mix.unit(Mix.hash(seed, 0xD1, UInt64(event.index), key)) < dismissShare {
            pipeline.dismiss(a, nowMillis: nowMillis(event))
        }
    }
}
