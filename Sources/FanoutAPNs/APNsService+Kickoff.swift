import FanoutCore
import FanoutMetrics
import FanoutSim

/// The app's registration of an activity a push-to-start started (`faults.kickoff`), handed by its serving loop to
/// the trigger's loop, which POSTs `line` to `--register` at `dueNanos` (`EventLoop.hrtimeNanos`).
public struct KickoffRegistration: Sendable {
    /// The serving loop, and the activity's number in that loop's `kickoff.list`.
    public var loop: Int
    public var index: Int32
    public var dueNanos: UInt64
    public var line: [UInt8]
    public init(loop: Int, index: Int32, dueNanos: UInt64, line: [UInt8]) {
        self.loop = loop
        self.index = index
        self.dueNanos = dueNanos
        self.line = line
    }
}

/// One loop's kickoff by push-to-start (`faults.kickoff`, docs/INGEST.md §5, *Kickoff*): the activities of its devices
/// that follow a kickoff source are not built at start; each device has a push-to-start token for the source's app
/// (registered with the backend in population.jsonl, with the source), and starts the activity when a push-to-start
/// naming the source in `attributes.source` reaches that token — under the activity's own id and update token (those
/// of its device and slot, as if built: in the loops' token directory from the start, so a push to it routes here
/// from any loop) — unless the device's start budget is spent. The app then registers the new activity after its
/// delay (`post`, to the trigger's loop); the judge follows it from its source's start.
///
/// Read on the push-to-start path only (and once per delivery to an activity started here, for its first update);
/// nothing on an update's path otherwise.
public struct ServingKickoff {
    public struct Pending: Sendable {
        /// The world's device number and the activity's slot on it (its id and update token derive from them).
        public var device: Int32
        public var slot: UInt8
        public var source: Int32
        /// The slot of the device's push-to-start token for the source's app (`World.appendToken`, generation 0):
        /// 0xFFFF when it is the one the device has for the app of its first activity, else 0xFF00 + the app.
        public var startSlot: Int32
    }

    /// The activities waiting to be started, in build order (one per device and source).
    public internal(set) var list: [Pending] = []
    /// (store device, source) → its index in `list`.
    var index: [UInt64: Int32] = [:]
    /// Per entry of `list`: the local activity once started (-1: not started), when it started and when its first
    /// update was delivered (`EventLoop.hrtimeNanos`; 0: not yet), whether a start for it was refused by the budget.
    public internal(set) var activity: [Int32] = []
    public internal(set) var startedNanos: [UInt64] = []
    public internal(set) var firstUpdateNanos: [UInt64] = []
    public internal(set) var refusedByBudget: [Bool] = []
    /// Starts per store device on this loop (push-to-start created activities, expected or not).
    var startsByDevice: [Int32: Int] = [:]
    var budget = Int.max
    /// Start pushes the device refused, its budget spent; start pushes that named no activity of the device waiting
    /// to start (the activity is created all the same, following nothing: its pushes are uncorrelated).
    public internal(set) var budgetRefusals = 0
    public internal(set) var unexpectedStarts = 0
    /// Local activities built at start; one at or past it was started while serving (`.max`: no kickoff).
    public internal(set) var builtActivities = Int32.max
    /// A started activity → its entry of `list`.
    var entryOf: [Int32: Int32] = [:]
    /// The directory hashes of the tokens kickoff answers for on this loop (push-to-start tokens, the activities'
    /// update tokens), made at init (see `rotationTokenHashes`).
    var tokenHashes: [UInt64] = []
    /// Where a started activity's registration goes (set before serving by `fanout serve`; nil: nowhere, counted as
    /// not registered).
    public var post: (@Sendable (KickoffRegistration) -> Void)?

    /// The push-to-start `timestamp` of every kickoff (`World.epochSeconds` − 2): even, so no out-of-order event
    /// shares it, and below every in-order event's, so each update after the start is newer on the device.
    public static func startTimestamp(epochSeconds: Int64) -> Int64 { epochSeconds - 2 }
}

extension APNsService {
    /// Plans this loop's kickoff (nothing unless `World.defersKickoff`); called by `init` once the built activities'
    /// push-to-start tokens are set.
    func planKickoff() {
        let world = engine.world
        guard world.defersKickoff, let setting = world.scenario.faults.kickoff else { return }
        kickoff.builtActivities = Int32(engine.activityCount)
        kickoff.budget = setting.startBudget
        // The app of each device's push-to-start token so far: that of its first built activity.
        var firstApp: [Int32: Int] = [:]
        for a in 0..<Int32(engine.activityCount) {
            let (d, k) = engine.deviceAndSlot(of: a)
            if firstApp[Int32(d)] == nil { firstApp[Int32(d)] = world.sourceApp[world.source(device: d, slot: k)] }
        }
        var token: [UInt8] = []
        var device: [UInt8] = []
        var set: Set<UInt64> = []
        for (d, k) in engine.kickoffSlots {
            let source = world.source(device: Int(d), slot: Int(k))
            let app = world.sourceApp[source]
            let startSlot = firstApp[d] == app ? 0xFFFF : 0xFF00 + app
            token.removeAll(keepingCapacity: true)
            world.appendToken(device: Int(d), slot: startSlot, generation: 0, to: &token)
            if set.insert(UInt64(UInt32(d)) << 32 | UInt64(startSlot)).inserted, startSlot != 0xFFFF {
                device.removeAll(keepingCapacity: true)
                world.appendDeviceId(Int(d), to: &device)
                let bundle = Array(world.scenario.apps[app].bundle.utf8)
                device.withUnsafeBytes { dev in
                    bundle.withUnsafeBytes { b in
                        token.withUnsafeBytes { pipeline.setStartToken(device: dev, app: b, token: $0) }
                    }
                }
                kickoff.tokenHashes.append(token.withUnsafeBytes { TokenDirectory.hash($0) })
            }
            guard case .startToken(let storeDevice, _) = token.withUnsafeBytes({
                pipeline.begin(kind: .startToken, target: $0).resolution
            }) else { preconditionFailure("a kickoff device's push-to-start token is set") }
            let key = UInt64(UInt32(bitPattern: storeDevice)) << 32 | UInt64(source)
            guard kickoff.index[key] == nil else { continue }  // two slots of one device following one source
            kickoff.index[key] = Int32(kickoff.list.count)
            kickoff.list.append(.init(device: d, slot: k, source: Int32(source), startSlot: Int32(startSlot)))
            token.removeAll(keepingCapacity: true)
            world.appendToken(device: Int(d), slot: Int(k), generation: 0, to: &token)
            kickoff.tokenHashes.append(token.withUnsafeBytes { TokenDirectory.hash($0) })
        }
        let n = kickoff.list.count
        kickoff.activity = [Int32](repeating: -1, count: n)
        kickoff.startedNanos = [UInt64](repeating: 0, count: n)
        kickoff.firstUpdateNanos = kickoff.startedNanos
        kickoff.refusedByBudget = [Bool](repeating: false, count: n)
    }

    /// A push-to-start reached store device `device`'s token: the entry of `kickoff.list` it starts (its body's
    /// `aps.attributes.source` names a source the device waits to start an activity of, not started yet), or nil.
    func kickoffEntry(device: Int32, body: [UInt8]) -> Int32? {
        guard !kickoff.list.isEmpty, let s = attributesSource(body) else { return nil }
        guard let k = kickoff.index[UInt64(UInt32(bitPattern: device)) << 32 | UInt64(s)],
            kickoff.activity[Int(k)] < 0
        else { return nil }
        return k
    }

    /// Whether store device `device` may start one more activity by push-to-start (its budget); counts a refusal.
    func kickoffBudgetAllows(device: Int32, entry: Int32?) -> Bool {
        guard kickoff.budget != .max else { return true }
        guard kickoff.startsByDevice[device, default: 0] >= kickoff.budget else { return true }
        kickoff.budgetRefusals += 1
        if let entry { kickoff.refusedByBudget[Int(entry)] = true }
        return false
    }

    /// The id and update token the push-to-start of `entry` creates (those of its device and slot).
    func kickoffIdentity(_ entry: Int32) -> (id: [UInt8], token: [UInt8]) {
        let p = kickoff.list[Int(entry)]
        var id: [UInt8] = []
        engine.world.appendActivityId(device: Int(p.device), slot: Int(p.slot), to: &id)
        var token: [UInt8] = []
        engine.world.appendToken(device: Int(p.device), slot: Int(p.slot), generation: 0, to: &token)
        return (id, token)
    }

    /// Local activity `a` was just created by a push-to-start on store device `device` at `nowNanos`: for `entry`
    /// (a kickoff activity) it follows its source from the source's start, and its app registers it after its delay;
    /// otherwise it follows nothing (`unexpectedStarts`).
    func kickoffStarted(_ a: Int32, device: Int32, entry: Int32?, nowNanos: UInt64) {
        kickoff.startsByDevice[device, default: 0] += 1
        guard let entry else {
            if kickoff.builtActivities != .max {  // a kickoff run: every created activity is adopted
                kickoff.unexpectedStarts += 1
                engine.adoptStarted(a, device: Int(device), slot: 0xFF, source: nil)
            }
            return
        }
        let p = kickoff.list[Int(entry)]
        let world = engine.world
        engine.adoptStarted(a, device: Int(p.device), slot: Int(p.slot), source: Int(p.source))
        kickoff.activity[Int(entry)] = a
        kickoff.startedNanos[Int(entry)] = nowNanos
        kickoff.entryOf[a] = entry
        if tracker != nil { tracker!.follow(a, source: p.source, fromNanos: world.kickoffOffsetNanos[Int(p.source)]) }
        let delay = WorkerEngine.kickoffAppDelayNanos(world.scenario, device: Int(p.device), slot: Int(p.slot))
        kickoff.post?(
            KickoffRegistration(
                loop: worker, index: entry, dueNanos: nowNanos &+ delay, line: kickoffLine(entry, started: true)))
    }

    /// A correlated update was delivered to `a` at `nowNanos` (called for activities started while serving only).
    @inline(never)
    func noteKickoffDelivery(_ a: Int32, _ nowNanos: UInt64) {
        guard let entry = kickoff.entryOf[a], kickoff.firstUpdateNanos[Int(entry)] == 0 else { return }
        kickoff.firstUpdateNanos[Int(entry)] = nowNanos
    }

    /// `aps.attributes.source` of a push-to-start's body (`source-NNNNN`, as population.jsonl names sources), or nil.
    func attributesSource(_ body: [UInt8]) -> Int? {
        var tape = JSONTape()
        return body.withUnsafeBytes { bytes -> Int? in
            guard tape.scan(bytes) == nil else { return nil }
            let doc = tape.reading(bytes)
            guard doc.count > 0 else { return nil }
            let aps = doc.member(0, "aps")
            let attributes = aps >= 0 ? doc.member(aps, "attributes") : -1
            let source = attributes >= 0 ? doc.member(attributes, "source") : -1
            guard source >= 0, doc[source].kind == .string else { return nil }
            var name: [UInt8] = []
            doc.appendUnescaped(source, to: &name)
            let prefix = Array("source-".utf8)
            guard name.count > prefix.count, name.count <= prefix.count + 9, Array(name.prefix(prefix.count)) == prefix
            else { return nil }
            var value = 0
            for c in name.dropFirst(prefix.count) {
                guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(c - UInt8(ascii: "0"))
            }
            return value < engine.world.sourceApp.count ? value : nil
        }
    }

    /// Entry `k`'s line for `--register` (docs/INGEST.md §5, *Kickoff*): before serving (`started: false`) the
    /// device's push-to-start token and the source it will follow, `activity` and `token` null; once started, the
    /// activity's id and update token too.
    public func kickoffLine(_ k: Int32, started: Bool) -> [UInt8] {
        let p = kickoff.list[Int(k)]
        let world = engine.world
        let app = world.sourceApp[Int(p.source)]
        var out: [UInt8] = []
        out.reserveCapacity(400)
        JSONWriter.append(PopulationLine.device, to: &out)
        var scratch: [UInt8] = []
        world.appendDeviceId(Int(p.device), to: &scratch)
        scratch.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        JSONWriter.append(PopulationLine.app, to: &out)
        JSONWriter.appendString(world.scenario.apps[app].bundle, to: &out)
        let (id, token) = kickoffIdentity(k)
        /// `value` as a JSON string once started, `null` before.
        func once(_ value: [UInt8]) {
            guard started else { return JSONWriter.append("null", to: &out) }
            value.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        }
        JSONWriter.append(PopulationLine.activity, to: &out)
        once(id)
        JSONWriter.append(PopulationLine.type, to: &out)
        JSONWriter.appendString(world.scenario.apps[app].schema, to: &out)
        JSONWriter.append(PopulationLine.token, to: &out)
        once(token)
        JSONWriter.append(PopulationLine.startToken, to: &out)
        scratch.removeAll(keepingCapacity: true)
        world.appendToken(device: Int(p.device), slot: Int(p.startSlot), generation: 0, to: &scratch)
        scratch.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        JSONWriter.append(PopulationLine.channel, to: &out)
        JSONWriter.append("null", to: &out)
        JSONWriter.append(PopulationLine.source, to: &out)
        scratch.removeAll(keepingCapacity: true)
        world.appendChannelId(source: Int(p.source), to: &scratch)
        scratch.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        JSONWriter.append(started ? "}" : "}\n", to: &out)
        return out
    }
}

extension APNsService {
    /// Where this loop's started activities' registrations go (`fanout serve`, before serving).
    public func postKickoffRegistrations(_ post: @escaping @Sendable (KickoffRegistration) -> Void) {
        kickoff.post = post
    }
}
