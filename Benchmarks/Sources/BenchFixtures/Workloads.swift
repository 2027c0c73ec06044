import FanoutCore

/// Token updates to a population of live activities, through FanoutCore's public API only: each
/// stage on its own (`encode`, `validate`, `route`, `apply`) and the whole path (`update`).
///
/// Update `k` goes to activity `k % activityCount` with content variant `k % 16` and a timestamp one
/// second later than the previous update's, so every update is `applied`: the common case, and the
/// one that does the most work (decode the content-state, store it, keep the relevance order).
/// Everything that grows (content slots, scratch buffers, interner tables) is grown in `init` by a
/// warm-up pass, so the measured code allocates nothing.
public final class TokenWorkload {
    public let pipeline: Pipeline
    public let activityCount: Int
    /// `@exclusivity(unchecked)` (as `Pipeline`'s state): one thread drives a workload and no access re-enters it, so
    /// a dynamic exclusivity check per update (about 190 instructions for these two properties, runtime calls the
    /// pipeline does not make) would be the harness's cost counted as the pipeline's.
    @exclusivity(unchecked) public private(set) var encoder = PayloadEncoder()
    /// The `aps.timestamp` of the last update encoded.
    @exclusivity(unchecked) public private(set) var timestamp = Match.epochSeconds
    public let schema = Match.schema

    private var activities: [Int32] = []
    private let tokens: ByteSlab
    private let records: ByteSlab
    private let constants = ByteSlab(strings: [Match.pushType, Match.topic])
    /// Variant `v` encoded once (the validate stage's input).
    public let payloads: ByteSlab
    public let headers: PushHeaders
    private var validateFlight: Pipeline.InFlight
    private var applyFlight: Pipeline.InFlight
    private let applyPayload = StableBuffer(capacity: 4096)

    public init(activities count: Int = 1000, activitiesPerDevice: Int = 3) {
        activityCount = count
        pipeline = Pipeline(schemas: Self.schemas(), rules: DeviceRules())
        tokens = ByteSlab(strings: (0..<count).map(Match.token))
        var recordList: [[UInt8]] = []
        for v in 0..<Match.variantCount {
            var record: [UInt8] = []
            Match.content(v).appendRecord(to: &record)
            recordList.append(record)
        }
        records = ByteSlab(recordList)
        headers = PushHeaders(
            pushType: .string(constants[0]), topic: .string(constants[1]), priority: .integer(10),
            expiration: .integer(0))
        var encoded: [[UInt8]] = []
        var scratch = PayloadEncoder()
        for v in 0..<Match.variantCount {
            scratch.encode(
                event: .update, timestamp: Match.epochSeconds + 1 + Int64(v), content: records[v], schema: schema,
                staleDate: Match.staleDateSeconds, relevanceScore: Match.relevanceScore)
            encoded.append(scratch.bytes)
        }
        payloads = ByteSlab(encoded)
        let placeholder = Pipeline.InFlight(kind: .token, resolution: .unknownToken)
        validateFlight = placeholder
        applyFlight = placeholder
        populate(activitiesPerDevice: activitiesPerDevice)
        validateFlight = pipeline.begin(kind: .token, target: tokens[0])
        // Warm up: every stage, every activity, every variant, a few rounds.
        for k in 0..<(4 * max(count, Match.variantCount)) {
            let applied = pipeline.accounting[.applied]
            precondition(update(k) == .routed(recipients: 1) && pipeline.accounting[.applied] == applied + 1)
            precondition(validate(k) == nil && route(k) == .routed(recipients: 1))
        }
        prepareApply()
        for k in 0..<count { precondition(apply(k) == .applied) }
    }

    static func schemas() -> SchemaSet {
        var set = SchemaSet()
        set.add(Match.schema)
        return set
    }

    private func populate(activitiesPerDevice: Int) {
        let record = Match.largestRecord()
        pipeline.store.reserveCapacity(
            activities: activityCount, devices: activityCount / activitiesPerDevice + 1,
            contentBytes: activityCount * (record.count + 8), idBytes: activityCount * 12)
        pipeline.router.reserveUpdateTokens(activityCount, bytes: activityCount * 64)
        let bundle = Array(Match.bundle.utf8)
        for i in 0..<activityCount {
            let id = Array(Match.activityId(i).utf8)
            let device = Array(Match.deviceId(i / activitiesPerDevice).utf8)
            let created = id.withUnsafeBytes { id in
                device.withUnsafeBytes { device in
                    bundle.withUnsafeBytes { bundle in
                        record.withUnsafeBytes { content in
                            pipeline.request(
                                id: id, device: device, app: bundle, schema: 0, content: content, staleDate: nil,
                                relevance: Match.relevanceScore, token: tokens[i], channel: nil,
                                nowMillis: Match.epochSeconds * 1000)
                        }
                    }
                }
            }
            guard let created else { preconditionFailure("request refused: activity \(i)") }
            activities.append(created)
        }
    }

    // MARK: Stages

    /// encode: the payload of the next update with content variant `v`; returns its byte count.
    @inline(__always)
    @discardableResult
    public func encode(variant v: Int) -> Int {
        timestamp += 1
        return encoder.encode(
            event: .update, timestamp: timestamp, content: records[v & (Match.variantCount - 1)], schema: schema,
            staleDate: Match.staleDateSeconds, relevanceScore: Match.relevanceScore)
    }

    /// validate: the headers and the pre-encoded payload of variant `k % 16` (APNs's checks).
    @inline(__always)
    public func validate(_ k: Int) -> RejectReason? {
        pipeline.validate(&validateFlight, headers: headers, payload: payloads[k & (Match.variantCount - 1)])
    }

    /// route: resolves activity `k`'s token and gives the verdict.
    @inline(__always)
    public func route(_ k: Int) -> PushVerdict {
        var flight = pipeline.begin(kind: .token, target: tokens[k % activityCount])
        return pipeline.route(&flight)
    }

    /// Encodes and validates the payload that `apply` delivers next (a newer timestamp); call it
    /// before each measured batch of `apply` calls, outside the measured region.
    public func prepareApply(variant v: Int = 0) {
        encode(variant: v)
        encoder.withPayload { applyPayload.assign($0) }
        applyFlight = pipeline.begin(kind: .token, target: tokens[0])
        precondition(pipeline.validate(&applyFlight, headers: headers, payload: applyPayload.bytes) == nil)
    }

    /// apply: activity `k` applies the prepared update (decode the content-state, rules, store).
    /// Each call first gives the route verdict (a few counter updates), which starts a new push:
    /// the content-state is decoded again, as for a token update.
    @inline(__always)
    public func apply(_ k: Int) -> Outcome {
        _ = pipeline.route(&applyFlight)
        return pipeline.deliver(
            applyFlight, payload: applyPayload.bytes, to: activities[k % activityCount], nowMillis: Match.nowMillis)
    }

    /// The whole path for update `k`: encode → validate → route → apply.
    @inline(__always)
    @discardableResult
    public func update(_ k: Int) -> PushVerdict {
        encode(variant: k)
        return encoder.withPayload { payload in
            pipeline.push(
                kind: .token, target: tokens[k % activityCount], headers: headers, payload: payload,
                nowMillis: Match.nowMillis)
        }
    }
}

/// One broadcast channel with `subscribers` activities (one per device); `broadcast()` sends one
/// update through the whole path and every subscriber applies it.
public final class BroadcastWorkload {
    public let pipeline: Pipeline
    public let subscribers: Int
    public private(set) var encoder = PayloadEncoder()
    public private(set) var timestamp = Match.epochSeconds
    public let schema = Match.schema
    private let records: ByteSlab
    private let constants = ByteSlab(strings: [Match.pushType, Match.topic, Match.channel])
    private let headers: PushHeaders
    private var variant = 0

    public init(subscribers: Int = 10_000) {
        self.subscribers = subscribers
        pipeline = Pipeline(schemas: TokenWorkload.schemas(), rules: DeviceRules())
        var recordList: [[UInt8]] = []
        for v in 0..<Match.variantCount {
            var record: [UInt8] = []
            Match.content(v).appendRecord(to: &record)
            recordList.append(record)
        }
        records = ByteSlab(recordList)
        headers = PushHeaders(
            pushType: .string(constants[0]), topic: .string(constants[1]), priority: .integer(10),
            expiration: .integer(0))
        populate()
        for _ in 0..<3 { precondition(broadcast() == .routed(recipients: subscribers)) }
        precondition(pipeline.accounting.outcomes[Outcome.applied.rawValue] == pipeline.accounting.deliveries)
    }

    private func populate() {
        let record = Match.largestRecord()
        let bundle = Array(Match.bundle.utf8)
        pipeline.store.reserveCapacity(
            activities: subscribers, devices: subscribers, contentBytes: subscribers * (record.count + 8),
            idBytes: subscribers * 12)
        pipeline.router.reserveUpdateTokens(subscribers, bytes: subscribers * 64)
        let app = bundle.withUnsafeBytes { pipeline.store.internApp($0) }
        _ = pipeline.router.registerChannel(constants[2], app: app)
        pipeline.router.reserveSubscribers(channel: constants[2], count: subscribers)
        for i in 0..<subscribers {
            let id = Array(Match.activityId(i).utf8)
            let device = Array(Match.deviceId(i).utf8)
            let token = Array(Match.token(i).utf8)
            let created = id.withUnsafeBytes { id in
                device.withUnsafeBytes { device in
                    bundle.withUnsafeBytes { bundle in
                        record.withUnsafeBytes { content in
                            token.withUnsafeBytes { token in
                                pipeline.request(
                                    id: id, device: device, app: bundle, schema: 0, content: content, staleDate: nil,
                                    relevance: Match.relevanceScore, token: token, channel: constants[2],
                                    nowMillis: Match.epochSeconds * 1000)
                            }
                        }
                    }
                }
            }
            precondition(created != nil, "request refused: activity \(i)")
        }
    }

    /// One broadcast: encode → validate → route → apply by every subscriber.
    @discardableResult
    public func broadcast() -> PushVerdict {
        timestamp += 1
        variant = (variant + 1) & (Match.variantCount - 1)
        encoder.encode(
            event: .update, timestamp: timestamp, content: records[variant], schema: schema,
            staleDate: Match.staleDateSeconds, relevanceScore: Match.relevanceScore)
        return encoder.withPayload { payload in
            pipeline.push(
                kind: .channel, target: constants[2], headers: headers, payload: payload, nowMillis: Match.nowMillis)
        }
    }
}
