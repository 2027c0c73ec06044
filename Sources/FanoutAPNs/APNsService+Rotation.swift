import FanoutCore
import FanoutMetrics
import FanoutSim

/// One loop's token rotations while serving (`faults.rotationWhileServing`, docs/INGEST.md §5): which activities
/// rotate when (drawn from the seed at build time, so a run repeats), both tokens of each minted then (the new one is
/// in the loop's token directory from the start, so a push to it routes to this loop), and what became of them.
///
/// A rotation at t0 + `offsetNanos` points the activity at its new token; the old one keeps working for the grace
/// period (`inGrace`), then answers 410 Unregistered with the instant it stopped being valid (`retired`). A push to
/// an old token after its first 410 was answered is counted `sentToUnregistered`. Advanced lazily: each token push
/// compares its arrival with `nextNanos` (one comparison) and steps what fell due before it is judged; the
/// dictionaries are read on the unknown-token path only, never for a token in force.
public struct ServingRotations {
    public struct Rotation: Sendable {
        public var activity: Int32
        /// When it rotates, nanoseconds after t0.
        public var offsetNanos: UInt64
        public var old: [UInt8]
        public var new: [UInt8]
        /// Its registration: population.jsonl's line of the activity with the new token (made with that file).
        public var line: [UInt8] = []
    }

    /// In rotation order (offset, then activity).
    public internal(set) var list: [Rotation] = []
    /// Per local activity its rotation's index in `list` (-1, or empty when nothing rotates), the grace, t0.
    var times = ServingTimes()
    /// Rotations done so far, and old tokens retired so far (both in `list` order: the grace is the same for all).
    public internal(set) var rotated = 0
    public internal(set) var retired = 0
    /// The instant (`EventLoop.hrtimeNanos`) the next rotation or retirement is due; `.max`: none, or not serving.
    var nextNanos: UInt64 = .max
    /// Old tokens in their grace period → their rotation.
    var inGrace: [[UInt8]: Int32] = [:]
    /// Old tokens retired while serving → their rotation; whether each one's 410 was answered once already.
    var retiredIndex: [[UInt8]: Int32] = [:]
    var answered410: [Bool] = []
    /// Pushes to an old token in its grace period (delivered), first 410s answered, pushes after a 410.
    public internal(set) var pushedInGrace = 0
    public internal(set) var answeredUnregistered = 0
    public internal(set) var sentToUnregistered = 0

    /// Rotation `k`'s old token stops working: t0 + its offset + the grace (nanoseconds after t0).
    public func retiredAtNanos(_ k: Int) -> UInt64 { list[k].offsetNanos &+ times.graceNanos }
}

/// What a loop's changes while serving share (its rotations, its app events): per local activity its change's index in
/// the list (-1: none; empty when nothing changes), the grace after each change, and t0 on both clocks once serving
/// starts.
public struct ServingTimes {
    var indexOf: [Int32] = []
    var graceNanos: UInt64 = 0
    var t0Nanos: UInt64 = 0
    var t0UnixMillis: Int64 = 0

    /// The changes of `activities` (one each, in list order) among `activityCount` local activities.
    mutating func plan(_ activities: [Int32], activityCount: Int, graceSeconds: Double) {
        graceNanos = UInt64((graceSeconds * 1e9).rounded())
        indexOf = [Int32](repeating: -1, count: activityCount)
        for (k, a) in activities.enumerated() { indexOf[Int(a)] = Int32(k) }
    }

    /// Serving starts at `t0Nanos` (`t0UnixMillis` on the wall clock); returns when the first change (at
    /// `firstOffsetNanos` after t0) is due, `.max` when there is none.
    mutating func start(t0Nanos: UInt64, t0UnixMillis: Int64, firstOffsetNanos: UInt64?) -> UInt64 {
        self.t0Nanos = t0Nanos
        self.t0UnixMillis = t0UnixMillis
        return firstOffsetNanos.map { t0Nanos &+ $0 } ?? .max
    }
}

extension APNsService {
    /// Draws this loop's rotations while serving (nothing without `faults.rotationWhileServing`); called by `init`.
    func planServingRotations(_ scenario: Scenario) {
        guard let setting = scenario.faults.rotationWhileServing, scenario.faults.rotationShare > 0 else { return }
        let world = engine.world
        let tokens = pipeline.router.updateTokens
        let store = pipeline.store
        var list: [ServingRotations.Rotation] = []
        for a in 0..<Int32(engine.activityCount) {
            let (d, k) = engine.deviceAndSlot(of: a)
            guard let offset = WorkerEngine.servingRotationNanos(scenario, device: d, slot: k) else { continue }
            var old: [UInt8] = []
            tokens.withBytes(store.token[Int(a)]) { WorkerEngine.appendTokenText($0, to: &old) }
            var new: [UInt8] = []
            world.appendToken(device: d, slot: k, generation: 1, to: &new)
            list.append(.init(activity: a, offsetNanos: offset, old: old, new: new))
        }
        list.sort { ($0.offsetNanos, $0.activity) < ($1.offsetNanos, $1.activity) }
        rotations.times.plan(
            list.map(\.activity), activityCount: engine.activityCount, graceSeconds: setting.graceSeconds)
        rotations.answered410 = [Bool](repeating: false, count: list.count)
        rotations.list = list
        // The new tokens' directory hashes, kept apart: the directory is built from them while a build thread writes
        // population.jsonl, which fills `rotations.list[k].line` (no access to `rotations` may overlap that).
        rotationTokenHashes = list.map { $0.new.withUnsafeBytes { TokenDirectory.hash($0) } }
    }

    /// Serving starts: rotation k is due at `t0Nanos` + its offset; `t0UnixMillis` is the same instant on the wall
    /// clock (410's timestamp counts from it, on the devices' clock).
    public func startRotations(t0Nanos: UInt64, t0UnixMillis: Int64) {
        rotations.nextNanos = rotations.times.start(
            t0Nanos: t0Nanos, t0UnixMillis: t0UnixMillis, firstOffsetNanos: rotations.list.first?.offsetNanos)
    }

    /// Rotates and retires what fell due by `now` (a push's arrival; the end of serving, once the loops stopped), in
    /// order.
    public func stepRotations(_ now: UInt64) {
        let t0 = rotations.times.t0Nanos
        while rotations.rotated < rotations.list.count, t0 &+ rotations.list[rotations.rotated].offsetNanos <= now {
            let k = rotations.rotated
            let r = rotations.list[k]
            let (old, new) = engine.rotateToken(of: r.activity)
            precondition(old == r.old && new == r.new, "a rotation while serving mints the token drawn at build")
            rotations.inGrace[r.old] = Int32(k)
            rotations.rotated += 1
        }
        while rotations.retired < rotations.rotated, t0 &+ rotations.retiredAtNanos(rotations.retired) <= now {
            let k = rotations.retired
            let old = rotations.list[k].old
            rotations.inGrace[old] = nil
            rotations.retiredIndex[old] = Int32(k)
            // 410's timestamp: when it stopped being valid, on the devices' clock (UNIX milliseconds).
            retired[old] =
                rotations.times.t0UnixMillis &+ deviceClockOffsetMillis
                &+ Int64(rotations.retiredAtNanos(k) / 1_000_000)
            rotations.retired += 1
        }
        var next = UInt64.max
        if rotations.rotated < rotations.list.count { next = t0 &+ rotations.list[rotations.rotated].offsetNanos }
        if rotations.retired < rotations.rotated { next = min(next, t0 &+ rotations.retiredAtNanos(rotations.retired)) }
        rotations.nextNanos = next
    }

    /// The activity an old token in its grace period still reaches (nil: not one).
    func graceActivity(_ token: ArraySlice<UInt8>) -> Int32? {
        guard !rotations.inGrace.isEmpty, let k = rotations.inGrace[Array(token)] else { return nil }
        rotations.pushedInGrace += 1
        return rotations.list[Int(k)].activity
    }

    /// A push to a token retired while serving, answered 410: the first one per token is APNs telling the backend,
    /// each later one is `sentToUnregistered`; the pair it carried is noted for the judge.
    func noteRetiredPush(_ token: ArraySlice<UInt8>, body: [UInt8]) {
        guard !rotations.retiredIndex.isEmpty, let k = rotations.retiredIndex[Array(token)] else { return }
        if rotations.answered410[Int(k)] {
            rotations.sentToUnregistered += 1
        } else {
            rotations.answered410[Int(k)] = true
            rotations.answeredUnregistered += 1
        }
        tracker?.notePushed(rotations.list[Int(k)].activity, body: body, ServeEventsReport.pushedToRetired)
    }

    /// Keeps the registration line of activity `a` with its new token, when it rotates while serving: `out` holds
    /// the activity's population.jsonl line from `lineStart`, its token's quoted value at `token`.
    func keepRotationLine(_ a: Int32, _ out: [UInt8], lineStart: Int, token: Range<Int>) {
        guard !rotations.times.indexOf.isEmpty, rotations.times.indexOf[Int(a)] >= 0 else { return }
        let k = Int(rotations.times.indexOf[Int(a)])
        var line = Array(out[lineStart..<token.lowerBound])
        rotations.list[k].new.withUnsafeBytes { JSONWriter.appendString($0, to: &line) }
        var end = out.count
        if end > token.upperBound, out[end - 1] == UInt8(ascii: "\n") { end -= 1 }
        line.append(contentsOf: out[token.upperBound..<end])
        rotations.list[k].line = line
    }
}
