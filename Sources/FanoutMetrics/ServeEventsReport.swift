/// What `--expect-events` found at the end of the run (docs/INGEST.md §5), every event loop's tracker judged and
/// added up (`judge`, in FanoutAPNs): the counts per event and in total, with examples, and the identities that tie
/// them together.
///
/// The judge's horizon H is the later of (end of serving − `--settle` − t0) and the latest intended offset of an event
/// delivered anywhere. Source `s`'s events are *due* up to `dueRank[s]`, the highest rank (timestamp order) among its
/// events intended by H; every follower of `s` is *expected* to end with the event of that rank, and each event of rank
/// ≤ `dueRank[s]` is, for each follower, exactly one of: delivered (applied, correlated, of its kind and content),
/// wrongKind or wrongContent (applied, but an end for an update or the reverse, or a content-state that drops or
/// changes a field the trigger carried), superseded (a newer event of the source was applied first: the device would
/// ignore it, DOMAIN §3.4), or missing (newer than the follower's newest applied event). A follower whose newest delivered event is not its source's due last event is *stale at the end*.
public struct ServeEventsReport: Sendable {
    /// Events in the schedule, those judged (due), and those left out for a timestamp shared within a source.
    public var events = 0
    public var dueEvents = 0
    public var sharedTimestamps = 0
    public var t0Nanos: UInt64 = 0
    /// `--settle`: how long before the end of serving an event had to be intended to be judged.
    public var settleNanos: UInt64 = 0
    public var horizonNanos: UInt64 = 0
    /// Deliveries: correlated (= delivered + wrongKind + wrongContent + duplicate + reordered + notApplied) and
    /// uncorrelated.
    public var correlated = 0
    public var uncorrelated = 0
    public var delivered = 0
    public var duplicate = 0
    public var reordered = 0
    public var notApplied = 0
    /// Applied, correlated, but the wrong kind (an end for an update, or the reverse) or content (a field the trigger
    /// carried dropped or changed): not delivered. `wrongShownAtEnd` of them were still the follower's newest event at
    /// the end (their freshness censored at the horizon).
    public var wrongKind = 0
    public var wrongContent = 0
    public var wrongShownAtEnd = 0
    public var wrongExamples: [String] = []
    public var early = 0
    /// Of `reordered`: the scenario's own out-of-order events (an older timestamp sent later by design); the rest
    /// (`reorderedByBackend`) is the backend's.
    public var reorderedByScenario = 0
    public var reorderedByBackend: Int { reordered - reorderedByScenario }
    /// (event, follower) pairs: expected = Σ over followers of the events due by time, or up to the newest it got
    /// when that is later; and how each ended.
    public var expected = 0
    public var superseded = 0
    public var missing = 0
    /// Superseded pairs whose own push never reached fanout (the backend dropped or coalesced it; a Lock Screen that
    /// skipped the event), and those of them a late push could not be matched to (over the tracker's bound).
    public var skipped = 0
    public var skippedUntracked = 0
    public var skippedExamples: [String] = []
    /// Every expected (event, follower) pair: from the event's intended time until the follower showed it or a newer
    /// event of its source (delivered: its endToEnd; superseded: the newer event's apply time); the missing pairs
    /// censored at the horizon (`freshnessCensored` of them, with the wrong ones still shown at the end): how long each
    /// Lock Screen was behind the game. A wrong pair's runs until a newer event was applied.
    public var freshness = LatencyHistogram()
    public var freshnessCensored = 0
    /// Due events with a missing follower: their fan-out completion is censored at the horizon.
    public var completionCensored = 0
    /// Followers whose final state is not their source's last due event.
    public var staleAtEnd = 0
    /// Due events every follower of whose source got delivered, and the others (followed by someone).
    public var completeEvents = 0
    public var incompleteEvents = 0
    public var eventsWithMissing = 0
    public var uncorrelatedExamples: [String] = []
    public var missingExamples: [String] = []
    public var staleExamples: [String] = []
    /// Per event (`ServeEvents` numbering): delivered, superseded, missing, duplicate, reordered, notApplied, and
    /// when its last follower applied it (0: none).
    public var perEvent = PerEvent()
    /// Fan-out completion of every due event followed by someone: its intended time → the last follower showing it
    /// or a newer event of its source; an event with a missing follower censored at the horizon
    /// (`completionCensored`). Overall and by size (`Metric.completionMetrics`).
    public var completion = LatencyRecorder()
    /// Every missing (event, follower) pair's reason: the fault that refused its push (or the broadcast that carried
    /// it) when the backend never resent it, the device's or the service's verdict on a push that reached it without
    /// being applied, else "never pushed"; with a few examples each. missing = Σ missingByReason.
    public var missingByReason: [String: Int] = [:]
    public var missingReasonExamples: [String: [String]] = [:]
    /// What became of the (event, follower) pairs whose push a fault refused and the backend never resent.
    public var refusals = Refusals()
    /// `faults.rotationWhileServing` (nil: the scenario's tokens do not rotate while serving, and summary.json has no
    /// `rotations` nor `sentToUnregistered`, as before).
    public var rotations: Rotations?
    /// Token pushes to an old token after its 410 Unregistered was answered (a backend that does not prune the tokens
    /// APNs told it are dead); 0 without rotations while serving.
    public var sentToUnregistered: Int { rotations?.sentToUnregistered ?? 0 }

    /// The update tokens rotated while serving (every loop), what the backend did with the old ones, and the new
    /// tokens' registrations (`--register`, while serving): scheduled = registered + registration.failed +
    /// unregisteredAtShutdown (a rotation's line is sent when it rotates; one not due yet when serving stopped is
    /// unregistered at shutdown), and scheduled ≥ rotated ≥ retired (the state when serving stopped).
    public struct Rotations: Sendable, Equatable {
        public var scheduled = 0
        public var rotated = 0
        public var retired = 0
        public var graceSeconds = 0.0
        /// Token pushes to an old token within its grace (delivered), first 410s answered (one per old token at
        /// most), and pushes to an old token after its 410 (`sentToUnregistered`).
        public var pushedInGrace = 0
        public var answeredUnregistered = 0
        public var sentToUnregistered = 0
        /// The new tokens' registrations: 2xx, failed (every attempt), still pending when serving stopped; the
        /// requests (every attempt) by status.
        public var registration = BackendTelling()
        public var registered: Int { registration.done }
        public var unregisteredAtShutdown: Int { registration.pendingAtShutdown }
        public init() {}
        /// Every rotation drawn was registered, failed, or not registered when serving stopped.
        public var addsUp: Bool {
            registration.addsUp(scheduled: scheduled) && scheduled >= rotated && rotated >= retired
        }
    }

    /// `faults.appEvents` (nil: the scenario has none, and summary.json has no `appEvents` nor `sentAfterAppEvent`, as
    /// before).
    public var appEvents: AppEvents?
    /// Token pushes to an activity the app's side ended (or to an uninstalled app's retired token) later than the app
    /// event + its grace (a backend that ignores app events); 0 without app events.
    public var sentAfterAppEvent: Int { appEvents?.sentAfter ?? 0 }

    /// `faults.kickoff` (nil: the scenario has none, and summary.json has no `kickoff`, as before).
    public var kickoff: Kickoff?

    /// The app events while serving (every loop), what the backend sent afterwards, and the requests telling it
    /// (`--app-events`): scheduled = told + failed + untoldAtShutdown, scheduled ≥ applied.
    public struct AppEvents: Sendable, Equatable {
        /// Drawn, applied by the end of serving (by kind: `dismissed`, `disabled`, `uninstalled`).
        public var scheduled = 0
        public var applied = 0
        public var appliedByKind: [String: Int] = [:]
        public var graceSeconds = 0.0
        /// (event, follower) pairs of the source's due events intended after a follower's app event − 1 s: not
        /// expected any more (outside `expected`).
        public var notExpected = 0
        /// Token pushes to an ended activity (or a retired token) within the grace, and after it (by kind).
        public var pushedInGrace = 0
        public var sentAfter = 0
        public var sentAfterByKind: [String: Int] = [:]
        /// The requests to `--app-events`: answered 2xx, failed (every attempt), not told when serving stopped; every
        /// attempt by status.
        public var telling = BackendTelling()
        public var told: Int { telling.done }
        public var failed: Int { telling.failed }
        public var untoldAtShutdown: Int { telling.pendingAtShutdown }
        public init() {}
        public var addsUp: Bool {
            telling.addsUp(scheduled: scheduled) && scheduled >= applied
                && applied == appliedByKind.values.reduce(0, +) && sentAfter == sentAfterByKind.values.reduce(0, +)
        }
    }

    /// The token pushes and broadcasts refused by `--faults` that never came back (`RetryCounts.unresent`), and the
    /// (event, follower) pairs they carried: pairs = missing + superseded + delivered + notDue. A pair is delivered
    /// when its follower's newest event is that one (a resend the retry tracker did not match delivered it), superseded
    /// when a newer event of its source reached the follower, not due when the judge did not expect it; `unmatched`
    /// pushes carry no event of a follower's source (no readable aps.timestamp, an unknown token or channel).
    public struct Refusals: Sendable, Equatable {
        public var pushes = 0
        public var broadcasts = 0
        public var unmatched = 0
        public var pairs = 0
        public var missing = 0
        public var superseded = 0
        public var delivered = 0
        public var notDue = 0
        public init() {}
        public var addsUp: Bool { pairs == missing + superseded + delivered + notDue }
    }

    /// The reason of a missing pair whose push fault `kind` (an index of `RetryCounts.kinds`) refused.
    public static func refusedReason(kind: Int, broadcast: Bool) -> String {
        let what = ["refused 503 ServiceUnavailable", "refused 429 TooManyRequests", "refused 500 InternalServerError",
                    "reset (RST_STREAM INTERNAL_ERROR)"][kind]
        return (broadcast ? "broadcast " : "") + what + ", never resent"
    }
    public static let neverPushed = "never pushed"
    /// `--register`: the activity's registration never succeeded (fanout's side, or the backend refusing it).
    public static let notRegistered = "activity not registered"
    /// Rotation while serving: the backend pushed the pair to the activity's old token after its grace (410).
    public static let pushedToRetired = "pushed to a retired token (410 Unregistered)"
    /// Rotation while serving: the new token's registration never succeeded (the event was due after the old token
    /// stopped working), so the backend could not know it.
    public static let rotationNotRegistered = "new token not registered (rotation while serving)"
    /// Rotation while serving: the new token's registration succeeded, the event was due after the old token stopped
    /// working, and no push of it reached fanout (a backend that never pushes to newly registered tokens).
    public static let rotationNotPushed = "new token registered, never pushed to (rotation while serving)"

    public struct PerEvent: Sendable, Equatable {
        public var due: [Bool] = []
        public var delivered: [Int32] = []
        public var superseded: [Int32] = []
        public var missing: [Int32] = []
        public var duplicate: [Int32] = []
        public var reordered: [Int32] = []
        public var notApplied: [Int32] = []
        public var wrongKind: [Int32] = []
        public var wrongContent: [Int32] = []
        public var lastApplyNanos: [UInt64] = []
        public var skipped: [Int32] = []
        /// The missing pairs of the events that have any for a reason other than "never pushed", by reason (the rest
        /// of `missing[e]` were never pushed).
        public var missingByReason: [Int32: [String: Int32]] = [:]

        public init() {}

        /// `n` events, every count column and `lastApplyNanos` at 0 (`due` is the judge's).
        public init(events n: Int) {
            let zeros = [Int32](repeating: 0, count: n)
            for (column, _) in ServeEventsReport.perEventCounts { self[keyPath: column] = zeros }
            lastApplyNanos = [UInt64](repeating: 0, count: n)
        }

        /// Adds one event loop's columns (its tracker's; the same events): every count column summed,
        /// `lastApplyNanos` the later of the two.
        public mutating func add(loop other: PerEvent) {
            for (column, _) in ServeEventsReport.perEventCounts {
                self[keyPath: column] = zip(self[keyPath: column], other[keyPath: column]).map(+)
            }
            lastApplyNanos = zip(lastApplyNanos, other.lastApplyNanos).map(max)
        }

        /// Event `e`'s missing pairs by reason, "never pushed" included.
        public func missingReasons(_ e: Int) -> [String: Int32] {
            var out = missingByReason[Int32(e)] ?? [:]
            let never = missing[e] - out.values.reduce(0, +)
            if never > 0 { out[ServeEventsReport.neverPushed] = never }
            return out
        }
    }

    public init() {}

    /// expected = delivered + wrong + superseded + missing (pairs), and correlated = delivered + wrong + duplicate +
    /// reordered + notApplied (deliveries), wrong = wrongKind + wrongContent; each side is counted on its own path, so
    /// a dropped count breaks one.
    public var pairsAddUp: Bool { expected == delivered + wrongKind + wrongContent + superseded + missing }
    public var deliveriesAddUp: Bool {
        correlated == delivered + wrongKind + wrongContent + duplicate + reordered + notApplied
    }
    /// The per-event columns add up to the totals.
    public var perEventAddsUp: Bool {
        Self.perEventCounts.allSatisfy { column, total in
            perEvent[keyPath: column].reduce(0) { $0 + Int($1) } == self[keyPath: total]
        }
    }

    /// Each per-event count column with its total: the columns ``PerEvent/init(events:)`` starts at 0 and
    /// `perEventAddsUp` checks.
    static var perEventCounts: [(column: WritableKeyPath<PerEvent, [Int32]>, total: KeyPath<Self, Int>)] {
        [
            (\.delivered, \.delivered), (\.superseded, \.superseded), (\.missing, \.missing),
            (\.duplicate, \.duplicate), (\.reordered, \.reordered), (\.notApplied, \.notApplied),
            (\.skipped, \.skipped), (\.wrongKind, \.wrongKind), (\.wrongContent, \.wrongContent),
        ]
    }
    /// freshness counts every expected pair once: expected = its count, the censored ones = missing + the wrong pairs
    /// shown at the end, and skipped ≤ superseded.
    public var freshnessAddsUp: Bool {
        freshness.totalCount == UInt64(expected) && freshnessCensored == missing + wrongShownAtEnd
            && skipped <= superseded && wrongShownAtEnd <= wrongKind + wrongContent
    }
    /// missing = Σ missingByReason.
    public var reasonsAddUp: Bool { missing == missingByReason.values.reduce(0, +) }
    public var identitiesHold: Bool {
        pairsAddUp && deliveriesAddUp && perEventAddsUp && reasonsAddUp && refusals.addsUp && freshnessAddsUp
            && (rotations?.addsUp ?? true) && (appEvents?.addsUp ?? true) && (kickoff?.addsUp ?? true)
    }
}
