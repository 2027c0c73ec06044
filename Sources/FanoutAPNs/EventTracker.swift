import FanoutCore
import FanoutMetrics
import FanoutSim

/// One event loop's correlation of pushes with the scenario's events (`--expect-events`, docs/INGEST.md §5): every
/// delivery to an activity is matched by (the activity's source, `aps.timestamp`) and classified; the arrays are
/// sized once, when the tracker is made, so a delivery allocates nothing. Owned by its `APNsService`.
///
/// A correlated delivery of event `e` (rank `r` in its source) to activity `a` whose newest correlated event so far
/// has rank `l` (−1: none) is exactly one of:
/// - `duplicate`: r == l (the same event again);
/// - `reordered`: r < l (an older event after a newer one; the device ignores it as stale, DOMAIN §3.4);
/// - `notApplied`: r > l but the device did not apply it (stale against an uncorrelated push's timestamp, after the
///   activity ended, throttled);
/// - `delivered`: r > l and applied, of the event's kind (update or end) and with its content: the content record
///   (the schema's fields, in order; fields the backend added are its business) equal to the one the trigger carried
///   (`ServeEvents.contentHash`). The events of ranks l+1 ..< r were never applied to `a` and now never will be (the
///   device would ignore them as stale): each is counted `superseded` for `a`, and `endToEnd` is recorded;
/// - `wrongKind` / `wrongContent`: r > l and applied, but an end for an update or the reverse / a content record that
///   drops or changes a field the trigger carried. The pair ends there, not delivered: the ranks below it are
///   superseded as for a delivery, no endToEnd is recorded, and the Lock Screen stays behind on that event (its
///   freshness runs) until a newer event of the source is applied, or to the judge's horizon, censored.
///
/// Freshness (how long `a`'s Lock Screen was behind its source) is recorded for every pair as it ends: a delivered
/// pair's is its endToEnd, a superseded pair's runs to the apply time of the newer event that covered it (the judge
/// adds the missing pairs, censored at its horizon). A superseded pair whose own push never reached fanout before it
/// was covered (no push of it was rejected or left unapplied) is *skipped*: the backend dropped or coalesced it; a
/// late push of it (then `reordered`) takes it back out of `skipped`.
public struct EventTracker {
    public let events: ServeEvents
    /// The source each local activity follows (-1: none): from the start, or from its kickoff (`follow`); other
    /// activities started by push-to-start follow none.
    var sourceOf: [Int32]
    /// Per local activity the lowest rank expected of it: 0, or for an activity started by a kickoff the first
    /// event of its source intended at or after the source's start (`follow`).
    var fromRank: [Int32]
    /// The rank of each local activity's newest delivered event (-1: none yet).
    var last: [Int32]
    /// Whether that event arrived wrong (`wrongKind`, `wrongContent`): its freshness ends when a newer one is applied.
    var lastWrong: [Bool]
    /// Per event, on this loop: the report's columns (delivered, superseded, duplicate, reordered, notApplied,
    /// wrongKind, wrongContent, skipped: superseded pairs whose push never reached fanout; lastApplyNanos), which the
    /// judge adds up over the loops (`due` and `missing` are the judge's own).
    var perEvent: ServeEventsReport.PerEvent
    /// Per event: the latest instant a follower here showed the event or a newer one of its source (0: none yet).
    var lastCoverNanos: [UInt64]
    /// Freshness of the pairs that ended here (delivered or superseded).
    public internal(set) var freshness = LatencyHistogram()
    /// Skipped (activity, event) pairs, for a late push to take back (at most `pairNotesCapacity`; more are counted in
    /// `skippedUntracked` and stay skipped whatever arrives later).
    var skippedPairs: Set<UInt64> = []
    var skippedUntracked = 0
    /// Totals on this loop.
    public internal(set) var correlated = 0
    public internal(set) var uncorrelated = 0
    /// Reordered deliveries of the scenario's own out-of-order events (sent late by design, not by the backend).
    public internal(set) var reorderedByScenario = 0
    /// Deliveries applied before their event's intended time (recorded as endToEnd 1 ns).
    public internal(set) var early = 0
    var uncorrelatedExamples: [String] = []
    var wrongExamples: [String] = []
    /// The latest intended offset of an event delivered here (the judge's horizon takes it in).
    var latestDeliveredOffset: UInt64 = 0
    /// (activity, event) pairs a push reached without being applied, and why (the newest such push's reason: the
    /// device's outcome, or the service's rejection): the judge names them as the reason a delivery is missing.
    /// Filled on those paths only; at most `pairNotesCapacity` pairs (more are counted in `pairNotesOver`).
    var pairNotes: [UInt64: String] = [:]
    var pairNotesOver = 0
    static let pairNotesCapacity = 100_000
    private var tape = JSONTape()

    public init(events: ServeEvents, sourceOf: [Int32]) {
        self.events = events
        self.sourceOf = sourceOf
        last = [Int32](repeating: -1, count: sourceOf.count)
        fromRank = [Int32](repeating: 0, count: sourceOf.count)
        lastWrong = [Bool](repeating: false, count: sourceOf.count)
        let n = events.count
        perEvent = ServeEventsReport.PerEvent(events: n)
        lastCoverNanos = [UInt64](repeating: 0, count: n)
        uncorrelatedExamples.reserveCapacity(ServeStats.examplesPerFinding)
    }

    public enum Verdict: Equatable {
        case uncorrelated, duplicate, reordered, notApplied, wrongKind, wrongContent
        /// Delivered: endToEnd = apply time − (t0 + the event's offset), at least 1 ns.
        case delivered(endToEndNanos: UInt64)
    }

    /// Classifies one delivery to local activity `a` of a push carrying `timestamp`, an end or not (`end`), applied
    /// (or not: `outcome`) at `nowNanos`, with content record hash `contentHash` (`Pipeline.appliedContentHash` when
    /// applied, else anything); `t0Nanos` is the events' t0. O(log events of the source) plus the superseded events it
    /// passes.
    @inline(__always)
    public mutating func correlate(
        _ a: Int32, timestamp: Int64, end: Bool, outcome: Outcome, contentHash: UInt64,
        nowNanos: UInt64, t0Nanos: UInt64
    ) -> Verdict {
        let i = Int(a)
        let s = i < sourceOf.count ? Int(sourceOf[i]) : -1
        let e = s >= 0 ? Int(events.find(source: s, timestamp: timestamp)) : -1
        guard e >= 0 else {
            uncorrelated += 1
            return .uncorrelated
        }
        correlated += 1
        let r = events.rank[e]
        let l = last[i]
        if r == l {
            perEvent.duplicate[e] += 1
            return .duplicate
        }
        if r < l {
            perEvent.reordered[e] += 1
            if events.outOfOrder[e] { reorderedByScenario += 1 }
            if !skippedPairs.isEmpty, skippedPairs.remove(UInt64(i) << 32 | UInt64(e)) != nil {
                perEvent.skipped[e] -= 1
            }
            return .reordered
        }
        guard outcome == .applied else {
            perEvent.notApplied[e] += 1
            note(i, e, "pushed, not applied by the device (\(outcome.name))")
            return .notApplied
        }
        let base = Int(events.sourceStart[s])
        var p = Int(l) + 1
        while p < Int(r) {
            let covered = Int(events.bySource[base + p])
            perEvent.superseded[covered] += 1
            lastCoverNanos[covered] = max(lastCoverNanos[covered], nowNanos)
            freshness.record(Self.since(t0Nanos &+ events.offsetNanos[covered], nowNanos))
            if pairNotes.isEmpty || pairNotes[UInt64(i) << 32 | UInt64(covered)] == nil { skip(i, covered) }
            p += 1
        }
        if lastWrong[i] {
            // The wrong event shown until now: behind the game since its intended time.
            let shown = Int(events.bySource[base + Int(l)])
            freshness.record(Self.since(t0Nanos &+ events.offsetNanos[shown], nowNanos))
            lastCoverNanos[shown] = max(lastCoverNanos[shown], nowNanos)
            lastWrong[i] = false
        }
        last[i] = r
        if (events.kind[e] == 1) != end {
            perEvent.wrongKind[e] += 1
            lastWrong[i] = true
            return .wrongKind
        }
        if contentHash != events.contentHash[e] {
            perEvent.wrongContent[e] += 1
            lastWrong[i] = true
            return .wrongContent
        }
        perEvent.delivered[e] += 1
        perEvent.lastApplyNanos[e] = max(perEvent.lastApplyNanos[e], nowNanos)
        lastCoverNanos[e] = max(lastCoverNanos[e], nowNanos)
        let offset = events.offsetNanos[e]
        latestDeliveredOffset = max(latestDeliveredOffset, offset)
        let intended = t0Nanos &+ offset
        let endToEnd = Self.since(intended, nowNanos)
        freshness.record(endToEnd)
        if nowNanos <= intended { early += 1 }
        return .delivered(endToEndNanos: endToEnd)
    }

    /// Local activity `a`, started by a kickoff, follows source `s` from now on: the events of `s` intended at or after
    /// `fromNanos` (the source's start) are expected of it, the earlier ones are not (as if it had shown them: a push
    /// of one is `duplicate` or `reordered`). Activities between the last known and `a` follow nothing.
    mutating func follow(_ a: Int32, source s: Int32, fromNanos: UInt64) {
        let i = Int(a)
        while sourceOf.count <= i {
            sourceOf.append(-1)
            last.append(-1)
            fromRank.append(0)
            lastWrong.append(false)
        }
        var from: Int32 = 0
        for e in events.events(of: Int(s)) where events.offsetNanos[Int(e)] < fromNanos {
            from = max(from, events.rank[Int(e)] + 1)
        }
        sourceOf[i] = s
        fromRank[i] = from
        last[i] = from - 1
    }

    /// From `intended` to `now`, at least 1 ns (a delivery before its intended time counts as 1 ns).
    @inline(__always)
    static func since(_ intended: UInt64, _ now: UInt64) -> UInt64 { now > intended ? now - intended : 1 }

    /// Activity `a`'s pair for event `e` was superseded before any push of it reached fanout.
    mutating func skip(_ a: Int, _ e: Int) {
        perEvent.skipped[e] += 1
        if skippedPairs.count < Self.pairNotesCapacity {
            skippedPairs.insert(UInt64(a) << 32 | UInt64(e))
        } else {
            skippedUntracked += 1
        }
    }

    /// Notes why a push reached activity `a`'s pair for event `e` without being applied.
    mutating func note(_ a: Int, _ e: Int, _ reason: String) {
        let key = UInt64(a) << 32 | UInt64(e)
        guard pairNotes.count < Self.pairNotesCapacity || pairNotes[key] != nil else {
            pairNotesOver += 1
            return
        }
        pairNotes[key] = reason
    }

    /// A token push to local activity `a` the service rejected (`reason`): noted for its event, if its body's
    /// `aps.timestamp` names one of the activity's source's.
    mutating func noteRejected(_ a: Int32, body: [UInt8], reason: String) {
        notePushed(a, body: body, "pushed, rejected by the service (\(reason))")
    }

    /// A token push for local activity `a` that did not reach it (`why`: a missing pair's reason), noted for its
    /// event, if its body's `aps.timestamp` names one of the activity's source's.
    mutating func notePushed(_ a: Int32, body: [UInt8], _ why: String) {
        let i = Int(a)
        let s = i < sourceOf.count ? Int(sourceOf[i]) : -1
        guard s >= 0, let stamp = apsTimestamp(body, tape: &tape) else { return }
        let e = Int(events.find(source: s, timestamp: stamp))
        guard e >= 0 else { return }
        note(i, e, why)
    }

    /// Keeps an example of an uncorrelated push (the first few).
    mutating func noteUncorrelated(_ example: @autoclosure () -> String) {
        if uncorrelatedExamples.count < ServeStats.examplesPerFinding { uncorrelatedExamples.append(example()) }
    }
}

extension APNsService {
    /// Classifies one delivery (see `EventTracker`) and records its endToEnd.
    @inline(__always)
    func correlate(_ a: Int32, aps: ApsFields, outcome: Outcome, nowNanos: UInt64, t0Nanos: UInt64) {
        guard tracker != nil else { return }
        let hash = outcome == .applied ? pipeline.appliedContentHash() : 0
        let verdict = tracker!.correlate(
            a, timestamp: aps.timestamp, end: aps.event == .end, outcome: outcome, contentHash: hash,
            nowNanos: nowNanos, t0Nanos: t0Nanos)
        switch verdict {
        case .delivered(let nanos):
            record(.endToEnd, nanos)
            if a >= kickoff.builtActivities { noteKickoffDelivery(a, nowNanos) }
        case .wrongKind, .wrongContent:
            guard tracker!.wrongExamples.count < ServeStats.examplesPerFinding else { return }
            let source = Int(tracker!.sourceOf[Int(a)])
            let id = engine.pipeline.store.activityIds.string(a)
            tracker!.wrongExamples.append(
                "activity \(id) (\(ServeEvents.sourceName(source))) aps.timestamp \(aps.timestamp): "
                    + (verdict == .wrongKind
                        ? "an \(aps.event == .end ? "end" : "update") for the source's "
                            + "\(aps.event == .end ? "update" : "end")"
                        : "content-state differs from the one the trigger carried"))
        case .uncorrelated:
            guard tracker!.uncorrelatedExamples.count < ServeStats.examplesPerFinding else { return }
            let source = Int(a) < tracker!.sourceOf.count ? Int(tracker!.sourceOf[Int(a)]) : -1
            let id = engine.pipeline.store.activityIds.string(a)
            tracker!.noteUncorrelated(
                "activity \(id) " + (source >= 0 ? "(\(ServeEvents.sourceName(source)))" : "(follows no source)")
                    + " aps.timestamp \(aps.timestamp)")
        default: break
        }
    }
}

extension ServeEvents {
    /// The scenario's events, with the followers of every service's sources counted, and each service correlating
    /// its deliveries with them from now on (`--expect-events`; call before serving). t0 is 0 until set.
    @discardableResult
    public static func expect(services: [APNsService]) -> ServeEvents {
        precondition(!services.isEmpty, "at least one service")
        let world = services[0].engine.world
        let sourceOfs = services.map { $0.engine.sourcesOfActivities() }
        var followers = [Int32](repeating: 0, count: world.scenario.sources.count)
        for list in sourceOfs {
            for s in list where s >= 0 { followers[Int(s)] += 1 }
        }
        let events = ServeEvents(world: world, followers: followers)
        for (k, service) in services.enumerated() {
            service.tracker = EventTracker(events: events, sourceOf: sourceOfs[k])
        }
        return events
    }

    /// events.jsonl: one line per event, in intended-time order — its number, source, app, kind, `timestamp` (what
    /// the backend puts into `aps.timestamp`), intended offset from t0, the activities following its source, and the
    /// `content-state` the trigger carries (what a push of it must carry for the judge to count it delivered).
    public func jsonl(world: World) -> String {
        var out = ""
        out.reserveCapacity(count * 240)
        var content: [UInt8] = []
        var json: [UInt8] = []
        for e in 0..<count {
            let s = Int(source[e])
            let app = sourceApp[s]
            out += "{\"event\": \(e), \"source\": \"\(ServeEvents.sourceName(s))\", "
            out += "\"app\": \"\(world.scenario.apps[app].bundle)\", "
            out += "\"kind\": \"\(kind[e] == 1 ? "end" : "update")\", \"timestamp\": \(timestamp[e]), "
            out += "\"offsetNanos\": \(offsetNanos[e]), \"followers\": \(followers[s]), \"content-state\": "
            let schema = world.appSchema[app]
            world.makeContent(schema: schema, event: scheduleIndex[e], source: s, final: kind[e] == 1, into: &content)
            json.removeAll(keepingCapacity: true)
            content.withUnsafeBytes { world.schemas[schema].appendCompactJSON(record: $0, to: &json) }
            out += String(decoding: json, as: UTF8.self) + "}\n"
        }
        return out
    }
}
