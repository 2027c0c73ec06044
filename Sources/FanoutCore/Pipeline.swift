/// The fan-out core path for one population: validate → route → apply, with the accounting of
/// DOMAIN §6. One instance per worker (shared-nothing); not thread-safe.
///
/// `push` runs the whole path. The stages are also public (`validate`, `route`, `deliver`) so that
/// a caller can time each one; `push` is exactly their composition.
public final class Pipeline {
    /// Everything, in one struct: each call below is one access to `core`, and the stages inside work
    /// on it in place (no dynamic exclusivity check per field, no copies of the stores).
    /// `@exclusivity(unchecked)`: one thread owns a pipeline (shared-nothing) and every access below
    /// is one call that does not re-enter the pipeline, so a dynamic exclusivity check per stage would
    /// only cost time (it was about 300 instructions per push).
    @exclusivity(unchecked) private var core: PipelineCore

    public var rules: DeviceRules { core.rules }
    public var schemas: SchemaSet {
        _read { yield core.schemas }
    }
    public var store: ActivityStore {
        _read { yield core.store }
        _modify { yield &core.store }
    }
    public var router: Router {
        _read { yield core.router }
        _modify { yield &core.router }
    }
    public var accounting: Accounting {
        _read { yield core.accounting }
    }
    public var validator: PayloadValidator {
        _read { yield core.validator }
        _modify { yield &core.validator }
    }

    public init(schemas: SchemaSet, rules: DeviceRules) {
        core = PipelineCore(schemas: schemas, rules: rules)
    }

    /// Whether token pushes are judged in one pass when they can be (`PayloadOnePass`); tests compare both ways.
    var onePass: Bool {
        get { core.onePass }
        set { core.onePass = newValue }
    }

    /// A push in flight: what validate and route found, used by deliver.
    public struct InFlight: Sendable {
        public var kind: TargetKind
        public var resolution: Router.Resolution
        public var aps = ApsFields()

        public init(kind: TargetKind, resolution: Router.Resolution) {
            self.kind = kind
            self.resolution = resolution
        }
    }

    /// The app of activity `a`, read in place (a read through `store` from another module copies the store).
    @inline(__always)
    public func app(of a: Int32) -> Int32 { core.store.app[Int(a)] }

    /// The bundle id of app `app`, read in place.
    @inline(__always)
    public func withBundle<R>(of app: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        core.store.appIds.withBytes(app, body)
    }

    /// Starts a push: resolves its target once (shared by validate and route).
    @inline(__always)
    public func begin(kind: TargetKind, target: UnsafeRawBufferPointer) -> InFlight {
        core.begin(kind: kind, target: target)
    }

    /// Validates, routes and applies one push at `nowMillis`. For a push-to-start, `newActivity` and
    /// `newToken` are the id and update token the device gives the activity it starts.
    @discardableResult
    public func push(
        kind: TargetKind, target: UnsafeRawBufferPointer, headers: PushHeaders, payload: UnsafeRawBufferPointer,
        nowMillis: Int64, newActivity: UnsafeRawBufferPointer? = nil, newToken: UnsafeRawBufferPointer? = nil
    ) -> PushVerdict {
        core.push(
            kind: kind, target: target, headers: headers, payload: payload, nowMillis: nowMillis,
            newActivity: newActivity, newToken: newToken)
    }

    /// ``push(kind:target:headers:payload:nowMillis:newActivity:newToken:)`` for headers the caller judged
    /// (``PushHeaderInput/judged(priority:)``).
    @discardableResult
    public func push(
        kind: TargetKind, target: UnsafeRawBufferPointer, judgedPriority: Int64, payload: UnsafeRawBufferPointer,
        nowMillis: Int64, newActivity: UnsafeRawBufferPointer? = nil, newToken: UnsafeRawBufferPointer? = nil
    ) -> PushVerdict {
        core.push(
            kind: kind, target: target, judgedPriority: judgedPriority, payload: payload, nowMillis: nowMillis,
            newActivity: newActivity, newToken: newToken)
    }

    /// Stage 1: what APNs would reject. Counts the push, and the rejection if any, unless
    /// `countsVerdict` is false: a broadcast replicated on every worker is counted by one of them only,
    /// while each counts the deliveries to its own subscribers.
    @inline(__always)
    public func validate(
        _ flight: inout InFlight, headers: PushHeaders, payload: UnsafeRawBufferPointer, countsVerdict: Bool = true
    ) -> RejectReason? {
        core.validate(&flight, headers: headers, payload: payload, countsVerdict: countsVerdict)
    }

    /// Stage 1 for headers the caller judged (``PushHeaderInput/judged(priority:)``): the payload alone.
    @inline(__always)
    public func validate(
        _ flight: inout InFlight, judgedPriority: Int64, payload: UnsafeRawBufferPointer, countsVerdict: Bool = true
    ) -> RejectReason? {
        core.validate(&flight, judgedPriority: judgedPriority, payload: payload, countsVerdict: countsVerdict)
    }

    /// Stage 2: the recipients (DOMAIN §3.3). Counts the verdict and the deliveries to come.
    @inline(__always)
    public func route(_ flight: inout InFlight, countsVerdict: Bool = true) -> PushVerdict {
        core.route(&flight, countsVerdict: countsVerdict)
    }

    /// Stage 3: one device applies an update or end to one of its activities (DOMAIN §3.4). `payload` is
    /// the one the flight was validated (or resumed) with: the content is decoded from it, so the caller
    /// delivers while it holds the bytes (the validator's tape keeps no pointer to them).
    @discardableResult
    public func deliver(_ flight: InFlight, payload: UnsafeRawBufferPointer, to a: Int32, nowMillis: Int64) -> Outcome {
        core.deliver(flight, payload: payload, to: a, nowMillis: nowMillis)
    }

    /// FNV-1a of the content record the last applied update or end carried, 0 for none (`EventTracker` compares it
    /// with the event's); hashed once per decode.
    @inline(__always)
    public func appliedContentHash() -> UInt64 { core.appliedContentHash() }

    /// The hash `appliedContentHash` gives a content record built by `ContentRecord`'s writers.
    public static func contentHash(_ record: UnsafeRawBufferPointer) -> UInt64 { PipelineCore.contentHash(record) }

    /// Counts an outcome decided outside the device: a held push that `expired` before its device
    /// came back, or one `coalesced` away by a newer update (DOMAIN §3.3).
    public func settle(_ outcome: Outcome, for a: Int32) {
        core.settle(outcome, for: a)
    }

    /// Takes up a push that was validated and routed earlier and whose deliveries were interrupted (a
    /// broadcast applied in slices): the payload, kept by the caller, is scanned again for deliver;
    /// nothing is counted again.
    public func resume(
        kind: TargetKind, resolution: Router.Resolution, headers: PushHeaders,
        payload: UnsafeRawBufferPointer
    ) -> InFlight {
        core.resume(kind: kind, resolution: resolution, .headers(headers), payload: payload)
    }

    /// ``resume(kind:resolution:headers:payload:)`` for headers the caller judged.
    public func resume(
        kind: TargetKind, resolution: Router.Resolution, judgedPriority: Int64, payload: UnsafeRawBufferPointer
    ) -> InFlight {
        core.resume(kind: kind, resolution: resolution, .judged(priority: judgedPriority), payload: payload)
    }

    /// Delivers a push that was validated and routed earlier and held while its device was offline:
    /// the payload is scanned again (it passed validation when sent) and applied now.
    @discardableResult
    public func deliverStored(
        kind: TargetKind, headers: PushHeaders, payload: UnsafeRawBufferPointer, to a: Int32, nowMillis: Int64
    ) -> Outcome {
        core.deliverStored(kind: kind, headers: headers, payload: payload, to: a, nowMillis: nowMillis)
    }

    /// True when a new activity of `app` on the device would exceed a limit (TRACE rule 10).
    public func atLimit(device d: Int32, app: Int32, nowMillis: Int64) -> Bool {
        core.atLimit(device: d, app: app, nowMillis: nowMillis)
    }

    /// The app starts an activity locally (TRACE `request`). Returns nil when refused by a limit.
    /// The caller has checked that the id and token are new and that `content` decodes.
    @discardableResult
    public func request(
        id: UnsafeRawBufferPointer, device: UnsafeRawBufferPointer, app bundle: UnsafeRawBufferPointer,
        schema: Int32, content: UnsafeRawBufferPointer, staleDate: Double?, relevance: Double,
        token: UnsafeRawBufferPointer, channel: UnsafeRawBufferPointer?, nowMillis: Int64
    ) -> Int32? {
        core.request(
            id: id, device: device, app: bundle, schema: schema, content: content, staleDate: staleDate,
            relevance: relevance, token: token, channel: channel, nowMillis: nowMillis)
    }

    /// The activity joins a broadcast channel, leaving its previous one (TRACE rule 9).
    public func subscribe(_ a: Int32, channel id: UnsafeRawBufferPointer) {
        core.subscribe(a, channel: id)
    }

    /// Removes broadcast channel `c` (see `Router.removeChannel`); its subscribers are subscribed to none.
    public func removeChannel(_ c: Int32) {
        core.removeChannel(c)
    }

    /// The activity's update token changes; the old one stops routing at once.
    public func rotate(_ a: Int32, token: UnsafeRawBufferPointer) {
        core.rotate(a, token: token)
    }

    /// A device's push-to-start token for an app (TRACE `startToken`).
    public func setStartToken(
        device: UnsafeRawBufferPointer, app bundle: UnsafeRawBufferPointer,
        token: UnsafeRawBufferPointer
    ) {
        core.setStartToken(device: device, app: bundle, token: token)
    }

    /// A person dismisses the activity.
    public func dismiss(_ a: Int32, nowMillis: Int64) {
        core.dismiss(a, nowMillis: nowMillis)
    }
}
