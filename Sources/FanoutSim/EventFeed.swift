import FanoutCore
import FanoutMetrics
import Foundation

/// A run of consecutive source events, scheduled and encoded once for every worker (immutable once
/// made, shared by reference). Event `first + k` is `events[k]`; its payload is
/// `payload[payloadStart[k] ..< payloadStart[k + 1]]`, empty when nothing is sent (an offline
/// window's end, an update of a source that has ended).
public final class EventBatch: Sendable {
    public let first: Int
    public let events: [SourceEvent]
    public let payloadStart: [Int32]
    public let payload: [UInt8]
    /// The push's `apns-priority` (10, 5 or 1).
    public let priority: [Int8]
    /// The encode's service time: measured (real time, every `stageSampleEvery`-th event, else 0) or
    /// the cost model's (virtual time).
    public let encodeNanos: [UInt64]
    /// Whether the encode of event k was timed (its sample goes to the `encode` histogram).
    public let encodeSampled: [Bool]

    init(
        first: Int, events: [SourceEvent], payloadStart: [Int32], payload: [UInt8], priority: [Int8],
        encodeNanos: [UInt64], encodeSampled: [Bool]
    ) {
        self.first = first
        self.events = events
        self.payloadStart = payloadStart
        self.payload = payload
        self.priority = priority
        self.encodeNanos = encodeNanos
        self.encodeSampled = encodeSampled
    }

    public var count: Int { events.count }
    public var end: Int { first + events.count }

    /// Whether event k sends a push (an update or end of a source still running).
    @inline(__always)
    public func sends(_ k: Int) -> Bool { payloadStart[k + 1] > payloadStart[k] }
}

/// The schedule and the encoder of a run, shared by its workers: each batch of events is made once,
/// by the first worker that needs it, and dropped once every worker has taken it. A worker that runs
/// far ahead of the slowest one waits (at most `maximumAhead` batches are kept), so memory stays bounded.
public final class EventFeed: @unchecked Sendable {
    // @unchecked: every mutable member is touched only under `condition`'s lock; batches are immutable.
    private let condition = NSCondition()
    private var producer: BatchProducer
    private var batches: [Int: EventBatch] = [:]
    private var taken: [Int: Int] = [:]
    private var made = 0
    private var finished = false
    private var cancelled = false
    private var oldest = 0
    private let consumers: Int
    /// The most batches kept at once.
    public private(set) var peakKept = 0
    static let maximumAhead = 256

    public init(world: World, consumers: Int, hrtime: @escaping @Sendable () -> UInt64) {
        producer = BatchProducer(world: world, hrtime: hrtime)
        self.consumers = consumers
    }

    /// Batch number `k` (0, 1, 2, …), or nil past the end of the schedule. Each consumer takes each
    /// batch exactly once, in order.
    public func take(_ k: Int) -> EventBatch? {
        condition.lock()
        defer { condition.unlock() }
        while k - oldest >= EventFeed.maximumAhead && !cancelled { condition.wait() }
        if cancelled { return nil }
        while made <= k && !finished {
            if let batch = producer.next(first: producer.emitted) {
                batches[made] = batch
                taken[made] = 0
                made += 1
                peakKept = max(peakKept, batches.count)
            } else {
                finished = true
            }
        }
        guard let batch = batches[k] else { return nil }
        taken[k]! += 1
        if taken[k] == consumers {
            batches[k] = nil
            taken[k] = nil
            while oldest < made && batches[oldest] == nil { oldest += 1 }
            condition.broadcast()
        }
        return batch
    }
}

extension EventFeed {
    /// The run stops early: every waiting and later `take` returns nil.
    public func cancel() {
        condition.lock()
        cancelled = true
        batches.removeAll()
        condition.broadcast()
        condition.unlock()
    }
}

/// A worker's position in the feed.
public struct FeedCursor {
    let feed: EventFeed
    private var batchNumber = 0
    public private(set) var batch: EventBatch?
    public private(set) var position = 0

    public init(feed: EventFeed) {
        self.feed = feed
        batch = feed.take(0)
    }

    /// The next event's batch and index in it, or nil at the end; `advance()` moves past it.
    @inline(__always)
    public mutating func peek() -> (batch: EventBatch, k: Int)? {
        guard let b = batch else { return nil }
        if position == b.count {
            batchNumber += 1
            batch = feed.take(batchNumber)
            position = 0
            guard let next = batch, next.count > 0 else { return nil }
            return (next, 0)
        }
        return (b, position)
    }

    @inline(__always)
    public mutating func advance() { position += 1 }
}

/// Makes batches: the schedule's next events, each update or end encoded once (content, timestamp,
/// relevance, payload faults), as a backend would for all of its recipients.
struct BatchProducer {
    let world: World
    let hrtime: @Sendable () -> UInt64
    var schedule: EventSchedule
    var encoder = PayloadEncoder()
    var content: [UInt8] = []
    var emitted = 0
    var sampleCounter = 0
    /// A batch holds at most this many events, and in real time at most this much of the schedule,
    /// so that encoding runs at most that far ahead of the events' intended times.
    static let maximumEvents = 512
    static let maximumSpanNanos: UInt64 = 100_000_000

    init(world: World, hrtime: @escaping @Sendable () -> UInt64) {
        self.world = world
        self.hrtime = hrtime
        schedule = EventSchedule(scenario: world.scenario, world: world)
        content.reserveCapacity(1024)
    }

    mutating func next(first: Int) -> EventBatch? {
        var events: [SourceEvent] = []
        var starts: [Int32] = [0]
        var payload: [UInt8] = []
        var priorities: [Int8] = []
        var encodeNanos: [UInt64] = []
        var sampled: [Bool] = []
        let scenario = world.scenario
        let virtual = scenario.clock == .virtual
        let model = scenario.costModel
        var spanStart: UInt64?
        while events.count < BatchProducer.maximumEvents, let event = schedule.peek() {
            if let s = spanStart, !virtual, event.intendedNanos &- s > BatchProducer.maximumSpanNanos { break }
            spanStart = spanStart ?? event.intendedNanos
            _ = schedule.next()
            events.append(event)
            var priority: Int8 = 0
            var cost: UInt64 = 0
            var timed = false
            if world.sendsPush(event) {
                let sampleThis = virtual || sampleCounter % scenario.stageSampleEvery == 0
                sampleCounter &+= 1
                let t0 = sampleThis && !virtual ? hrtime() : 0
                encode(event, into: &payload)
                if virtual {
                    cost = UInt64(model.encodeNanos)
                } else if sampleThis {
                    cost = hrtime() &- t0
                }
                timed = sampleThis
                let e = UInt64(event.index)
                let broadcast = world.sourceIsBroadcast[event.source]
                priority =
                    Mix.unit(Mix.hash(scenario.seed, 0x10, e)) < scenario.priority10Share ? 10 : (broadcast ? 1 : 5)
            }
            starts.append(Int32(payload.count))
            priorities.append(priority)
            encodeNanos.append(cost)
            sampled.append(timed)
        }
        emitted += events.count
        guard !events.isEmpty else { return nil }
        return EventBatch(
            first: first, events: events, payloadStart: starts, payload: payload, priority: priorities,
            encodeNanos: encodeNanos, encodeSampled: sampled)
    }

    /// Encodes one update or end and appends its payload (with the scenario's payload faults).
    mutating func encode(_ event: SourceEvent, into payload: inout [UInt8]) {
        let source = event.source
        let app = world.sourceApp[source]
        let e = UInt64(event.index)
        world.makeContent(
            schema: world.appSchema[app], event: event.index, source: source,
            final: event.kind == .end, into: &content)
        let fields = world.fields(of: event)
        let schema = world.schemas[world.appSchema[app]]
        _ = content.withUnsafeBytes { c in
            encoder.encode(
                event: event.kind == .end ? .end : .update, timestamp: fields.timestamp, content: c, schema: schema,
                staleDate: fields.staleDate, dismissalDate: fields.dismissalDate, relevanceScore: fields.relevanceScore)
        }
        let start = payload.count
        encoder.withPayload { payload.append(contentsOf: $0) }
        applyPayloadFaults(e, broadcast: world.sourceIsBroadcast[source], payload: &payload, from: start)
    }

    /// Malformed: the payload is cut in half. Oversized: a padding member pushes it past the limit.
    func applyPayloadFaults(_ e: UInt64, broadcast: Bool, payload: inout [UInt8], from start: Int) {
        let faults = world.scenario.faults
        let u = Mix.unit(Mix.hash(world.scenario.seed, 0xFA, e))
        let count = payload.count - start
        if u < faults.malformedShare {
            payload.removeLast(count / 2)
        } else if u < faults.malformedShare + faults.oversizedShare {
            let limit = broadcast ? 5120 : 4096
            let original = Array(payload[(start + 1)...])
            payload.removeLast(count)
            payload.append(contentsOf: Array("{\"pad\":\"".utf8))
            payload.append(contentsOf: repeatElement(UInt8(ascii: "x"), count: limit))
            payload.append(contentsOf: Array("\",".utf8))
            payload.append(contentsOf: original)
        }
    }
}

/// The fields of a source event's push besides its content, as `fanout run` encodes them and `fanout serve
/// --trigger` sends them to a backend (docs/INGEST.md §5): one definition for both.
public struct SourceEventFields: Sendable, Equatable {
    /// `aps.timestamp` (UNIX seconds): `World.timestamp(of:)`.
    public var timestamp: Int64
    public var staleDate: Int64
    /// `end` events only, when the scenario's lifecycle dismisses after a delay.
    public var dismissalDate: Int64?
    public var relevanceScore: Double
}

extension World {
    /// The push fields of `event` (an update or end).
    public func fields(of event: SourceEvent) -> SourceEventFields {
        let e = UInt64(event.index)
        let seed = scenario.seed
        let nowSeconds = epochSeconds + Int64(event.intendedNanos / 1_000_000_000)
        let dismissal =
            event.kind == .end ? scenario.lifecycle.dismissalAfterSeconds.map { nowSeconds + Int64($0) } : nil
        return SourceEventFields(
            timestamp: timestamp(of: event), staleDate: nowSeconds + 3600, dismissalDate: dismissal,
            relevanceScore: Double(Mix.hash(seed, 0x4E, e) % 100))
    }

    /// Whether `fanout run` sends a push for `event`: an update or end of a source still running (not an offline
    /// window's end, not an update after its source ended).
    public func sendsPush(_ event: SourceEvent) -> Bool {
        event.kind != .offlineWindowEnd && !hasEnded(event)
    }
}
