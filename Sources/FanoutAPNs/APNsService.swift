import FanoutCore
import FanoutMetrics
import FanoutSim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The APNs side of `fanout serve`, without sockets: judges each request by docs/INGEST.md §3 in its check
/// order, applies accepted pushes on the simulated devices (DOMAIN.md, through the same pipeline as
/// `fanout run`), serves the channel-management API and keeps the measurements. One thread owns it.
public final class APNsService {
    public let engine: WorkerEngine
    public var pipeline: Pipeline { engine.pipeline }
    public let auth: ProviderAuth?
    @exclusivity(unchecked) public internal(set) var stats = ServeStats()
    @exclusivity(unchecked) var ids = UUIDGenerator()
    /// UNIX milliseconds when the population was built (its activities started then).
    public let startMillis: Int64
    /// Added to the wall clock for the devices' clock (what pushes are applied at): 0, or, with `fanout serve
    /// --epoch S`, S − the start of serving, so the devices live in the same time as `fanout run`'s virtual epoch.
    /// Provider tokens are still judged by the wall clock.
    public var deviceClockOffsetMillis: Int64 = 0
    /// `fanout serve --epoch-from first-request`: the devices' clock reads the origin's epoch when the first request
    /// of any loop arrives; until then (nil once this loop has taken the offset) each request asks.
    public var deviceClockOrigin: DeviceClockOrigin?
    /// This service's slice of the devices (device `d` belongs to worker `d % workers`).
    public let worker: Int
    public let workers: Int
    /// `fanout serve --shard K/N`: the slice of the devices this process holds and applies (`.whole`: all).
    public var shard: Shard { engine.world.shard }
    /// With `--shard`: the tokens of the other shards' devices (`ForeignTokens`, shared by the loops); a push to one
    /// is answered as APNs answers an unknown token and counted in `stats.notThisShard`. Nil: not sharded.
    public var foreignTokens: ForeignTokens?
    let clock: @Sendable () -> UInt64

    /// Update tokens rotated away, with the UNIX milliseconds they stopped being valid (410's timestamp).
    var retired: [[UInt8]: Int64] = [:]
    /// The same, in rotation order, with their activities (rotated-tokens.jsonl).
    var retiredList: [(token: [UInt8], activity: Int32)] = []
    /// `faults.rotationWhileServing`: the rotations while serving (APNsService+Rotation.swift).
    @exclusivity(unchecked) public internal(set) var rotations = ServingRotations()
    /// The directory hashes of the tokens rotations while serving will mint (`planServingRotations`, at init): read by
    /// ``ownedTokenHashes()`` on the building thread while the loop's own thread writes its population lines.
    var rotationTokenHashes: [UInt64] = []
    /// `faults.appEvents`: activities the app's side ends while serving (APNsService+AppEvents.swift).
    @exclusivity(unchecked) public internal(set) var appEvents = ServingAppEvents()
    /// `faults.kickoff`: activities started by push-to-start while serving (APNsService+Kickoff.swift).
    @exclusivity(unchecked) public internal(set) var kickoff = ServingKickoff()
    // The channel registry (the functions: APNsService+Channels.swift). Only live channels are kept: a
    // deleted one leaves the registry, the per-bundle list and the router, here and on every worker.
    /// Live broadcast channels by raw id: their app's bundle, storage policy, and registration number.
    struct Channel {
        var bundle: [UInt8]
        var storagePolicy: Int
        var serial: Int
    }
    var channels: [[UInt8]: Channel] = [:]
    /// The live channels of each bundle in registration order (serials ascending); no entry when none.
    struct BundleChannels {
        var serials: [Int] = []
        var raws: [[UInt8]] = []
    }
    var channelOrder: [[UInt8]: BundleChannels] = [:]
    /// Channels registered so far (each gets the next serial), and created through the API here.
    var channelSerial = 0
    var channelsCreated = 0
    /// Bundles that got a channel through the API without being one of the population's apps (each is
    /// interned as an app for good, so these are capped by `channelLimits.apiBundles`).
    var apiBundles = 0
    /// Router ids of channels deleted while a pending fan-out still refers to them: the router frees them
    /// once those fan-outs have run, so a new channel never takes an id an answered broadcast still targets.
    var dyingChannels: [Int32] = []
    public static let channelsPerApp = 10_000
    /// The channel API's bounds (flags of `fanout serve`, docs/INGEST.md §2).
    public struct ChannelLimits: Sendable {
        /// Bundles, other than the population's apps, that may get channels through the API.
        public var apiBundles = 100
        /// Channel ids in one `all-channels` answer (the first ones created; the rest are left out).
        public var listedChannels = 1_000
        public init() {}
    }
    public var channelLimits = ChannelLimits()
    // Push-to-start tokens of the population are not kept here: each device's is derived from the world (slot
    // 0xFFFF, generation 0) for the app of its first activity (the router holds them for lookups).
    var startedActivities = 0

    /// Broadcasts answered and waiting for their fan-out (run after the connection's input is processed,
    /// so the answer goes out first, as APNs answers before delivery).
    struct PendingFanout {
        var headers: CheckedHeaders
        var payload: [UInt8]
        var channel: Int32
        var arrivalNanos: UInt64
        /// The worker that answered the broadcast, and its number for it (several workers: completion is
        /// the last worker's).
        var origin: Int
        var id: Int
    }
    @exclusivity(unchecked) var pending: [PendingFanout] = []

    /// Several workers: what the other workers must hear of (broadcasts to fan out, channels created or
    /// deleted) and the fan-out parts finished here for broadcasts answered elsewhere. The server takes them.
    public internal(set) var outgoing: [PeerMessage] = []
    var broadcastsAnswered = 0
    /// Broadcasts answered here, waiting for the other workers' parts: parts left, latest end, arrival.
    package var outstanding: [Int: (left: Int, end: UInt64, arrival: UInt64)] = [:]

    /// Builds the scenario's whole population at UNIX time `nowSeconds`, rotates the scenario's
    /// `rotationShare` of the update tokens once (the old ones answer 410), and gives each device a
    /// push-to-start token for the app of its first activity. `progress` counts the devices built. With a `shard`
    /// (`fanout serve --shard K/N`), only the devices of that slice are built (the same ids and tokens).
    public init(
        scenario: Scenario, auth: ProviderAuth?, nowSeconds: Int64, worker: Int = 0, of workers: Int = 1,
        shard: Shard = .whole, progress: ProgressCounter? = nil, clock: @escaping @Sendable () -> UInt64
    ) {
        let world = World(scenario: scenario, shard: shard, epochSeconds: nowSeconds, kickoff: true)
        engine = WorkerEngine(world: world, index: worker, count: workers, hrtime: clock, progress: progress)
        self.worker = worker
        self.workers = workers
        self.auth = auth
        self.clock = clock
        startMillis = nowSeconds * 1000
        intervalStartNanos = clock()
        measurements = ServeMeasurements(loops: workers, startNanos: intervalStartNanos)
        for s in 0..<scenario.sources.count where world.sourceIsBroadcast[s] {
            var id: [UInt8] = []
            world.appendChannelId(source: s, to: &id)
            // WorkerEngine registered it with the router already.
            addChannel(id, bundle: Array(scenario.apps[world.sourceApp[s]].bundle.utf8), storagePolicy: 1)
        }
        var deviceBytes: [UInt8] = []
        var bundle: [UInt8] = []
        var token: [UInt8] = []
        // Read through the pipeline's in-place accessors: a copy of the store taken here would be copied
        // again, whole, by the first setStartToken below.
        var previousDevice = -1
        for a in 0..<Int32(engine.activityCount) {
            let (d, k) = engine.deviceAndSlot(of: a)
            if d != previousDevice {  // a device's activities are consecutive: its first one
                previousDevice = d
                token.removeAll(keepingCapacity: true)
                world.appendToken(device: d, slot: 0xFFFF, generation: 0, to: &token)
                let app = pipeline.app(of: a)
                deviceBytes.removeAll(keepingCapacity: true)
                world.appendDeviceId(d, to: &deviceBytes)
                bundle.removeAll(keepingCapacity: true)
                pipeline.withBundle(of: app) { bundle.append(contentsOf: $0) }
                deviceBytes.withUnsafeBytes { dev in
                    bundle.withUnsafeBytes { b in
                        token.withUnsafeBytes { pipeline.setStartToken(device: dev, app: b, token: $0) }
                    }
                }
            }
            if WorkerEngine.rotatesAtStart(scenario, device: d, slot: k) {
                let (old, _) = engine.rotateToken(of: a)
                retired[old] = startMillis
                retiredList.append((old, a))
            }
        }
        planServingRotations(scenario)
        planAppEvents(scenario)
        planKickoff()
    }

    /// The correlation of deliveries with the scenario's events (`--expect-events`; nil: none, serve as without it).
    @exclusivity(unchecked) public internal(set) var tracker: EventTracker?

    // Measurements (the functions: APNsService+Measurements.swift).
    /// Every sample is recorded here once; the interval is taken each second (`closeInterval`).
    let recorder = IntervalRecorder(metricCount: ServeMetric.allCases.count)
    /// The run's log, shared by every loop (`measure(into:)`); by default this service's own, started at init.
    public internal(set) var measurements: ServeMeasurements
    /// When the current interval began (a clock reading).
    var intervalStartNanos: UInt64
    /// This loop's service p99 in its last closed interval (the progress line).
    public internal(set) var lastServiceP99Nanos: UInt64 = 0

    // MARK: Requests

    /// Judges one request and, when accepted, applies it (a broadcast's fan-out waits for
    /// `runPendingFanouts`). `becameAuthenticated` is set on a connection's first valid provider token.
    public func handle(
        _ request: RequestInput, auth state: ProviderAuth.ConnectionState?, wallMillis: Int64,
        becameAuthenticated: inout Bool
    ) -> APNsAnswer {
        if deviceClockOrigin != nil { takeDeviceClock(wallMillis) }
        let (response, reason) = judge(request, state, wallMillis, &becameAuthenticated)
        stats.answered(response.status, reason)
        if let reason, Self.payloadOrHeaderReasons.contains(reason) {
            stats.note(.rejectedPayload, "\(reason.rawValue): \(Self.describe(request))")
        }
        return response
    }

    /// The devices' clock offset from the origin (set by this loop's first request or another loop's), once.
    func takeDeviceClock(_ wallMillis: Int64) {
        guard let origin = deviceClockOrigin else { return }
        deviceClockOffsetMillis = origin.offset(firstWallMillis: wallMillis)
        deviceClockOrigin = nil
    }

    /// Where a request is judged when several workers serve: rows 1–5 here (the connection's provider token
    /// lives with the connection); then `.local`, `.worker(k)` (the worker owning the token's device, or the
    /// one serving channel management), or an answer at once.
    public enum Placement {
        case local
        case worker(Int)
        case answered(APNsAnswer)
    }

    public func place(
        _ r: RequestInput, auth state: ProviderAuth.ConnectionState, wallMillis: Int64, becameAuthenticated: inout Bool,
        owner: (ArraySlice<UInt8>) -> Int?
    ) -> Placement {
        guard workers > 1 else { return .local }
        var route = APNsRoute.push(token: [])
        if RequestCheck.route(method: r.method, path: r.path, into: &route) != nil { return .local }
        if r.known.hasDuplicates { return .local }
        if let auth, checkToken(auth, r, state, wallMillis, &becameAuthenticated) != nil {
            // Judged here again (the token's verdict is cached per connection), so the answer is counted once.
            return .local
        }
        switch route {
        case .push(let token):
            guard let k = owner(token), k != worker else { return .local }
            return .worker(k)
        case .broadcast: return .local
        // Reads are answered where they arrive: every worker holds the registry (loop 0 tells the others of every
        // change before it answers the change), and the largest answer (`all-channels`) is then counted against
        // the asking connection's unsent-bytes bound before it is built, not after it came back from loop 0.
        case .readChannel, .listChannels: return .local
        default: return worker == 0 ? .local : .worker(0)
        }
    }

    static let payloadOrHeaderReasons: Set<APNsReason> = [
        .payloadEmpty, .payloadTooLarge, .invalidPushType, .missingPushType, .missingTopic, .topicDisallowed,
        .badTopic, .badPriority, .badCollapseId, .badMessageId, .badExpirationDate, .badRequestPayload,
        .duplicateHeaders,
    ]

    static func describe(_ r: RequestInput) -> String {
        let path = String(decoding: r.path, as: UTF8.self)
        let id = r.header(.apnsId).map { " apns-id " + String(decoding: $0, as: UTF8.self) } ?? ""
        return String(path.prefix(120)) + id
    }

    package func failure(_ reason: APNsReason, id: UniqueHeader?, timestamp: Int64? = nil) -> (APNsAnswer, APNsReason?) {
        (APNsService.errorAnswer(reason, id: id, timestamp: timestamp), reason)
    }

    /// APNs's error answer, the one writer of its body: the reason's status, `{"reason":…}` (and `timestamp` for a
    /// 410), JSON, the request's id echoed when it had a valid one.
    public static func errorAnswer(_ reason: APNsReason, id: UniqueHeader?, timestamp: Int64? = nil) -> APNsAnswer {
        var body = "{\"reason\":\"\(reason.rawValue)\""
        if let timestamp { body += ",\"timestamp\":\(timestamp)" }
        body += "}"
        return APNsAnswer(
            status: reason.status, id: id, headers: [(name: "content-type", value: "application/json")],
            body: Array(body.utf8))
    }

    func judge(
        _ r: RequestInput, _ state: ProviderAuth.ConnectionState?, _ wallMillis: Int64, _ became: inout Bool
    ) -> (APNsAnswer, APNsReason?) {
        // The id echoed on errors: apns-id (token pushes) or apns-request-id (broadcast, channel), when valid.
        let isPush = RequestCheck.isTokenPushPath(r.path)
        var route = APNsRoute.push(token: [])
        if let reason = RequestCheck.route(method: r.method, path: r.path, into: &route) {
            return failure(reason, id: echoedId(r, broadcast: !isPush))
        }
        // Row 13's verdict, made once: the id echoed on any error, and the request's own if it passes.
        let idCheck = RequestCheck.messageId(r.headers, r.known, broadcast: !isPush)
        let id: UniqueHeader? = if case .success(let own) = idCheck { own } else { nil }
        if r.known.hasDuplicates { return failure(.duplicateHeaders, id: id) }
        if let auth, let state, let reason = checkToken(auth, r, state, wallMillis, &became) {
            return failure(reason, id: id)
        }
        switch route {
        case .push, .broadcast:
            var checked = CheckedHeaders()
            if let reason = RequestCheck.check(
                route: route, headers: r.headers, known: r.known, bodyCount: r.body.count, messageId: idCheck,
                into: &checked)
            {
                return failure(reason, id: id)
            }
            let messageId = checked.messageId ?? ids.make(isPush ? "apns-id" : "apns-request-id")
            if case .push(let token) = route {
                return push(token: token, checked, messageId: messageId, r, wallMillis)
            }
            if case .broadcast(let bundle) = route {
                return broadcast(bundle: bundle, checked, requestId: messageId, r)
            }
            preconditionFailure()
        default:
            stats.channelRequests += 1
            return channelRequest(route, r, idCheck)
        }
    }

    /// Row 5: the provider token (verified once per connection and token; the last refused one is
    /// remembered too). A token accepted with a DER signature is noted as a finding, once per token.
    func checkToken(
        _ auth: ProviderAuth, _ r: RequestInput, _ state: ProviderAuth.ConnectionState, _ wallMillis: Int64,
        _ became: inout Bool
    ) -> APNsReason? {
        var notes = ProviderAuth.Notes()
        let reason = auth.check(
            authorization: r.header(.authorization), state: state, nowSeconds: wallMillis / 1000, notes: &notes)
        if notes.becameValid { became = true }
        if notes.derSignature {
            stats.note(.derSignature, "a token of key id \(notes.keyId ?? "?") signed in DER, not JWS R‖S")
        }
        return reason
    }

    package func echoedId(_ r: RequestInput, broadcast: Bool) -> UniqueHeader? {
        if case .success(let own) = RequestCheck.messageId(r.headers, r.known, broadcast: broadcast) { return own }
        return nil
    }
}

/// When the devices' clock of every loop reads `epochMillis` (`fanout serve --epoch S --epoch-from first-request`):
/// the wall clock of the first request any loop handles. Taken once per loop (a lock, then a stored offset).
public final class DeviceClockOrigin: @unchecked Sendable {
    // @unchecked: `offset` is touched only under `lock`.
    private let lock = Lock()
    private var offset: Int64?
    public let epochMillis: Int64

    public init(epochMillis: Int64) { self.epochMillis = epochMillis }

    /// epoch − the first caller's wall clock (UNIX milliseconds): the devices' clock offset, the same for every loop.
    public func offset(firstWallMillis wallMillis: Int64) -> Int64 {
        lock.withLock {
            if let offset { return offset }
            let o = epochMillis &- wallMillis
            offset = o
            return o
        }
    }

    /// The offset if a request came, else nil.
    public var takenOffset: Int64? { lock.withLock { offset } }
}
