import FanoutCore
import FanoutMetrics
import FanoutSim

/// The judge of `--expect-events`: every loop's tracker read at the end of the run (the live services), the
/// counts added up into a `ServeEventsReport` (FanoutMetrics' value, which the serve report renders).
extension ServeEventsReport {
    /// Judges every service's tracker at `nowNanos` (the services' clock) and adds them up; nil without
    /// `--expect-events`. Read after the loops have stopped.
    ///
    /// `settleNanos` (`--settle`): an event intended less than this before `nowNanos` is not yet due (its
    /// deliveries are still on their way), unless an event of its source as late or later was delivered.
    /// `refusals`: the pushes and broadcasts `--faults` refused that never came back, every loop's
    /// (`RetryCounts.unresent`), each the reason of the missing pairs it carried. `triggerFailures` (`--trigger`'s
    /// events not answered 2xx, or never sent) and `registeredLines` (`--register`: which lines of population.jsonl,
    /// loop by loop, were registered) name fanout's side of a missing pair before "never pushed". `rotationRegistered`
    /// (rotations while serving, `--register`): per loop, per rotation of its `rotations.list`, whether the new token
    /// was registered; `rotationRegistration` counts those registrations. App events (`faults.appEvents`): a
    /// follower's events intended after its app event − 1 s are not expected any more (``appEventDue``);
    /// `appEventRequests` counts the requests to `--app-events`. Kickoff (`faults.kickoff`): `kickoffRegistration`,
    /// the started activities' registrations, `kickoffUntaken` those never taken to be sent (``KickoffJudge``).
    public static func judge(
        services: [APNsService], nowNanos: UInt64, settleNanos: UInt64 = 0, refusals: [UnresentRefusal] = [],
        triggerFailures: [TriggerEventFailure] = [], registeredLines: [Bool]? = nil,
        rotationRegistered: [[Bool]]? = nil, rotationRegistration: RegisterResults? = nil,
        appEventRequests: RegisterResults? = nil, kickoffRegistration: RegisterResults? = nil, kickoffUntaken: Int = 0
    ) -> ServeEventsReport? {
        guard let events = services.first?.tracker?.events else { return nil }
        var r = ServeEventsReport()
        let n = events.count
        r.events = n
        r.sharedTimestamps = events.sharedTimestamps
        r.t0Nanos = events.t0Nanos
        r.settleNanos = settleNanos
        let judgedAt = nowNanos > settleNanos ? nowNanos - settleNanos : 0
        let horizon = judgedAt > r.t0Nanos ? judgedAt - r.t0Nanos : 0
        r.horizonNanos = horizon
        let sources = events.followers.count
        // Due by time: every follower of the source is expected to have it. An event after the horizon that some
        // follower already got (its pushes were on their way at shutdown) is judged for that follower only: it
        // ends on it (the ranks below are delivered or superseded), the others are not expected to have it yet.
        var dueRank = [Int32](repeating: -1, count: sources)
        for s in 0..<sources {
            for (p, e) in events.events(of: s).enumerated() where events.offsetNanos[Int(e)] <= horizon {
                dueRank[s] = Int32(p)
            }
        }
        var reached = dueRank
        for service in services {
            guard let t = service.tracker else { continue }
            for (i, src) in t.sourceOf.enumerated() where src >= 0 {
                reached[Int(src)] = max(reached[Int(src)], t.last[i])
            }
        }
        let refused = refusedPairs(services: services, events: events, refusals: refusals, report: &r)
        r.rotations = rotationCounts(services, rotationRegistration)
        r.appEvents = appEventCounts(services, appEventRequests)
        // Per loop: the followers an app event ended, each with the last rank still expected of it.
        let appDue = services.map { appEventDue($0, events: events, horizon: horizon, dueRank: dueRank) }
        var notExpected = [Int32](repeating: 0, count: n)
        // fanout's side: the event the trigger never got to the backend, the activity never registered with it.
        var eventFailure: [Int: String] = [:]
        for f in triggerFailures {
            let e = events.find(source: Int(f.source), timestamp: f.timestamp)
            if e >= 0 { eventFailure[Int(e)] = f.reason }
        }
        // population.jsonl's lines, loop by loop: the activities built at start, then those a kickoff will start.
        let activityCounts = services.map { s in
            s.kickoff.builtActivities == .max ? s.tracker?.sourceOf.count ?? 0 : Int(s.kickoff.builtActivities)
        }
        let lineCounts = zip(activityCounts, services).map { $0 + $1.kickoff.list.count }
        let registered = registeredLines.flatMap { $0.count == lineCounts.reduce(0, +) ? $0 : nil }
        r.kickoff = KickoffJudge.counts(
            services, events: events, horizon: horizon, triggerFailures: triggerFailures, registeredLines: registered,
            lineCounts: lineCounts, registration: kickoffRegistration, untaken: kickoffUntaken)
        let unregisteredAny = registered.map { $0.contains(false) } ?? false
        var lineBase = 0
        var per = PerEvent(events: n)
        var neverPushedCount = 0
        var neverPushedExamples = 0
        per.due = (0..<n).map { events.rank[$0] <= reached[Int(events.source[$0])] }
        var wrongShown = per.delivered
        var lastCover = per.lastApplyNanos
        for (k, service) in services.enumerated() {
            guard let t = service.tracker else { continue }
            r.correlated += t.correlated
            r.uncorrelated += t.uncorrelated
            r.early += t.early
            r.reorderedByScenario += t.reorderedByScenario
            r.freshness.add(t.freshness)
            r.skippedUntracked += t.skippedUntracked
            r.uncorrelatedExamples += t.uncorrelatedExamples.prefix(ServeStats.examplesPerFinding - r.uncorrelatedExamples.count)
            r.wrongExamples += t.wrongExamples.prefix(ServeStats.examplesPerFinding - r.wrongExamples.count)
            per.add(loop: t.perEvent)
            for e in 0..<n { lastCover[e] = max(lastCover[e], t.lastCoverNanos[e]) }
            for key in t.skippedPairs.sorted() where r.skippedExamples.count < ServeStats.examplesPerFinding {
                let (i, e) = (Int32(truncatingIfNeeded: key >> 32), Int(key & 0xffff_ffff))
                r.skippedExamples.append(
                    "activity \(service.pipeline.store.activityIds.string(i)) "
                        + "(\(ServeEvents.sourceName(Int(events.source[e])))) update timestamp \(events.timestamp[e]) "
                        + "(intended at +\(events.offsetNanos[e] / 1_000_000) ms): "
                        + "never pushed, covered by a newer event")
            }
            // Rotations while serving, by whether the new token's registration succeeded: the instant the old token
            // stopped working (after it, only the new token reaches the activity).
            var unregisteredRotation: [Int: UInt64] = [:]
            var registeredRotation: [Int: UInt64] = [:]
            if let flags = rotationRegistered, k < flags.count {
                for (j, ok) in flags[k].enumerated() where j < service.rotations.list.count {
                    let activity = Int(service.rotations.list[j].activity)
                    if ok {
                        registeredRotation[activity] = service.rotations.retiredAtNanos(j)
                    } else {
                        unregisteredRotation[activity] = service.rotations.retiredAtNanos(j)
                    }
                }
            }
            let plain =
                refused.isEmpty && t.pairNotes.isEmpty && eventFailure.isEmpty && !unregisteredAny
                && unregisteredRotation.isEmpty && registeredRotation.isEmpty && service.kickoff.list.isEmpty
            let base0 = lineBase
            lineBase += lineCounts[k]
            let built = activityCounts[k]
            for (i, src) in t.sourceOf.enumerated() where src >= 0 {
                let s = Int(src)
                var due = dueRank[s]
                let last = t.last[i]
                if !appDue[k].isEmpty, let cut = appDue[k][i] {
                    // Ended by the app's side: the source's due events past the cut are not expected any more.
                    due = cut
                    let from = Int(max(cut, last)) + 1
                    if from <= Int(dueRank[s]) {
                        r.appEvents?.notExpected += Int(dueRank[s]) - from + 1
                        let base = Int(events.sourceStart[s])
                        for p in from...Int(dueRank[s]) { notExpected[Int(events.bySource[base + p])] += 1 }
                    }
                }
                r.expected += Int(max(due, last)) + 1 - Int(t.fromRank[i])
                if t.lastWrong[i] {
                    // Still showing a wrong event: behind the game from its intended time to the horizon at least.
                    let e = Int(events.bySource[Int(events.sourceStart[s]) + Int(last)])
                    wrongShown[e] += 1
                    r.wrongShownAtEnd += 1
                    r.freshness.record(horizon > events.offsetNanos[e] ? horizon - events.offsetNanos[e] : 1)
                    r.freshnessCensored += 1
                }
                guard last < due else { continue }
                r.staleAtEnd += 1
                let base = Int(events.sourceStart[s])
                for p in Int(last + 1)...Int(due) {
                    let e = Int(events.bySource[base + p])
                    per.missing[e] += 1
                    // Behind the game from the intended time until the judge's horizon at least: censored there.
                    r.freshness.record(horizon > events.offsetNanos[e] ? horizon - events.offsetNanos[e] : 1)
                    r.freshnessCensored += 1
                    // Never pushed (the common case, and the only one without faults, rejections or refusals) is
                    // counted without a lookup; its per-event count is missing − the other reasons'.
                    // A rotation's new token never registered, the event intended after the old one stopped working.
                    let rotationUnknown: String? =
                        (unregisteredRotation[i].map { events.offsetNanos[e] >= $0 } ?? false)
                        ? rotationNotRegistered : nil
                    let named =
                        plain
                        ? nil
                        : refused[PairKey(k, i, e)].map { refusedReason(kind: $0.kind, broadcast: $0.broadcast) }
                            ?? rotationUnknown
                            ?? t.pairNotes[UInt64(i) << 32 | UInt64(e)] ?? eventFailure[e]
                            ?? (i < built ? (registered?[base0 + i] == false ? notRegistered : nil)
                                : KickoffJudge.missingReason(service, activity: i, kickoffRegistration))
                            // The backend was told the new token (2xx) and nothing of the pair reached fanout.
                            ?? ((registeredRotation[i].map { events.offsetNanos[e] >= $0 } ?? false)
                                ? rotationNotPushed : nil)
                    if let named {
                        r.missingByReason[named, default: 0] += 1
                        per.missingByReason[Int32(e), default: [:]][named, default: 0] += 1
                    } else {
                        neverPushedCount += 1
                    }
                    let reason = named ?? neverPushed
                    if (named == nil ? neverPushedExamples : r.missingReasonExamples[reason]?.count ?? 0)
                        < ServeStats.examplesPerFinding
                    {
                        if named == nil { neverPushedExamples += 1 }
                        let id = service.pipeline.store.activityIds.string(Int32(i))
                        r.missingReasonExamples[reason, default: []].append(
                            "activity \(id) (\(ServeEvents.sourceName(s))) "
                                + "\(events.kind[e] == 1 ? "end" : "update") timestamp \(events.timestamp[e]) "
                                + "(intended at +\(events.offsetNanos[e] / 1_000_000) ms)")
                    }
                }
                if r.staleExamples.count < ServeStats.examplesPerFinding {
                    let id = service.pipeline.store.activityIds.string(Int32(i))
                    let newest = last < 0 ? "no event" : "timestamp \(events.timestamp[Int(events.bySource[base + Int(last)])])"
                    r.staleExamples.append(
                        "activity \(id) (\(ServeEvents.sourceName(s))) ended with \(newest), the source's last is "
                            + "timestamp \(events.timestamp[Int(events.bySource[base + Int(due)])])")
                }
            }
        }
        for key in refused.keys {
            let t = services[Int(key.service)].tracker!
            let s = Int(t.sourceOf[Int(key.activity)])
            let rank = events.rank[Int(key.event)]
            let last = t.last[Int(key.activity)]
            let due = appDue[Int(key.service)][Int(key.activity)] ?? dueRank[s]
            if rank > max(due, last) {
                r.refusals.notDue += 1
            } else if rank == last {
                r.refusals.delivered += 1
            } else if rank < last {
                r.refusals.superseded += 1
            } else {
                r.refusals.missing += 1
            }
        }
        if neverPushedCount > 0 { r.missingByReason[neverPushed] = neverPushedCount }
        func sum(_ c: [Int32]) -> Int { c.reduce(0) { $0 + Int($1) } }
        r.delivered = sum(per.delivered)
        r.superseded = sum(per.superseded)
        r.missing = sum(per.missing)
        r.duplicate = sum(per.duplicate)
        r.reordered = sum(per.reordered)
        r.notApplied = sum(per.notApplied)
        r.wrongKind = sum(per.wrongKind)
        r.wrongContent = sum(per.wrongContent)
        r.skipped = sum(per.skipped)
        var completions = EventCompletions()
        for e in 0..<n where per.due[e] {
            r.dueEvents += 1
            let followers = events.followers[Int(events.source[e])]
            if per.missing[e] > 0 {
                r.eventsWithMissing += 1
                if r.missingExamples.count < ServeStats.examplesPerFinding {
                    r.missingExamples.append(
                        "\(ServeEvents.sourceName(Int(events.source[e]))) \(events.kind[e] == 1 ? "end" : "update") "
                            + "timestamp \(events.timestamp[e]) (intended at +\(events.offsetNanos[e] / 1_000_000) ms): "
                            + "missing on \(per.missing[e]) of \(followers) followers")
                }
            }
            guard followers > 0 else { continue }
            if per.delivered[e] + notExpected[e] == followers {
                r.completeEvents += 1
            } else {
                r.incompleteEvents += 1
            }
            // Every due event's completion: until its last follower showed it or a newer event; with a follower
            // missing it, censored at the horizon.
            completions.intendedNanos.append(r.t0Nanos &+ events.offsetNanos[e])
            if per.missing[e] > 0 || wrongShown[e] > 0 {
                r.completionCensored += 1
                completions.lastNanos.append(max(r.t0Nanos &+ horizon, r.t0Nanos &+ events.offsetNanos[e] &+ 1))
            } else {
                completions.lastNanos.append(lastCover[e])
            }
            completions.recipients.append(followers)
        }
        completions.record(into: &r.completion)
        r.perEvent = per
        return r
    }
}

extension ServeEventsReport {
    /// Every loop's rotations while serving added up, with their registrations (nil: none drawn).
    static func rotationCounts(_ services: [APNsService], _ registration: RegisterResults?) -> Rotations? {
        guard let scenario = services.first?.engine.world.scenario,
            let setting = scenario.faults.rotationWhileServing, scenario.faults.rotationShare > 0
        else { return nil }
        var c = Rotations()
        c.graceSeconds = setting.graceSeconds
        for s in services {
            c.scheduled += s.rotations.list.count
            c.rotated += s.rotations.rotated
            c.retired += s.rotations.retired
            c.pushedInGrace += s.rotations.pushedInGrace
            c.answeredUnregistered += s.rotations.answeredUnregistered
            c.sentToUnregistered += s.rotations.sentToUnregistered
        }
        c.registration = BackendTelling(registration, scheduled: c.scheduled)
        return c
    }

    /// Every loop's app events added up, with the requests telling the backend (nil: the scenario has none). The
    /// judge adds `notExpected`.
    static func appEventCounts(_ services: [APNsService], _ requests: RegisterResults?) -> AppEvents? {
        guard let setting = services.first?.engine.world.scenario.faults.appEvents else { return nil }
        var c = AppEvents()
        c.graceSeconds = setting.graceSeconds
        for s in services {
            c.scheduled += s.appEvents.list.count
            c.applied += s.appEvents.applied
            for e in s.appEvents.list.prefix(s.appEvents.applied) { c.appliedByKind[e.kind.name, default: 0] += 1 }
            c.pushedInGrace += s.appEvents.pushedInGrace
            for kind in WorkerEngine.AppEventKind.allCases where s.appEvents.sentAfter[kind.rawValue] > 0 {
                c.sentAfter += s.appEvents.sentAfter[kind.rawValue]
                c.sentAfterByKind[kind.name, default: 0] += s.appEvents.sentAfter[kind.rawValue]
            }
        }
        c.telling = BackendTelling(requests, scheduled: c.scheduled)
        return c
    }

    /// The followers of `service` whose app event ends their expectations before their source's due events do, each
    /// with the last rank still expected of it: the highest among its source's events intended by the app event − 1 s
    /// (and by the horizon); -1 when none is.
    static func appEventDue(
        _ service: APNsService, events: ServeEvents, horizon: UInt64, dueRank: [Int32]
    ) -> [Int: Int32] {
        guard let t = service.tracker, !service.appEvents.list.isEmpty else { return [:] }
        var out: [Int: Int32] = [:]
        for (j, e) in service.appEvents.list.enumerated() {
            let i = Int(e.activity)
            guard i < t.sourceOf.count, t.sourceOf[i] >= 0 else { continue }
            let s = Int(t.sourceOf[i])
            let cut = min(horizon, service.appEvents.cutNanos(j))
            var due: Int32 = -1
            for (p, ev) in events.events(of: s).enumerated() where events.offsetNanos[Int(ev)] <= cut { due = Int32(p) }
            if due < dueRank[s] { out[i] = due }
        }
        return out
    }

    /// A (loop, local activity, event) pair.
    struct PairKey: Hashable {
        var service: Int32
        var activity: Int32
        var event: Int32
        init(_ service: Int, _ activity: Int, _ event: Int) {
            self.service = Int32(service)
            self.activity = Int32(activity)
            self.event = Int32(event)
        }
    }

    /// The (event, follower) pairs each refused, never resent push or broadcast carried: a token push's activity on
    /// the loop that holds its token, a broadcast's subscribers on every loop, with the event of the follower's source
    /// whose timestamp it carried. Counts the refusals and the unmatched ones in `report.refusals`.
    static func refusedPairs(
        services: [APNsService], events: ServeEvents, refusals: [UnresentRefusal], report: inout ServeEventsReport
    ) -> [PairKey: (kind: Int, broadcast: Bool)] {
        var out: [PairKey: (kind: Int, broadcast: Bool)] = [:]
        for u in refusals {
            if u.broadcast { report.refusals.broadcasts += 1 } else { report.refusals.pushes += 1 }
            var matched = false
            if let stamp = u.timestamp {
                for (k, service) in services.enumerated() {
                    guard let t = service.tracker else { continue }
                    let resolution = u.target.withUnsafeBytes {
                        service.pipeline.begin(kind: u.broadcast ? .channel : .token, target: $0).resolution
                    }
                    let activities: [Int32]
                    switch resolution {
                    case .activity(let a) where !u.broadcast: activities = [a]
                    case .channel(let c) where u.broadcast: activities = service.pipeline.router.subscribers[Int(c)]
                    default: continue
                    }
                    for a in activities where Int(a) < t.sourceOf.count && t.sourceOf[Int(a)] >= 0 {
                        let e = events.find(source: Int(t.sourceOf[Int(a)]), timestamp: stamp)
                        guard e >= 0 else { continue }
                        matched = true
                        let key = PairKey(k, Int(a), Int(e))
                        if out[key] == nil { report.refusals.pairs += 1 }
                        out[key] = (u.kind, u.broadcast)
                    }
                }
            }
            if !matched { report.refusals.unmatched += 1 }
        }
        return out
    }
}
