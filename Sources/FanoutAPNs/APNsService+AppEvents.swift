import FanoutCore
import FanoutMetrics
import FanoutSim

/// One loop's app events while serving (`faults.appEvents`, docs/INGEST.md §5, *App events*): which of its activities
/// the app's side ends, how and when (drawn from the seed at build time, so a run repeats), and the pushes the backend
/// sent to them afterwards.
///
/// At t0 + `offsetNanos` the activity is dismissed on its device (DOMAIN §4: a person may dismiss it at any moment;
/// `disabled`, Live Activities turned off for its app, and `uninstalled` end it the same way), and an `uninstalled`
/// activity's update token stops routing: it answers 410 Unregistered with that instant as its `timestamp`. A token
/// push to such an activity or retired token arriving later than the instant + `graceSeconds` is counted
/// `sentAfterAppEvent` (a backend that ignores what the app told it). Advanced lazily, as rotations are: each token
/// push and each broadcast's fan-out compares its arrival with `nextNanos` (one comparison) and applies what fell due;
/// a push is looked at only once an app event has been applied on this loop.
public struct ServingAppEvents {
    public struct AppEvent: Sendable {
        public var activity: Int32
        public var kind: WorkerEngine.AppEventKind
        /// When it happens, nanoseconds after t0.
        public var offsetNanos: UInt64
        /// The activity's update token (hex text) in force when serving starts.
        public var token: [UInt8]
    }

    /// In due order (offset, then activity).
    public internal(set) var list: [AppEvent] = []
    /// Per local activity its app event's index in `list` (-1, or empty when there is none), the grace, t0.
    var times = ServingTimes()
    /// App events applied so far (a prefix of `list`).
    public internal(set) var applied = 0
    /// When the next one is due (`EventLoop.hrtimeNanos`); `.max`: none, or not serving.
    var nextNanos: UInt64 = .max
    /// The update tokens of uninstalled activities, retired → their app event.
    var uninstalledIndex: [[UInt8]: Int32] = [:]
    /// Token pushes to an ended activity (or retired token) within the grace, and later ones by kind
    /// (`AppEventKind.rawValue`).
    public internal(set) var pushedInGrace = 0
    public internal(set) var sentAfter = [Int](repeating: 0, count: WorkerEngine.AppEventKind.allCases.count)

    /// Pairs intended this long before an app event are still expected (its pushes may be on their way).
    public static let expectedBeforeNanos: UInt64 = 1_000_000_000

    /// App event `k`'s activity stops expecting events intended after this offset (nanoseconds after t0).
    func cutNanos(_ k: Int) -> UInt64 {
        let o = list[k].offsetNanos
        return o > Self.expectedBeforeNanos ? o - Self.expectedBeforeNanos : 0
    }
}

extension APNsService {
    /// Draws this loop's app events (nothing without `faults.appEvents`); called by `init`.
    func planAppEvents(_ scenario: Scenario) {
        guard let setting = scenario.faults.appEvents else { return }
        let world = engine.world
        let tokens = pipeline.router.updateTokens
        let store = pipeline.store
        let sources = engine.sourcesOfActivities()
        var list: [ServingAppEvents.AppEvent] = []
        for a in 0..<Int32(engine.activityCount) {
            let (d, k) = engine.deviceAndSlot(of: a)
            let source = sources[Int(a)] >= 0 ? Int(sources[Int(a)]) : world.source(device: d, slot: k)
            guard source >= 0,
                let drawn = WorkerEngine.appEvent(scenario, device: d, slot: k, app: world.sourceApp[source])
            else { continue }
            var token: [UInt8] = []
            tokens.withBytes(store.token[Int(a)]) { WorkerEngine.appendTokenText($0, to: &token) }
            list.append(.init(activity: a, kind: drawn.kind, offsetNanos: drawn.offsetNanos, token: token))
        }
        list.sort { ($0.offsetNanos, $0.activity) < ($1.offsetNanos, $1.activity) }
        appEvents.times.plan(
            list.map(\.activity), activityCount: engine.activityCount, graceSeconds: setting.graceSeconds)
        appEvents.list = list
    }

    /// Serving starts: app event k is due at `t0Nanos` + its offset; `t0UnixMillis` is the same instant on the wall
    /// clock (the devices' clock and 410's timestamp count from it).
    public func startAppEvents(t0Nanos: UInt64, t0UnixMillis: Int64) {
        appEvents.nextNanos = appEvents.times.start(
            t0Nanos: t0Nanos, t0UnixMillis: t0UnixMillis, firstOffsetNanos: appEvents.list.first?.offsetNanos)
    }

    /// App event `k`'s instant on the devices' clock (UNIX milliseconds).
    public func appEventMillis(_ k: Int) -> Int64 {
        appEvents.times.t0UnixMillis &+ deviceClockOffsetMillis &+ Int64(appEvents.list[k].offsetNanos / 1_000_000)
    }

    /// Applies what fell due by `now` (a push's arrival, a fan-out's; the end of serving once the loops stopped), in
    /// order: the activity dismissed on its device at the instant; an uninstalled one's token retired then.
    public func stepAppEvents(_ now: UInt64) {
        let t0 = appEvents.times.t0Nanos
        while appEvents.applied < appEvents.list.count, t0 &+ appEvents.list[appEvents.applied].offsetNanos <= now {
            let k = appEvents.applied
            let e = appEvents.list[k]
            let millis = appEventMillis(k)
            pipeline.dismiss(e.activity, nowMillis: millis)
            if e.kind == .uninstalled {
                // The token stops routing (the activity gets one nobody is told of) and answers 410 from the instant.
                _ = engine.rotateToken(of: e.activity)
                retired[e.token] = millis
                appEvents.uninstalledIndex[e.token] = Int32(k)
            }
            appEvents.applied += 1
        }
        appEvents.nextNanos =
            appEvents.applied < appEvents.list.count ? t0 &+ appEvents.list[appEvents.applied].offsetNanos : .max
    }

    /// A token push reached activity `a` at `arrival` (called once an app event was applied here): after its app
    /// event's grace it is `sentAfterAppEvent`.
    func noteAppEventPush(_ a: Int32, _ arrival: UInt64) {
        // An activity started while serving (push-to-start) is past the list: it has no app event.
        guard Int(a) < appEvents.times.indexOf.count else { return }
        let k = Int(appEvents.times.indexOf[Int(a)])
        guard k >= 0, k < appEvents.applied else { return }
        countAppEventPush(k, arrival)
    }

    /// A push to an uninstalled activity's retired token (answered 410) at `arrival`.
    func noteUninstalledPush(_ token: ArraySlice<UInt8>, _ arrival: UInt64) {
        guard !appEvents.uninstalledIndex.isEmpty, let k = appEvents.uninstalledIndex[Array(token)] else { return }
        countAppEventPush(Int(k), arrival)
    }

    private func countAppEventPush(_ k: Int, _ arrival: UInt64) {
        let e = appEvents.list[k]
        if arrival > appEvents.times.t0Nanos &+ e.offsetNanos &+ appEvents.times.graceNanos {
            appEvents.sentAfter[e.kind.rawValue] += 1
        } else {
            appEvents.pushedInGrace += 1
        }
    }

    /// The fields of app event `k`'s request to `--app-events` (INGEST §5): the device's id, the app's bundle, the
    /// activity's id and its update token (hex), as population.jsonl names them.
    public func appEventFields(_ k: Int) -> (device: [UInt8], app: [UInt8], activity: [UInt8], token: [UInt8]) {
        let e = appEvents.list[k]
        let store = pipeline.store
        let (d, _) = engine.deviceAndSlot(of: e.activity)
        var device: [UInt8] = []
        engine.world.appendDeviceId(d, to: &device)
        var app: [UInt8] = []
        pipeline.withBundle(of: store.app[Int(e.activity)]) { app.append(contentsOf: $0) }
        let activity = store.activityIds.withBytes(e.activity) { Array($0) }
        return (device, app, activity, e.token)
    }
}
