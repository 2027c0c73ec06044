/// The state and the logic of a `Pipeline` (see there), as a struct so that a stage works on it in
/// place through one access.
struct PipelineCore {
    let rules: DeviceRules
    var schemas: SchemaSet
    var store = ActivityStore()
    var router = Router()
    var accounting = Accounting()
    var validator = PayloadValidator()

    // Scratch reused across pushes (no allocation in steady state).
    /// The decoded content record of the current push (see `ByteBuffer`: filled from empty).
    var record = ByteBuffer(capacity: 1024)
    private var decoded = DecodedContent()
    /// Decodes so far, and the one whose record `contentHash` is of (`appliedContentHash`).
    private var decodes: UInt64 = 0
    private var hashedDecode: UInt64 = .max
    private var contentHash: UInt64 = 0
    /// The decode that the one-pass judgement of the last validated push made (`PayloadOnePass`), its record
    /// in `preparedRecord`, while `preparedPending`: the push's first delivery under that schema takes it
    /// instead of decoding.
    private var prepared = DecodedContent()
    private var preparedRecord = ByteBuffer(capacity: 1024)
    private var preparedPending = false
    /// Whether a token push to an activity is judged in one pass when its payload has the encoders' form (off:
    /// always the general way; the tests compare the two).
    var onePass = true

    init(schemas: SchemaSet, rules: DeviceRules) {
        self.schemas = schemas
        self.rules = rules
    }

    /// Starts a push: resolves its target once (shared by validate and route).
    @inline(__always)
    mutating func begin(kind: TargetKind, target: UnsafeRawBufferPointer) -> Pipeline.InFlight {
        Pipeline.InFlight(kind: kind, resolution: router.resolveInPlace(kind, target))
    }

    // MARK: The whole path

    /// Validates, routes and applies one push at `nowMillis`. For a push-to-start, `newActivity` and
    /// `newToken` are the id and update token the device gives the activity it starts.
    @discardableResult
    mutating func push(
        kind: TargetKind, target: UnsafeRawBufferPointer, headers: PushHeaders, payload: UnsafeRawBufferPointer,
        nowMillis: Int64, newActivity: UnsafeRawBufferPointer? = nil, newToken: UnsafeRawBufferPointer? = nil
    ) -> PushVerdict {
        var flight = begin(kind: kind, target: target)
        if let reason = validate(&flight, headers: headers, payload: payload) { return .rejected(reason) }
        return routeAndApply(
            &flight, payload: payload, nowMillis: nowMillis, newActivity: newActivity, newToken: newToken)
    }

    /// ``push(kind:target:headers:payload:nowMillis:newActivity:newToken:)`` for headers the caller judged.
    mutating func push(
        kind: TargetKind, target: UnsafeRawBufferPointer, judgedPriority: Int64, payload: UnsafeRawBufferPointer,
        nowMillis: Int64, newActivity: UnsafeRawBufferPointer?, newToken: UnsafeRawBufferPointer?
    ) -> PushVerdict {
        var flight = begin(kind: kind, target: target)
        if let reason = validate(&flight, judgedPriority: judgedPriority, payload: payload) { return .rejected(reason) }
        return routeAndApply(
            &flight, payload: payload, nowMillis: nowMillis, newActivity: newActivity, newToken: newToken)
    }

    /// The rest of a push once validated: route, then apply on the recipients (or start the activity).
    @inline(__always)
    private mutating func routeAndApply(
        _ flight: inout Pipeline.InFlight, payload: UnsafeRawBufferPointer, nowMillis: Int64,
        newActivity: UnsafeRawBufferPointer?, newToken: UnsafeRawBufferPointer?
    ) -> PushVerdict {
        switch route(&flight) {
        case .unroutable(let reason): return .unroutable(reason)
        case .rejected(let reason): return .rejected(reason)
        case .routed(let recipients):
            switch flight.resolution {
            case .activity(let a):
                deliver(flight, payload: payload, to: a, nowMillis: nowMillis)
            case .channel(let c):
                // Recipients are the subscribers at this instant.
                var k = 0
                while k < router.subscribers[Int(c)].count {
                    deliver(flight, payload: payload, to: router.subscribers[Int(c)][k], nowMillis: nowMillis)
                    k += 1
                }
            case .startToken(let device, let app):
                start(
                    flight, payload: payload, device: device, app: app, nowMillis: nowMillis, id: newActivity,
                    token: newToken)
            default:
                preconditionFailure("routed push without recipients")
            }
            return .routed(recipients: recipients)
        }
    }

    // MARK: Stages

    /// Stage 1: what APNs would reject, DOMAIN §2's header rows (the topic's bundle against the target's) and the
    /// payload. Counts the push, and the rejection if any, unless `countsVerdict` is false: a broadcast replicated
    /// on every worker is counted by one of them only, while each counts the deliveries to its own subscribers.
    @inline(__always)
    mutating func validate(
        _ flight: inout Pipeline.InFlight, headers: PushHeaders, payload: UnsafeRawBufferPointer,
        countsVerdict: Bool = true
    ) -> RejectReason? {
        if countsVerdict { accounting.pushes += 1 }
        preparedPending = false
        let bundleApp: Int32
        switch flight.resolution {
        case .activity(let a): bundleApp = store.app[Int(a)]
        case .startToken(_, let app): bundleApp = app
        case .channel(let c): bundleApp = router.channelApp[Int(c)]
        default: bundleApp = Router.none
        }
        let reason: RejectReason?
        if bundleApp == Router.none {
            reason = validator.validate(headers: headers, payload: payload, target: flight.kind, targetBundle: nil)
        } else {
            // The topic's bundle is compared first (a read of the store), then the validator runs on
            // its own: no closure holds the store while the validator is mutated.
            let matches = store.appIds.withBytes(bundleApp) { PayloadValidator.topicNames($0, headers.topic) }
            if case .activity(let a) = flight.resolution, flight.kind == .token {
                var priority: Int64 = 0
                reason =
                    PayloadValidator.judgeHeaders(
                        headers, payloadCount: payload.count, target: .token, topicMatchesTarget: matches,
                        priority: &priority)
                    ?? judgePayload(payload, activity: a, priority: priority)
            } else {
                reason = validator.validate(
                    headers: headers, payload: payload, target: flight.kind, topicMatchesTarget: matches)
            }
        }
        return verdict(&flight, reason, countsVerdict)
    }

    /// Stage 1 for headers the caller judged: the payload alone.
    @inline(__always)
    mutating func validate(
        _ flight: inout Pipeline.InFlight, judgedPriority: Int64, payload: UnsafeRawBufferPointer,
        countsVerdict: Bool = true
    ) -> RejectReason? {
        if countsVerdict { accounting.pushes += 1 }
        preparedPending = false
        let reason: RejectReason?
        if case .activity(let a) = flight.resolution, flight.kind == .token {
            reason = judgePayload(payload, activity: a, priority: judgedPriority)
        } else {
            reason = validator.validateJudged(priority: judgedPriority, payload: payload, target: flight.kind)
        }
        return verdict(&flight, reason, countsVerdict)
    }

    /// The payload of a token push to activity `a` whose headers passed: in one pass under the activity's schema
    /// when it has the encoders' form (the decode kept for its delivery), else the general way.
    @inline(__always)
    private mutating func judgePayload(
        _ payload: UnsafeRawBufferPointer, activity a: Int32, priority: Int64
    ) -> RejectReason? {
        let schema = store.schema[Int(a)]
        if onePass && schema >= 0,
            let read = PayloadOnePass.parse(payload, layout: schemas.layoutView(schema), into: &preparedRecord)
        {
            validator.acceptOnePass(event: read.event, timestamp: read.timestamp, priority: priority)
            prepared.schema = schema
            prepared.ok = true
            prepared.hasContent = true
            prepared.staleDate = read.staleDate
            prepared.dismissalDate = read.dismissalDate
            prepared.relevance = read.relevance
            preparedPending = true
            return nil
        }
        return validator.validateJudged(priority: priority, payload: payload, target: .token)
    }

    /// A validation's end: the rejection counted, or the flight given the payload's `aps`.
    @inline(__always)
    private mutating func verdict(
        _ flight: inout Pipeline.InFlight, _ reason: RejectReason?, _ countsVerdict: Bool
    ) -> RejectReason? {
        if let reason {
            if countsVerdict { accounting.rejected[reason.rawValue] += 1 }
            return reason
        }
        flight.aps = validator.aps
        return nil
    }

    /// Stage 2: the recipients (DOMAIN §3.3). Counts the verdict and the deliveries to come.
    @inline(__always)
    mutating func route(_ flight: inout Pipeline.InFlight, countsVerdict: Bool = true) -> PushVerdict {
        if let reason = flight.resolution.unroutable {
            if countsVerdict { accounting.unroutable[reason.rawValue] += 1 }
            return .unroutable(reason)
        }
        let recipients: Int
        if case .channel(let c) = flight.resolution {
            recipients = router.subscribers[Int(c)].count
        } else {
            recipients = 1
        }
        if countsVerdict { accounting.routed += 1 }
        accounting.deliveries += recipients
        decoded.schema = -1  // decode afresh for this push
        return .routed(recipients: recipients)
    }

    /// Stage 3: one device applies an update or end to one of its activities (DOMAIN §3.4).
    @discardableResult
    mutating func deliver(
        _ flight: Pipeline.InFlight, payload: UnsafeRawBufferPointer, to a: Int32, nowMillis: Int64
    ) -> Outcome {
        let outcome = applyOutcome(flight.aps, payload: payload, to: a, nowMillis: nowMillis)
        accounting.outcomes[outcome.rawValue] += 1
        store.count(outcome, for: a)
        return outcome
    }

    /// Counts an outcome decided outside the device: a held push that `expired` before its device
    /// came back, or one `coalesced` away by a newer update (DOMAIN §3.3).
    mutating func settle(_ outcome: Outcome, for a: Int32) {
        accounting.outcomes[outcome.rawValue] += 1
        store.count(outcome, for: a)
    }

    /// Delivers a push that was validated and routed earlier and held while its device was offline:
    /// the payload is scanned again (it passed validation when sent) and applied now.
    @discardableResult
    mutating func deliverStored(
        kind: TargetKind, headers: PushHeaders, payload: UnsafeRawBufferPointer, to a: Int32, nowMillis: Int64
    ) -> Outcome {
        preparedPending = false
        let reason = validator.validate(headers: headers, payload: payload, target: kind, targetBundle: nil)
        precondition(reason == nil, "a held push was accepted when sent")
        var flight = Pipeline.InFlight(kind: kind, resolution: .activity(a))
        flight.aps = validator.aps
        decoded.schema = -1
        return deliver(flight, payload: payload, to: a, nowMillis: nowMillis)
    }

    /// Takes up a push that was validated and routed earlier and whose deliveries were interrupted (a
    /// broadcast applied in slices): the payload, kept by the caller, is scanned again for deliver;
    /// nothing is counted again.
    mutating func resume(
        kind: TargetKind, resolution: Router.Resolution, _ input: PushHeaderInput,
        payload: UnsafeRawBufferPointer
    ) -> Pipeline.InFlight {
        preparedPending = false
        let reason: RejectReason?
        switch input {
        case .headers(let headers):
            reason = validator.validate(headers: headers, payload: payload, target: kind, targetBundle: nil)
        case .judged(let priority):
            reason = validator.validateJudged(priority: priority, payload: payload, target: kind)
        }
        precondition(reason == nil, "a sliced push was accepted when sent")
        var flight = Pipeline.InFlight(kind: kind, resolution: resolution)
        flight.aps = validator.aps
        decoded.schema = -1
        return flight
    }

    @inline(__always)
    private mutating func applyOutcome(
        _ aps: ApsFields, payload: UnsafeRawBufferPointer, to a: Int32, nowMillis: Int64
    ) -> Outcome {
        let (early, schema) = store.admit(
            a, timestamp: aps.timestamp, priority: aps.priority, budgetPerHour: rules.budgetPerHour,
            nowMillis: nowMillis)
        if let early { return early }
        if decoded.schema != schema {
            if preparedPending && prepared.schema == schema {
                // Decoded by the one-pass judgement of this push (the record swapped in: no copy).
                swap(&record, &preparedRecord)
                decoded = prepared
                preparedPending = false
            } else {
                decoded = decodeUpdate(aps, payload: payload, schema: schema)
            }
            decodes &+= 1
        }
        let d = decoded
        guard d.ok else { return .decodeFailed }
        withExtendedLifetime(record) {
            store.applyDecoded(
                a, timestamp: aps.timestamp, record: d.hasContent ? record.bytes : nil, staleDate: d.staleDate,
                relevance: d.relevance, ends: aps.event == .end, dismissalDate: d.dismissalDate, nowMillis: nowMillis)
        }
        return .applied
    }

    /// FNV-1a of the content record the last applied update or end carried (`ContentRecord`'s bytes: the schema's
    /// fields in order, whatever else the content-state held left out), 0 for none (an end without content). Hashed
    /// once per decode: a broadcast's recipients of one schema share it.
    mutating func appliedContentHash() -> UInt64 {
        if hashedDecode != decodes {
            hashedDecode = decodes
            contentHash = decoded.hasContent ? Self.contentHash(record.bytes) : 0
        }
        return contentHash
    }

    /// The hash `appliedContentHash` gives a content record (never 0: that is "no content").
    @inline(__always)
    static func contentHash(_ record: UnsafeRawBufferPointer) -> UInt64 { max(FNV1a.hash(record), 1) }

    /// Decodes the device-side fields of an update or end (TRACE rule 12) under one schema. A
    /// broadcast decodes once per schema among its recipients: the result depends on nothing else.
    private mutating func decodeUpdate(
        _ aps: ApsFields, payload: UnsafeRawBufferPointer, schema: Int32
    ) -> DecodedContent {
        var result = DecodedContent()
        result.schema = schema
        var aps = aps
        if aps.tapeless {
            // Judged in one pass, its decode taken already: scan it again (it was accepted) for its members.
            let reason = validator.validateJudged(priority: aps.priority, payload: payload, target: .token)
            precondition(reason == nil, "a push judged in one pass is accepted the general way")
            aps = validator.aps
        }
        let tape = validator.tape.reading(payload)
        guard case .decoded(let stale) = optionalDate(tape, aps.staleDate),
            case .decoded(let dismissal) = optionalDate(tape, aps.dismissalDate),
            let relevance = optionalRelevance(tape, aps.relevanceScore)
        else { return result }
        let content = Int(aps.contentState)
        if content < 0 || tape[content].kind == .null {
            guard aps.event == .end else { return result }
            result.hasContent = false
        } else {
            record.removeAll()
            guard schemas.decodeRecordInPlace(schema, tape: tape, object: content, into: &record) else { return result }
            result.hasContent = true
        }
        result.staleDate = stale
        result.dismissalDate = dismissal
        result.relevance = relevance
        result.ok = true
        return result
    }

    enum OptionalDate {
        case decoded(Int64?)
        case invalid
    }

    /// Absent or null → none; an integral number → its value; anything else → invalid (decodeFailed).
    @inline(__always)
    func optionalDate(_ tape: JSONDocument, _ index: Int32) -> OptionalDate {
        if index < 0 || tape[Int(index)].kind == .null { return .decoded(nil) }
        guard let value = tape.int64(Int(index)) else { return .invalid }
        return .decoded(value)
    }

    /// Absent or null → 0; any finite number → its value; anything else → nil (decodeFailed).
    @inline(__always)
    func optionalRelevance(_ tape: JSONDocument, _ index: Int32) -> Double? {
        if index < 0 || tape[Int(index)].kind == .null { return 0 }
        return tape.double(Int(index))
    }

    // MARK: Operations on the population

    /// True when a new activity of `app` on the device would exceed a limit (TRACE rule 10).
    mutating func atLimit(device d: Int32, app: Int32, nowMillis: Int64) -> Bool {
        store.pruneDismissed(device: d, nowMillis: nowMillis)
        let live = store.liveCounts(device: d, app: app, nowMillis: nowMillis)
        return live.device >= rules.perDeviceLimit || live.app >= rules.perAppLimit
    }

    /// The app starts an activity locally (TRACE `request`). Returns nil when refused by a limit.
    /// The caller has checked that the id and token are new and that `content` decodes.
    @discardableResult
    mutating func request(
        id: UnsafeRawBufferPointer, device: UnsafeRawBufferPointer, app bundle: UnsafeRawBufferPointer,
        schema: Int32, content: UnsafeRawBufferPointer, staleDate: Double?, relevance: Double,
        token: UnsafeRawBufferPointer, channel: UnsafeRawBufferPointer?, nowMillis: Int64
    ) -> Int32? {
        accounting.requests += 1
        let d = store.internDevice(device)
        let app = store.internApp(bundle)
        if atLimit(device: d, app: app, nowMillis: nowMillis) {
            accounting.requestsLimitExceeded += 1
            return nil
        }
        let a = store.create(
            id: id, device: d, app: app, schema: schema, nowMillis: nowMillis, content: content,
            staleDate: staleDate, relevance: relevance, timestamp: nil)
        store.token[Int(a)] = router.assignUpdateToken(token, to: a, previous: Router.none)
        if let channel { subscribe(a, channel: channel) }
        return a
    }

    /// The activity joins a broadcast channel, leaving its previous one (TRACE rule 9).
    mutating func subscribe(_ a: Int32, channel id: UnsafeRawBufferPointer) {
        let c = router.registerChannel(id, app: store.app[Int(a)])
        let previous = store.channel[Int(a)]
        if previous == c { return }
        if previous != Router.none { router.removeSubscriber(a, channel: previous) }
        router.addSubscriber(a, channel: c, store: store)
        store.channel[Int(a)] = c
    }

    mutating func removeChannel(_ c: Int32) {
        for a in router.removeChannel(c) where store.channel[Int(a)] == c { store.channel[Int(a)] = ActivityStore.none }
    }

    /// The activity's update token changes; the old one stops routing at once.
    mutating func rotate(_ a: Int32, token: UnsafeRawBufferPointer) {
        store.token[Int(a)] = router.assignUpdateToken(token, to: a, previous: store.token[Int(a)])
    }

    /// A device's push-to-start token for an app (TRACE `startToken`).
    mutating func setStartToken(
        device: UnsafeRawBufferPointer, app bundle: UnsafeRawBufferPointer,
        token: UnsafeRawBufferPointer
    ) {
        let d = store.internDevice(device)
        let app = store.internApp(bundle)
        router.setStartToken(token, device: d, app: app)
    }

    /// A person dismisses the activity.
    mutating func dismiss(_ a: Int32, nowMillis: Int64) {
        store.dismiss(a, nowMillis: nowMillis)
    }
}

/// The device-side decoding of one push under one schema, cached across a broadcast's recipients.
struct DecodedContent {
    var schema: Int32 = -1
    var ok = false
    var hasContent = false
    var staleDate: Int64?
    var dismissalDate: Int64?
    var relevance: Double = 0
}
