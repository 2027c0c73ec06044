import FanoutCore
import FanoutSim

/// The scenario's source events as `fanout serve` expects them (`--expect-events`, docs/INGEST.md §5): the same
/// `EventSchedule` `fanout run` plays, every update or end a source sends (an offline window's end sends nothing, and
/// neither does an update of a source that has ended), as compact columns. Built once, read by every event loop.
///
/// A push is matched to its event by (the activity's source, `aps.timestamp`): `find`. Within a source, events are
/// ranked by timestamp — the order the device keeps (DOMAIN §3.4: an older timestamp is ignored) — so "newer" below
/// means a higher rank. Two events of one source with the same timestamp (possible only with the scenario's
/// out-of-order fault) cannot be told apart by a push: the later is left out and counted in `sharedTimestamps`.
///
/// Memory: ~45 bytes per event here and two columns per source; each loop's `EventTracker` adds ~28 bytes per event
/// and 8 per activity (its source, its newest event). `million` (4,280 events, 5 million activities) adds ~40 MB.
public final class ServeEvents: @unchecked Sendable {
    // @unchecked: every column is immutable after init; `t0` is touched only under its mutex.
    /// Per event (its number is its position in the schedule among the events kept): the source, update (0) or end
    /// (1), the push's `aps.timestamp`, and its intended offset from t0 in nanoseconds (ascending).
    public let source: [Int32]
    public let kind: [UInt8]
    /// The scenario's own out-of-order events (`faults.outOfOrderShare`): older timestamps sent later, so their
    /// deliveries after a newer event are the scenario's reordering, not the backend's.
    public let outOfOrder: [Bool]
    public let timestamp: [Int64]
    public let offsetNanos: [UInt64]
    /// The content record the trigger carries for the event (`World.makeContent`), hashed as the pipeline hashes an
    /// applied one (`Pipeline.contentHash`): a delivery whose record differs is `wrongContent`.
    public let contentHash: [UInt64]
    /// Each event's number in the scenario's schedule (`SourceEvent.index`: its content is made from it).
    public let scheduleIndex: [Int]
    /// Each event's rank among its source's events (by timestamp, then schedule order).
    public let rank: [Int32]
    /// Source `s`'s events in rank order: `bySource[sourceStart[s] ..< sourceStart[s + 1]]`.
    public let sourceStart: [Int32]
    public let bySource: [Int32]
    /// The activities following each source at start, every event loop together (token followers and channel
    /// subscribers alike).
    public let followers: [Int32]
    /// The app (bundle id) of each source, and the source's name (`source-00042`, as population.jsonl names it).
    public let sourceApp: [Int]
    /// Events left out because their source already had one with the same timestamp.
    public let sharedTimestamps: Int

    private let lock = Lock()
    private var t0: UInt64 = 0

    public var count: Int { source.count }

    /// The events of `world`'s scenario; `followers[s]`: the activities following source `s`.
    public init(world: World, followers: [Int32]) {
        precondition(followers.count == world.scenario.sources.count, "a follower count per source")
        var schedule = EventSchedule(scenario: world.scenario, world: world)
        let sources = world.scenario.sources.count
        var src: [Int32] = []
        var kinds: [UInt8] = []
        var late: [Bool] = []
        var stamps: [Int64] = []
        var offsets: [UInt64] = []
        var hashes: [UInt64] = []
        var indexes: [Int] = []
        var content: [UInt8] = []
        while let e = schedule.next() {
            guard e.kind != .offlineWindowEnd, !world.hasEnded(e) else { continue }
            src.append(Int32(e.source))
            kinds.append(e.kind == .end ? 1 : 0)
            late.append(world.isOutOfOrder(e))
            stamps.append(world.timestamp(of: e))
            offsets.append(e.intendedNanos)
            let schema = world.appSchema[world.sourceApp[e.source]]
            world.makeContent(schema: schema, event: e.index, source: e.source, final: e.kind == .end, into: &content)
            hashes.append(content.withUnsafeBytes { Pipeline.contentHash($0) })
            indexes.append(e.index)
        }
        // Group by source, then rank by timestamp (schedule order breaks ties); drop repeated timestamps.
        var order = Array(0..<Int32(src.count))
        order.sort { (src[Int($0)], stamps[Int($0)], $0) < (src[Int($1)], stamps[Int($1)], $1) }
        var keep = [Bool](repeating: true, count: src.count)
        var shared = 0
        for i in order.indices.dropFirst() {
            let a = Int(order[i - 1])
            let b = Int(order[i])
            if src[a] == src[b] && stamps[a] == stamps[b] {
                keep[b] = false
                shared += 1
            }
        }
        var newIndex = [Int32](repeating: -1, count: src.count)
        var n: Int32 = 0
        for i in src.indices where keep[i] {
            newIndex[i] = n
            n += 1
        }
        source = src.indices.filter { keep[$0] }.map { src[$0] }
        kind = src.indices.filter { keep[$0] }.map { kinds[$0] }
        outOfOrder = src.indices.filter { keep[$0] }.map { late[$0] }
        timestamp = src.indices.filter { keep[$0] }.map { stamps[$0] }
        offsetNanos = src.indices.filter { keep[$0] }.map { offsets[$0] }
        contentHash = src.indices.filter { keep[$0] }.map { hashes[$0] }
        scheduleIndex = src.indices.filter { keep[$0] }.map { indexes[$0] }
        // `order` groups the events by source in rank order: the kept ones, renumbered, are `bySource`.
        let list = order.filter { keep[Int($0)] }.map { newIndex[Int($0)] }
        var start = [Int32](repeating: 0, count: sources + 1)
        var counts = [Int32](repeating: 0, count: sources)
        for s in source { counts[Int(s)] += 1 }
        for s in 0..<sources { start[s + 1] = start[s] + counts[s] }
        var ranks = [Int32](repeating: 0, count: list.count)
        for s in 0..<sources {
            for p in Int(start[s])..<Int(start[s + 1]) { ranks[Int(list[p])] = Int32(p) - start[s] }
        }
        rank = ranks
        sourceStart = start
        bySource = list
        self.followers = followers
        sourceApp = world.sourceApp
        sharedTimestamps = shared
    }

    /// t0, the instant the events' offsets count from, as a monotonic clock reading (`EventLoop.hrtimeNanos`, the
    /// services' clock). `fanout serve` sets it when serving starts; `--trigger` sets it when it starts the events.
    /// Read once per request (a push, a broadcast's fan-out), under a mutex.
    public var t0Nanos: UInt64 {
        get { lock.withLock { t0 } }
        set { lock.withLock { t0 = newValue } }
    }

    /// The events of source `s`, in rank order.
    @inline(__always)
    public func events(of s: Int) -> ArraySlice<Int32> { bySource[Int(sourceStart[s])..<Int(sourceStart[s + 1])] }

    /// The event of source `s` whose push carries `aps.timestamp` `stamp`, or -1. O(log events of s), no allocation.
    @inline(__always)
    public func find(source s: Int, timestamp stamp: Int64) -> Int32 {
        guard s >= 0 && s + 1 < sourceStart.count else { return -1 }
        var low = Int(sourceStart[s])
        var high = Int(sourceStart[s + 1])
        while low < high {
            let mid = (low + high) / 2
            if timestamp[Int(bySource[mid])] < stamp { low = mid + 1 } else { high = mid }
        }
        guard low < Int(sourceStart[s + 1]), timestamp[Int(bySource[low])] == stamp else { return -1 }
        return bySource[low]
    }

    /// Source `s`'s name as population.jsonl and the trigger name it.
    public static func sourceName(_ s: Int) -> String {
        var out: [UInt8] = []
        JSONWriter.append("source-", to: &out)
        World.appendDecimal(s, width: 5, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
