import FanoutCore
import FanoutMetrics

/// What every worker knows alike about a run (read-only, shared): the sources, their apps, how
/// they are delivered and when they end, and how devices and activities are named. Everything is
/// derived from the scenario and its seed.
public final class World: Sendable {
    public let scenario: Scenario
    public let schemas: SchemaSet
    public let zipf: Zipf
    /// App index of each source.
    public let sourceApp: [Int]
    /// Delivered by broadcast channel (else one push per token).
    public let sourceIsBroadcast: [Bool]
    /// When each source ends, in seconds from the start (nil: it does not end in this run).
    public let sourceEndSeconds: [Double?]
    /// Schema id (in `schemas`) of each app.
    public let appSchema: [Int32]
    /// Unix seconds at the start of the run (the virtual epoch of payload dates).
    public let epochSeconds: Int64
    /// The default virtual epoch (`fanout run`); `fanout serve` passes the real time of its start.
    public static let defaultEpochSeconds: Int64 = 1_700_000_000
    /// The devices this process simulates (all of them unless the run is sharded).
    public let shard: Shard
    /// `faults.kickoff` in `fanout serve` (`kickoff: true`): per source, when its `start` event is intended
    /// (nanoseconds after t0), `.max` for a source whose followers' activities exist from the start (every source
    /// without kickoff, and in `fanout run` and `fanout push`, which ignore the setting).
    public let kickoffOffsetNanos: [UInt64]
    /// Some source starts by push-to-start: its followers' activities are not built at start.
    public let defersKickoff: Bool

    public init(
        scenario: Scenario, shard: Shard = .whole, epochSeconds: Int64 = World.defaultEpochSeconds,
        kickoff: Bool = false
    ) {
        precondition(scenario.apps.count <= 64, "at most 64 apps")
        self.scenario = scenario
        self.epochSeconds = epochSeconds
        self.shard = shard
        schemas = scenario.schemaSet()
        let count = scenario.sources.count
        zipf = Zipf(count: count, exponent: scenario.sources.zipfExponent)
        let totalWeight = scenario.apps.reduce(0) { $0 + $1.weight }
        var apps: [Int] = []
        var broadcast: [Bool] = []
        var ends: [Double?] = []
        for s in 0..<count {
            var u = Mix.unit(Mix.hash(scenario.seed, 0xA9, UInt64(s))) * totalWeight
            var app = 0
            while app < scenario.apps.count - 1 && u >= scenario.apps[app].weight {
                u -= scenario.apps[app].weight
                app += 1
            }
            apps.append(app)
            broadcast.append(Mix.unit(Mix.hash(scenario.seed, 0xBC, UInt64(s))) < scenario.sources.broadcastShare)
            if let lo = scenario.lifecycle.endFractionMin, let hi = scenario.lifecycle.endFractionMax {
                let f = lo + (hi - lo) * Mix.unit(Mix.hash(scenario.seed, 0xE0, UInt64(s)))
                ends.append(f * scenario.durationSeconds)
            } else {
                ends.append(nil)
            }
        }
        sourceApp = apps
        sourceIsBroadcast = broadcast
        sourceEndSeconds = ends
        kickoffOffsetNanos =
            kickoff ? World.kickoffOffsets(scenario, broadcast: broadcast) : Array(repeating: .max, count: count)
        defersKickoff = kickoffOffsetNanos.contains { $0 != .max }
        let schemaSet = schemas
        appSchema = scenario.apps.map { schemaSet.id(named: $0.schema)! }
    }

    /// `faults.kickoff`'s sources (a `share` of the token sources, by a hash of the seed and the source) and their
    /// start instants: the j-th of n at `atSeconds` + `overSeconds` × j / n, in source order.
    static func kickoffOffsets(_ scenario: Scenario, broadcast: [Bool]) -> [UInt64] {
        var out = [UInt64](repeating: .max, count: broadcast.count)
        guard let k = scenario.faults.kickoff else { return out }
        let chosen = broadcast.indices.filter {
            !broadcast[$0] && Mix.unit(Mix.hash(scenario.seed, 0xC0, UInt64($0))) < k.share
        }
        for (j, s) in chosen.enumerated() {
            let seconds = k.atSeconds + k.overSeconds * Double(j) / Double(chosen.count)
            out[s] = UInt64((seconds * 1e9).rounded(.down))
        }
        return out
    }

    /// Whether source `s`'s followers start their activities by push-to-start (`faults.kickoff`, serve only).
    @inline(__always)
    public func startsByKickoff(_ s: Int) -> Bool { kickoffOffsetNanos[s] != .max }

    /// Activities device `d` requests.
    @inline(__always)
    public func activityCount(device d: Int) -> Int {
        let p = scenario.population
        let span = UInt64(p.activitiesPerDeviceMax - p.activitiesPerDeviceMin + 1)
        return p.activitiesPerDeviceMin + Int(Mix.hash(scenario.seed, 0xDE, UInt64(d)) % span)
    }

    /// The apps installed on device `d`, as a bit set of app indices: a uniform count in
    /// `appsPerDevice`, the apps picked by a seeded shuffle.
    @inline(__always)
    public func installedApps(device d: Int) -> UInt64 {
        let p = scenario.population
        let appCount = scenario.apps.count
        if p.appsPerDeviceMin >= appCount { return appCount >= 64 ? ~0 : (1 << UInt64(appCount)) - 1 }
        let span = UInt64(p.appsPerDeviceMax - p.appsPerDeviceMin + 1)
        let k = p.appsPerDeviceMin + Int(Mix.hash(scenario.seed, 0xAA, UInt64(d)) % span)
        var chosen: UInt64 = 0
        var picked = 0
        var salt: UInt64 = 0
        while picked < k {
            let app = Int(Mix.hash(scenario.seed, 0xAB, UInt64(d), salt) % UInt64(appCount))
            salt += 1
            if chosen & (1 << UInt64(app)) == 0 {
                chosen |= 1 << UInt64(app)
                picked += 1
            }
        }
        return chosen
    }

    /// The source the `k`-th activity of device `d` follows: by popularity, among the sources of the
    /// device's installed apps (redrawn until one fits; after 64 draws, the most popular source of
    /// an installed app).
    @inline(__always)
    public func source(device d: Int, slot k: Int) -> Int {
        let installed = installedApps(device: d)
        for draw in 0..<64 {
            let s = zipf.sample(Mix.unit(Mix.hash(scenario.seed, 0xF0, UInt64(d), UInt64(k) | UInt64(draw) << 32)))
            if installed & (1 << UInt64(sourceApp[s])) != 0 { return s }
        }
        for s in 0..<sourceApp.count where installed & (1 << UInt64(sourceApp[s])) != 0 { return s }
        return 0
    }

    /// Bytes of a generated content record of `schema` (see `WorkerEngine.makeContent`).
    public func recordSize(schema: Int32) -> Int {
        schemas[schema].fields.reduce(0) { total, field in
            switch field.type {
            case .int, .double: total + 9
            case .bool: total + 1
            case .string: total + 5 + scenario.stringBytes
            }
        }
    }

    /// Is device `d` offline during offline window `w`?
    @inline(__always)
    public func offline(device d: Int, window w: Int) -> Bool {
        guard let offline = scenario.faults.offline else { return false }
        return Mix.unit(Mix.hash(scenario.seed, 0x0F, UInt64(d), UInt64(w))) < offline.share
    }

    // MARK: Names (written into caller buffers, no allocation)

    public static func appendDecimal(_ value: Int, width: Int, to out: inout [UInt8]) {
        var digits = 0
        var v = value
        repeat {
            digits += 1
            v /= 10
        } while v > 0
        for _ in digits..<max(width, digits) { out.append(UInt8(ascii: "0")) }
        let start = out.count
        v = value
        repeat {
            out.append(UInt8(ascii: "0") &+ UInt8(v % 10))
            v /= 10
        } while v > 0
        out[start...].reverse()
    }

    public func appendDeviceId(_ d: Int, to out: inout [UInt8]) {
        JSONWriter.append("device-", to: &out)
        World.appendDecimal(d, width: 7, to: &out)
    }

    public func appendActivityId(device d: Int, slot k: Int, to out: inout [UInt8]) {
        appendDeviceId(d, to: &out)
        JSONWriter.append("-a", to: &out)
        World.appendDecimal(k, width: 0, to: &out)
    }

    /// The update token of an activity after `generation` rotations: 64 hex digits.
    public func appendToken(device d: Int, slot k: Int, generation: UInt32, to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: World.tokenBytes))
        out.withUnsafeMutableBufferPointer {
            writeToken(device: d, slot: k, generation: generation, into: $0.baseAddress! + start)
        }
    }

    /// Update tokens are 64 lowercase hex digits.
    public static let tokenBytes = 64

    /// Writes the update token of (device, slot, generation) — `tokenBytes` hex digits — at `out`: the
    /// per-push path, with no array growth or uniqueness check per digit.
    @inline(__always)
    public func writeToken(device d: Int, slot k: Int, generation: UInt32, into out: UnsafeMutablePointer<UInt8>) {
        let seed = scenario.seed ^ 0x70_6B
        let device = UInt64(truncatingIfNeeded: d)
        let slotAndGeneration = UInt64(truncatingIfNeeded: k) &<< 32 | UInt64(generation)
        var p = out
        for part: UInt64 in 0..<4 {
            let h = Mix.hash(seed, device, slotAndGeneration, part)
            var shift: UInt64 = 64
            while shift > 0 {
                shift &-= 4
                let nibble = UInt8(truncatingIfNeeded: (h &>> shift) & 0xF)
                p.pointee = nibble < 10 ? 0x30 &+ nibble : 0x57 &+ nibble
                p += 1
            }
        }
    }

    public func appendChannelId(source s: Int, to out: inout [UInt8]) {
        JSONWriter.append("source-", to: &out)
        World.appendDecimal(s, width: 5, to: &out)
    }

    /// An update of a source after its end time: the source sends nothing more (its end push went out
    /// at the end time).
    @inline(__always)
    public func hasEnded(_ event: SourceEvent) -> Bool {
        guard event.kind == .update, let end = sourceEndSeconds[event.source] else { return false }
        return Double(event.intendedNanos) >= end * 1e9
    }

    /// The `aps.timestamp` of an event's push (UNIX seconds): the run's epoch plus twice the event's index, 21 s
    /// earlier for the scenario's out-of-order share (docs/INGEST.md §5: a backend copies it unchanged). No two
    /// events share a timestamp, by construction: in-order events are on even offsets, out-of-order ones on odd
    /// ones, each from its own index.
    @inline(__always)
    public func timestamp(of event: SourceEvent) -> Int64 {
        let t = epochSeconds + 2 * Int64(event.index)
        return isOutOfOrder(event) ? t - 21 : t
    }

    /// The event is one of the scenario's out-of-order share: its timestamp is older than recent events' (the
    /// scenario's own reordering, counted apart from a backend's).
    @inline(__always)
    public func isOutOfOrder(_ event: SourceEvent) -> Bool {
        Mix.unit(Mix.hash(scenario.seed, 0x00, UInt64(event.index))) < scenario.faults.outOfOrderShare
    }

    /// The content-state of an event (scores from the event, strings of the scenario's length) as a
    /// content record; `event` −1 is the initial content.
    public func makeContent(schema: Int32, event: Int, source: Int, final: Bool, into content: inout [UInt8]) {
        content.removeAll(keepingCapacity: true)
        let seed = scenario.seed
        let fields = schemas[schema].fields
        for (f, field) in fields.enumerated() {
            let h = Mix.hash(seed, UInt64(bitPattern: Int64(event)), UInt64(source), UInt64(f))
            switch field.type {
            case .int: ContentRecord.appendInt(Int64(h % 10), to: &content)
            case .double: ContentRecord.appendDouble(Double(h % 1000) / 1000, to: &content)
            case .bool: ContentRecord.appendBool(final, to: &content)
            case .string:
                content.append(ContentRecord.Tag.string.rawValue)
                let length = scenario.stringBytes
                withUnsafeBytes(of: UInt32(length).littleEndian) { content.append(contentsOf: $0) }
                var x = h
                for _ in 0..<length {
                    content.append(UInt8(ascii: "a") &+ UInt8(x % 26))
                    x = x / 26 == 0 ? Mix.hash(x, 1) : x / 26
                }
            }
        }
    }
}
