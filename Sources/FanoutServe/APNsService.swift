import FanoutCore
import FanoutMetrics
import FanoutSim
import FanoutWire
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A request as the service judges it (copied out of the HTTP/2 stream).
public struct RequestInput: Sendable {
    public var method: [UInt8]
    public var path: [UInt8]
    public var headers: HeaderList
    /// At most the body limit + 1 bytes.
    public var body: [UInt8]
    /// Monotonic nanoseconds: first HEADERS frame.
    public var arrivalNanos: UInt64

    public init(
        method: String, path: String, headers: [(String, String)], body: [UInt8], arrivalNanos: UInt64 = 0
    ) {
        self.method = Array(method.utf8)
        self.path = Array(path.utf8)
        self.headers = HeaderList(headers)
        self.body = body
        self.arrivalNanos = arrivalNanos
    }

    public init(
        method: [UInt8], path: [UInt8], headers: HeaderList, body: [UInt8],
        arrivalNanos: UInt64
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.arrivalNanos = arrivalNanos
    }

    func header(_ name: StaticString) -> ArraySlice<UInt8>? {
        headers.value(name)
    }
}

/// The APNs side of `fanout serve`, without sockets: judges each request by docs/INGEST.md §3 in its check
/// order, applies accepted pushes on the simulated devices (DOMAIN.md, through the same pipeline as
/// `fanout run`), serves the channel-management API and keeps the measurements. One thread owns it.
public final class APNsService {
    public let engine: WorkerEngine
    public var pipeline: Pipeline { engine.pipeline }
    public let auth: ProviderAuth?
    @exclusivity(unchecked) public private(set) var stats = ServeStats()
    private var ids = UUIDGenerator()
    /// UNIX milliseconds when the population was built (its activities started then).
    public let startMillis: Int64
    /// This service's slice of the devices (device `d` belongs to worker `d % workers`).
    public let worker: Int
    public let workers: Int
    let clock: @Sendable () -> UInt64

    /// Update tokens rotated away, with the UNIX milliseconds they stopped being valid (410's timestamp).
    private var retired: [[UInt8]: Int64] = [:]
    /// The same, in rotation order, with their activities (rotated-tokens.jsonl).
    private var retiredList: [(token: [UInt8], activity: Int32)] = []
    /// Broadcast channels by raw id: their app's bundle, storage policy, and whether deleted.
    struct Channel {
        var bundle: [UInt8]
        var storagePolicy: Int
        var deleted = false
    }
    private var channels: [[UInt8]: Channel] = [:]
    private var channelOrder: [[UInt8]: [[UInt8]]] = [:]
    /// Channels not deleted, per app (the 10,000 limit).
    private var liveChannels: [[UInt8]: Int] = [:]
    private var channelsCreated = 0
    public static let channelsPerApp = 10_000
    /// Push-to-start tokens of the population, by (device, app) as written to population.jsonl.
    private var startTokenOf: [Int64: [UInt8]] = [:]
    private var startedActivities = 0

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
    @exclusivity(unchecked) private var pending: [PendingFanout] = []

    /// Several workers: what the other workers must hear of (broadcasts to fan out, channels created or
    /// deleted) and the fan-out parts finished here for broadcasts answered elsewhere. The server takes them.
    public private(set) var outgoing: [PeerMessage] = []
    private var broadcastsAnswered = 0
    /// Broadcasts answered here, waiting for the other workers' parts: parts left, latest end, arrival.
    private var outstanding: [Int: (left: Int, end: UInt64, arrival: UInt64)] = [:]

    /// Builds the scenario's whole population at UNIX time `nowSeconds`, rotates the scenario's
    /// `rotationShare` of the update tokens once (the old ones answer 410), and gives each device a
    /// push-to-start token for the app of its first activity.
    public init(
        scenario: Scenario, auth: ProviderAuth?, nowSeconds: Int64, worker: Int = 0, of workers: Int = 1,
        clock: @escaping @Sendable () -> UInt64
    ) {
        let world = World(scenario: scenario, epochSeconds: nowSeconds)
        engine = WorkerEngine(world: world, index: worker, count: workers, hrtime: clock)
        self.worker = worker
        self.workers = workers
        self.auth = auth
        self.clock = clock
        startMillis = nowSeconds * 1000
        let store = engine.pipeline.store
        for s in 0..<scenario.sources.count where world.sourceIsBroadcast[s] {
            var id: [UInt8] = []
            world.appendChannelId(source: s, to: &id)
            let bundle = Array(scenario.apps[world.sourceApp[s]].bundle.utf8)
            channels[id] = Channel(bundle: bundle, storagePolicy: 1)
            channelOrder[bundle, default: []].append(id)
            liveChannels[bundle, default: 0] += 1
        }
        let share = scenario.faults.rotationShare
        var firstOfDevice = Set<Int32>()
        for a in 0..<Int32(store.activityCount) {
            let device = store.device[Int(a)]
            if firstOfDevice.insert(device).inserted {
                let (d, _) = engine.deviceAndSlot(of: a)
                var token: [UInt8] = []
                world.appendToken(device: d, slot: 0xFFFF, generation: 0, to: &token)
                let app = store.app[Int(a)]
                let deviceId = store.deviceIds.withBytes(device) { Array($0) }
                let bundle = store.appIds.withBytes(app) { Array($0) }
                deviceId.withUnsafeBytes { dev in
                    bundle.withUnsafeBytes { b in
                        token.withUnsafeBytes { engine.pipeline.setStartToken(device: dev, app: b, token: $0) }
                    }
                }
                startTokenOf[Int64(device) << 32 | Int64(app)] = token
            }
            let (d, k) = engine.deviceAndSlot(of: a)
            if share > 0, Mix.unit(Mix.hash(scenario.seed, 0x5E, UInt64(d), UInt64(k))) < share {
                let (old, _) = engine.rotateToken(of: a)
                retired[old] = startMillis
                retiredList.append((old, a))
            }
        }
    }

    // MARK: population.jsonl

    /// One line per activity, with the fields of docs/INGEST.md §5: what an app would have registered with
    /// its server.
    public func populationLines() -> [UInt8] {
        var out: [UInt8] = []
        let store = pipeline.store
        let world = engine.world
        var token: [UInt8] = []
        for a in 0..<Int32(store.activityCount) {
            let i = Int(a)
            func text(_ interner: ByteInterner, _ id: Int32) -> String { interner.withBytes(id) { JSON.quote($0) } }
            let (d, k) = engine.deviceAndSlot(of: a)
            let source = world.source(device: d, slot: k)
            token.removeAll(keepingCapacity: true)
            pipeline.router.updateTokens.withBytes(store.token[i]) { token.append(contentsOf: $0) }
            var line = "{\"device\": \(text(store.deviceIds, store.device[i])), "
            line += "\"app\": \(text(store.appIds, store.app[i])), "
            line += "\"activity\": \(text(store.activityIds, a)), "
            line += "\"attributes-type\": \"\(pipeline.schemas[store.schema[i]].name)\", "
            line += "\"token\": \"\(APNsService.tokenText(token))\", "
            if let start = startTokenOf[Int64(store.device[i]) << 32 | Int64(store.app[i])] {
                line += "\"push-to-start-token\": \"\(String(decoding: start, as: UTF8.self))\", "
            } else {
                line += "\"push-to-start-token\": null, "
            }
            if world.sourceIsBroadcast[source] {
                var id: [UInt8] = []
                world.appendChannelId(source: source, to: &id)
                line += "\"channel\": \"\(Base64.encode(id))\", "
            } else {
                line += "\"channel\": null, "
            }
            var sourceId: [UInt8] = []
            world.appendChannelId(source: source, to: &sourceId)
            line += "\"source\": \"\(String(decoding: sourceId, as: UTF8.self))\"}\n"
            out.append(contentsOf: line.utf8)
        }
        return out
    }

    /// One line per update token rotated away at start: the token a backend that missed the rotation would
    /// still push to (answered 410 Unregistered), its activity, and when it stopped being valid.
    public func rotatedTokenLines() -> [UInt8] {
        var out: [UInt8] = []
        for (token, a) in retiredList {
            let activity = pipeline.store.activityIds.withBytes(a) { JSON.quote($0) }
            let line = "{\"token\": \"\(String(decoding: token, as: UTF8.self))\", \"activity\": \(activity), "
                + "\"retiredAt\": \(retired[token] ?? startMillis)}\n"
            out.append(contentsOf: line.utf8)
        }
        return out
    }

    /// The router keeps canonical tokens as bytes behind a tag (see `Router.withTokenKey`): back to hex.
    static func tokenText(_ key: [UInt8]) -> String {
        guard let tag = key.first else { return "" }
        if tag == 1 { return String(decoding: key.dropFirst(), as: UTF8.self) }
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in key.dropFirst() {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: Requests

    /// Judges one request and, when accepted, applies it (a broadcast's fan-out waits for
    /// `runPendingFanouts`). `becameAuthenticated` is set on a connection's first valid provider token.
    public func handle(
        _ request: RequestInput, auth state: ProviderAuth.ConnectionState?, wallMillis: Int64,
        becameAuthenticated: inout Bool
    ) -> H2Response {
        let (response, reason) = judge(request, state, wallMillis, &becameAuthenticated)
        stats.answered(response.status, reason)
        if let reason, Self.payloadOrHeaderReasons.contains(reason) {
            stats.note(.rejectedPayload, "\(reason.rawValue): \(Self.describe(request))")
        }
        return response
    }

    /// Where a request is judged when several workers serve: rows 1–5 here (the connection's provider token
    /// lives with the connection); then `.local`, `.worker(k)` (the worker owning the token's device, or the
    /// one serving channel management), or an answer at once.
    public enum Placement {
        case local
        case worker(Int)
        case answered(H2Response)
    }

    public func place(
        _ r: RequestInput, auth state: ProviderAuth.ConnectionState, wallMillis: Int64, becameAuthenticated: inout Bool,
        owner: (ArraySlice<UInt8>) -> Int?
    ) -> Placement {
        guard workers > 1 else { return .local }
        let route: APNsRoute
        switch RequestCheck.route(method: r.method, path: r.path) {
        case .failure: return .local
        case .success(let found): route = found
        }
        if r.headers.hasDuplicates { return .local }
        if let auth,
            auth.check(
                authorization: r.header("authorization").map(Array.init), state: state, nowSeconds: wallMillis / 1000,
                becameValid: &becameAuthenticated) != nil
        {
            // Judged here again (the token's verdict is cached per connection), so the answer is counted once.
            return .local
        }
        switch route {
        case .push(let token):
            guard let k = owner(token[...]), k != worker else { return .local }
            return .worker(k)
        case .broadcast: return .local
        default: return worker == 0 ? .local : .worker(0)
        }
    }

    /// What the pipeline reads as the push type of a Live Activity push (checked here without regard to case).
    static let liveActivityType = Array("liveactivity".utf8)

    static let payloadOrHeaderReasons: Set<APNsReason> = [
        .payloadEmpty, .payloadTooLarge, .invalidPushType, .missingPushType, .missingTopic, .topicDisallowed,
        .badTopic, .badPriority, .badCollapseId, .badMessageId, .badExpirationDate, .badRequestPayload,
        .duplicateHeaders,
    ]

    static func describe(_ r: RequestInput) -> String {
        let path = String(decoding: r.path, as: UTF8.self)
        let id = r.header("apns-id").map { " apns-id " + String(decoding: $0, as: UTF8.self) } ?? ""
        return String(path.prefix(120)) + id
    }

    private func failure(_ reason: APNsReason, id: (name: String, value: String)?, timestamp: Int64? = nil)
        -> (H2Response, APNsReason?)
    {
        var body = "{\"reason\":\"\(reason.rawValue)\""
        if let timestamp { body += ",\"timestamp\":\(timestamp)" }
        body += "}"
        var headers = [(name: "content-type", value: "application/json")]
        if let id { headers.insert(id, at: 0) }
        return (H2Response(status: reason.status, headers: headers, body: Array(body.utf8)), reason)
    }

    private func judge(
        _ r: RequestInput, _ state: ProviderAuth.ConnectionState?, _ wallMillis: Int64, _ became: inout Bool
    ) -> (H2Response, APNsReason?) {
        // The id echoed on errors: apns-id (token pushes) or apns-request-id (broadcast, channel), when valid.
        let route: APNsRoute
        switch RequestCheck.route(method: r.method, path: r.path) {
        case .failure(let reason):
            return failure(reason, id: echoedId(r, broadcast: !(r.path.count >= 3 && r.path[1] == UInt8(ascii: "3"))))
        case .success(let found): route = found
        }
        let isPush: Bool
        if case .push = route { isPush = true } else { isPush = false }
        let id = echoedId(r, broadcast: !isPush)
        if r.headers.hasDuplicates { return failure(.duplicateHeaders, id: id) }
        if let auth, let state, let reason = auth.check(
            authorization: r.header("authorization").map(Array.init), state: state, nowSeconds: wallMillis / 1000,
            becameValid: &became)
        {
            return failure(reason, id: id)
        }
        switch route {
        case .push, .broadcast:
            let checked: CheckedHeaders
            switch RequestCheck.headers(route: route, headers: r.headers, bodyCount: r.body.count) {
            case .failure(let reason): return failure(reason, id: id)
            case .success(let h): checked = h
            }
            let messageId = checked.messageId ?? ids.make()
            if case .push(let token) = route {
                return push(token: token, checked, messageId: messageId, r, wallMillis)
            }
            if case .broadcast(let bundle) = route {
                return broadcast(bundle: bundle, checked, requestId: messageId, r)
            }
            preconditionFailure()
        default:
            stats.channelRequests += 1
            return channelRequest(route, r)
        }
    }

    private func echoedId(_ r: RequestInput, broadcast: Bool) -> (name: String, value: String)? {
        guard let value = broadcast ? r.header("apns-request-id") : r.header("apns-id"),
            RequestCheck.isCanonicalUUID(value)
        else { return nil }
        return (broadcast ? "apns-request-id" : "apns-id", String(decoding: value, as: UTF8.self))
    }

    // MARK: Token pushes

    private func push(
        token: [UInt8], _ h: CheckedHeaders, messageId: String, _ r: RequestInput, _ wallMillis: Int64
    ) -> (H2Response, APNsReason?) {
        let idHeader = (name: "apns-id", value: messageId)
        let tokenText = String(decoding: token, as: UTF8.self)
        // 16–18: who holds the token.
        var kind = TargetKind.token
        // The token is looked up once: this flight carries the resolution to validate, route and deliver.
        let tokenFlight = token.withUnsafeBytes { pipeline.begin(kind: .token, target: $0) }
        var resolution = tokenFlight.resolution
        if case .unknownToken = resolution {
            let start = token.withUnsafeBytes { pipeline.begin(kind: .startToken, target: $0).resolution }
            if case .startToken = start {
                kind = .startToken
                resolution = start
            }
        }
        let bundle: Int32
        switch resolution {
        case .activity(let a): bundle = pipeline.app(of: a)
        case .startToken(_, let app): bundle = app
        default:
            if let at = retired[token] {
                stats.note(.rotatedToken, "token \(tokenText.prefix(16))… apns-id \(messageId)")
                return failure(.unregistered, id: idHeader, timestamp: at)
            }
            stats.note(.unknownToken, "token \(tokenText.prefix(16))… apns-id \(messageId)")
            return failure(.badDeviceToken, id: idHeader)
        }
        guard h.isLiveActivity else {
            stats.acceptedOtherPushTypes += 1
            return (H2Response(status: 200, headers: [idHeader]), nil)
        }
        let topic = h.topic!
        let bundleCount = topic.count - ".push-type.liveactivity".utf8.count
        let matches = pipeline.withBundle(of: bundle) { app in
            app.count == bundleCount && topic.withUnsafeBytes { t in memcmp(app.baseAddress!, t.baseAddress!, bundleCount) == 0 }
        }
        guard matches else {
            stats.note(.wrongTopic, "token \(tokenText.prefix(16))… topic \(String(decoding: h.topic!, as: UTF8.self))")
            return failure(.deviceTokenNotForTopic, id: idHeader)
        }
        // 20, then route and apply (the pipeline judges the payload and counts every verdict and outcome).
        let t0 = clock()
        if kind == .startToken {
            let n = startedActivities
            startedActivities += 1
            guard case .startToken(let device, _) = resolution else { preconditionFailure() }
            var newId = pipeline.store.deviceIds.withBytes(device) { Array($0) }
            newId.append(contentsOf: Array("-started-\(n)".utf8))
            var newToken: [UInt8] = []
            engine.world.appendToken(device: Int(device), slot: 0x10000 + n, generation: 0, to: &newToken)
            let refusedBefore = pipeline.accounting[.limitExceeded]
            let verdict = withHeaders(h, broadcast: false) { headers in
                r.body.withUnsafeBytes { payload in
                    token.withUnsafeBytes { target in
                        newId.withUnsafeBytes { id in
                            newToken.withUnsafeBytes { nt in
                                pipeline.push(
                                    kind: .startToken, target: target, headers: headers, payload: payload,
                                    nowMillis: wallMillis, newActivity: id, newToken: nt)
                            }
                        }
                    }
                }
            }
            let t1 = clock()
            record(.validate, max(t1 &- t0, 1))
            switch verdict {
            case .rejected(let reason): return failure(APNsReason(reason), id: idHeader)
            case .unroutable(let reason): return failure(APNsReason(rawValue: reason.name)!, id: idHeader)
            case .routed:
                if pipeline.accounting[.limitExceeded] > refusedBefore {
                    stats.note(.limitExceeded, "push-to-start token \(tokenText.prefix(16))… apns-id \(messageId)")
                }
                record(.delivery, max(t1 &- r.arrivalNanos, 1))
                stats.acceptedPushes += 1
                return (H2Response(status: 200, headers: [idHeader]), nil)
            }
        }
        var flight = tokenFlight
        let rejected = withHeaders(h, broadcast: false) { headers in
            r.body.withUnsafeBytes { pipeline.validate(&flight, headers: headers, payload: $0) }
        }
        let t1 = clock()
        record(.validate, max(t1 &- t0, 1))
        if let rejected { return failure(APNsReason(rejected), id: idHeader) }
        guard case .routed = pipeline.route(&flight), case .activity(let a) = flight.resolution else {
            preconditionFailure("a resolved token routes")
        }
        let t2 = clock()
        record(.route, max(t2 &- t1, 1))
        let outcome = pipeline.deliver(flight, to: a, nowMillis: wallMillis)
        let t3 = clock()
        record(.delivery, max(t3 &- r.arrivalNanos, 1))
        stats.acceptedPushes += 1
        noteOutcome(outcome, a, messageId)
        return (H2Response(status: 200, headers: [idHeader]), nil)
    }

    private func noteOutcome(_ outcome: Outcome, _ a: Int32, _ messageId: String) {
        let finding: ServeStats.Finding
        switch outcome {
        case .ignoredStaleTimestamp: finding = .staleTimestamp
        case .ignoredEnded: finding = .afterEnd
        case .throttled: finding = .budget
        default: return
        }
        let pipeline = self.pipeline
        stats.note(finding, "activity \(pipeline.store.activityIds.string(a)) apns-id \(messageId)")
    }

    /// The pipeline's header view of a checked request (the values it re-checks pass by construction; a
    /// broadcast's expiration, judged against its channel's storage policy here, is passed as 0).
    private func withHeaders<R>(_ h: CheckedHeaders, broadcast: Bool, _ body: (PushHeaders) -> R) -> R {
        let topic = h.topic ?? Array("x.push-type.liveactivity".utf8)[...]
        return APNsService.liveActivityType.withUnsafeBytes { pushType in
            topic.withUnsafeBytes { topicBytes in
                (h.collapseId ?? []).withUnsafeBytes { collapse in
                    body(
                        PushHeaders(
                            pushType: .string(pushType), topic: .string(topicBytes), priority: .integer(Int64(h.priority)),
                            expiration: .integer(broadcast ? 0 : h.expiration),
                            collapseId: h.collapseId == nil ? .null : .string(collapse)))
                }
            }
        }
    }

    // MARK: Broadcasts

    private func broadcast(bundle: [UInt8], _ h: CheckedHeaders, requestId: String, _ r: RequestInput)
        -> (H2Response, APNsReason?)
    {
        let idHeader = (name: "apns-request-id", value: requestId)
        guard let raw = h.channelId, let channel = channels[raw], !channel.deleted, channel.bundle == bundle else {
            return failure(.channelNotRegistered, id: idHeader)
        }
        if channel.storagePolicy == 0 && h.expiration != 0 { return failure(.badExpirationDate, id: idHeader) }
        let t0 = clock()
        var topic = bundle
        topic.append(contentsOf: Array(".push-type.liveactivity".utf8))
        var withTopic = h
        withTopic.topic = topic[...]
        var flight = raw.withUnsafeBytes { pipeline.begin(kind: .channel, target: $0) }
        guard case .channel(let c) = flight.resolution else {
            return failure(.channelNotRegistered, id: idHeader)
        }
        let rejected = withHeaders(withTopic, broadcast: true) { headers in
            r.body.withUnsafeBytes { pipeline.validate(&flight, headers: headers, payload: $0) }
        }
        let t1 = clock()
        record(.validate, max(t1 &- t0, 1))
        if let rejected { return failure(APNsReason(rejected), id: idHeader) }
        _ = pipeline.route(&flight)
        record(.route, max(clock() &- t1, 1))
        stats.acceptedBroadcasts += 1
        broadcastsAnswered += 1
        pending.append(
            PendingFanout(
                headers: withTopic, payload: r.body, channel: c, arrivalNanos: r.arrivalNanos, origin: worker,
                id: broadcastsAnswered))
        if workers > 1 {
            outstanding[broadcastsAnswered] = (workers, 0, r.arrivalNanos)
            outgoing.append(
                .broadcast(
                    RemoteBroadcast(
                        channel: raw, headers: withTopic, payload: r.body, arrivalNanos: r.arrivalNanos, origin: worker,
                        id: broadcastsAnswered)))
        }
        let unique = ids.make()
        return (H2Response(status: 200, headers: [idHeader, (name: "apns-unique-id", value: unique)]), nil)
    }

    // MARK: Measurements

    /// Every sample goes into the run's histogram and the current second's (latency.hlog, over time).
    @exclusivity(unchecked) private var current = [LatencyHistogram](repeating: LatencyHistogram(), count: 5)
    @exclusivity(unchecked) private var currentRequests = 0
    /// The finished seconds of this worker.
    public private(set) var intervals: [ServeInterval] = []

    @inline(__always)
    func record(_ metric: ServeMetric, _ nanos: UInt64) {
        switch metric {
        case .service: stats.serviceNanos.record(nanos)
        case .delivery: stats.deliveryNanos.record(nanos)
        case .fanout: stats.fanoutNanos.record(nanos)
        case .validate: stats.validateNanos.record(nanos)
        case .route: stats.routeNanos.record(nanos)
        }
        current[metric.rawValue].record(nanos)
    }

    /// Ends second `index` of the run: its histograms are kept encoded (a few hundred bytes each).
    public func closeInterval(_ index: Int) {
        let requests = stats.requests - currentRequests
        currentRequests = stats.requests
        intervals.append(
            ServeInterval(
                index: index, requests: requests,
                encoded: current.map { $0.isEmpty ? [] : $0.encodedCompressed() }))
        for k in current.indices where !current[k].isEmpty { current[k].reset() }
    }

    /// One request's service time: headers complete → response submitted.
    public func recordService(_ nanos: UInt64) {
        record(.service, nanos)
    }

    /// Broadcasts waiting for their fan-out.
    public var pendingFanouts: Int { pending.count }

    /// Applies the answered broadcasts to their subscribers (in arrival order).
    public func runPendingFanouts(wallMillis: Int64) {
        guard !pending.isEmpty else { return }
        let batch = pending
        pending.removeAll(keepingCapacity: true)
        for f in batch {
            let flight = withHeaders(f.headers, broadcast: true) { headers in
                f.payload.withUnsafeBytes {
                    pipeline.resume(kind: .channel, resolution: .channel(f.channel), headers: headers, payload: $0)
                }
            }
            let subscribers = pipeline.router.subscribers[Int(f.channel)]
            for a in subscribers {
                let outcome = pipeline.deliver(flight, to: a, nowMillis: wallMillis)
                record(.delivery, max(clock() &- f.arrivalNanos, 1))
                if outcome != .applied { noteOutcome(outcome, a, "(broadcast)") }
            }
            finishedPart(origin: f.origin, id: f.id, end: clock(), arrival: f.arrivalNanos)
        }
    }

    private func finishedPart(origin: Int, id: Int, end: UInt64, arrival: UInt64) {
        guard workers > 1 else {
            record(.fanout, max(end &- arrival, 1))
            return
        }
        if origin != worker {
            outgoing.append(.fanoutPart(origin: origin, id: id, endNanos: end))
            return
        }
        fanoutPart(id: id, endNanos: end)
    }

    /// Another worker finished its part of a broadcast answered here; the last part records the completion.
    public func fanoutPart(id: Int, endNanos: UInt64) {
        guard var o = outstanding[id] else { return }
        o.left -= 1
        o.end = max(o.end, endNanos)
        if o.left == 0 {
            outstanding[id] = nil
            record(.fanout, max(o.end &- o.arrival, 1))
        } else {
            outstanding[id] = o
        }
    }

    /// A broadcast answered by another worker: this worker's subscribers get it (counted as deliveries here;
    /// the verdict was counted where it was answered).
    public func acceptRemoteBroadcast(_ b: RemoteBroadcast) {
        var flight = b.channel.withUnsafeBytes { pipeline.begin(kind: .channel, target: $0) }
        guard case .channel(let c) = flight.resolution else {
            finishedPart(origin: b.origin, id: b.id, end: clock(), arrival: b.arrivalNanos)
            return
        }
        let rejected = withHeaders(b.headers, broadcast: true) { headers in
            b.payload.withUnsafeBytes { pipeline.validate(&flight, headers: headers, payload: $0, countsVerdict: false) }
        }
        precondition(rejected == nil, "a broadcast accepted by one worker is accepted by all")
        _ = pipeline.route(&flight, countsVerdict: false)
        pending.append(
            PendingFanout(
                headers: b.headers, payload: b.payload, channel: c, arrivalNanos: b.arrivalNanos, origin: b.origin,
                id: b.id))
    }

    /// Takes what the other workers must hear of.
    public func takeOutgoing() -> [PeerMessage] {
        defer { outgoing.removeAll(keepingCapacity: true) }
        return outgoing
    }

    /// A channel created or deleted on the worker that serves channel management.
    public func channelChanged(_ raw: [UInt8], bundle: [UInt8], storagePolicy: Int, deleted: Bool) {
        if deleted {
            channels[raw]?.deleted = true
            return
        }
        channels[raw] = Channel(bundle: bundle, storagePolicy: storagePolicy)
        channelOrder[bundle, default: []].append(raw)
        let app = bundle.withUnsafeBytes { pipeline.store.internApp($0) }
        _ = raw.withUnsafeBytes { pipeline.router.registerChannel($0, app: app) }
    }

    /// Every token this worker answers for (update tokens now and rotated away, push-to-start tokens): the
    /// directory that sends a push to the worker owning its device.
    public func ownedTokens() -> [[UInt8]] {
        var out: [[UInt8]] = []
        let store = pipeline.store
        out.reserveCapacity(store.activityCount + retiredList.count + startTokenOf.count)
        for a in 0..<store.activityCount {
            var key: [UInt8] = []
            pipeline.router.updateTokens.withBytes(store.token[a]) { key.append(contentsOf: $0) }
            out.append(Array(APNsService.tokenText(key).utf8))
        }
        for (token, _) in retiredList { out.append(token) }
        for token in startTokenOf.values { out.append(token) }
        return out
    }

    // MARK: Channel management

    private func channelRequest(_ route: APNsRoute, _ r: RequestInput) -> (H2Response, APNsReason?) {
        let requestId: String
        switch RequestCheck.requestId(r.headers) {
        case .failure(let reason): return failure(reason, id: nil)
        case .success(let id): requestId = id ?? ids.make()
        }
        let idHeader = (name: "apns-request-id", value: requestId)
        func json(_ status: Int, _ text: String, extra: [(name: String, value: String)] = []) -> (H2Response, APNsReason?) {
            let headers = [idHeader] + extra + (text.isEmpty ? [] : [(name: "content-type", value: "application/json")])
            return (H2Response(status: status, headers: headers, body: Array(text.utf8)), nil)
        }
        switch route {
        case .createChannel(let bundle):
            if r.body.isEmpty { return failure(.payloadEmpty, id: idHeader) }
            guard let object = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any] else {
                return failure(.badRequestPayload, id: idHeader)
            }
            guard object.keys.allSatisfy({ $0 == "message-storage-policy" || $0 == "push-type" }) else {
                return failure(.badRequestParams, id: idHeader)
            }
            guard let type = object["push-type"] as? String else { return failure(.missingPushType, id: idHeader) }
            guard type.lowercased() == "liveactivity" else { return failure(.invalidPushType, id: idHeader) }
            let policy = object["message-storage-policy"] as? Int ?? 0
            guard policy == 0 || policy == 1 else { return failure(.badRequestParams, id: idHeader) }
            guard liveChannels[bundle, default: 0] < APNsService.channelsPerApp else { return failure(.cannotCreateChannelConfig, id: idHeader) }
            channelsCreated += 1
            let raw = Array("fanout-channel-\(channelsCreated)".utf8)
            channels[raw] = Channel(bundle: bundle, storagePolicy: policy)
            channelOrder[bundle, default: []].append(raw)
            liveChannels[bundle, default: 0] += 1
            let app = bundle.withUnsafeBytes { pipeline.store.internApp($0) }
            _ = raw.withUnsafeBytes { pipeline.router.registerChannel($0, app: app) }
            if workers > 1 { outgoing.append(.channel(raw: raw, bundle: bundle, storagePolicy: policy, deleted: false)) }
            return json(201, "", extra: [(name: "apns-channel-id", value: Base64.encode(raw))])
        case .readChannel(let bundle), .deleteChannel(let bundle):
            let raw: [UInt8]
            switch RequestCheck.channelId(r.headers) {
            case .failure(let reason): return failure(reason, id: idHeader)
            case .success(let (decoded, _)): raw = decoded
            }
            guard let channel = channels[raw], !channel.deleted, channel.bundle == bundle else {
                return failure(.channelNotRegistered, id: idHeader)
            }
            if case .deleteChannel = route {
                channels[raw]!.deleted = true
                liveChannels[bundle, default: 1] -= 1
                if workers > 1 { outgoing.append(.channel(raw: raw, bundle: bundle, storagePolicy: 0, deleted: true)) }
                return json(204, "")
            }
            return json(200, "{\"message-storage-policy\":\(channel.storagePolicy),\"push-type\":\"LiveActivity\"}")
        case .listChannels(let bundle):
            let ids = channelOrder[bundle, default: []].filter { channels[$0]?.deleted == false }
            return json(200, "{\"channels\":[" + ids.map { "\"\(Base64.encode($0))\"" }.joined(separator: ",") + "]}")
        default:
            preconditionFailure()
        }
    }
}

/// JSON string quoting for the population file.
enum JSON {
    static func quote(_ bytes: UnsafeRawBufferPointer) -> String {
        var out = "\""
        for scalar in String(decoding: bytes, as: UTF8.self).unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}

/// What one serving worker tells another (several workers).
public enum PeerMessage: Sendable {
    case broadcast(RemoteBroadcast)
    case fanoutPart(origin: Int, id: Int, endNanos: UInt64)
    case channel(raw: [UInt8], bundle: [UInt8], storagePolicy: Int, deleted: Bool)
}

/// A broadcast answered by one worker, for the others' subscribers.
public struct RemoteBroadcast: Sendable {
    public var channel: [UInt8]
    public var headers: CheckedHeaders
    public var payload: [UInt8]
    public var arrivalNanos: UInt64
    public var origin: Int
    public var id: Int
}

/// The latency metrics of `fanout serve`, in report order.
public enum ServeMetric: Int, CaseIterable, Sendable {
    case service, delivery, fanout, validate, route

    public var name: String {
        switch self {
        case .service: "service"
        case .delivery: "delivery"
        case .fanout: "fanout"
        case .validate: "validate"
        case .route: "route"
        }
    }
}

/// One second of one worker: requests answered and each metric's histogram (compressed V2 encoding, empty
/// when no value was recorded).
public struct ServeInterval: Sendable {
    public var index: Int
    public var requests: Int
    public var encoded: [[UInt8]]
}
