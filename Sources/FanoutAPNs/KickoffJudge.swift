import FanoutMetrics
import FanoutSim

/// The judge of a kickoff by push-to-start (`faults.kickoff`, docs/INGEST.md §5, *Kickoff*), read once the loops have
/// stopped: which activities were due to start and did, why the others did not, their registrations and the kickoff
/// latency; and the reason of a started activity's missing pairs.
enum KickoffJudge {
    static let startedNotRegistered = "started by push-to-start, its registration never answered 2xx (kickoff)"
    static let startedNotPushed = "started by push-to-start and registered, never pushed to (kickoff)"

    /// The counts of every loop (nil without a kickoff). `registeredLines`: population.jsonl's lines registered (nil:
    /// no `--register`), `lineCounts` each loop's share of them (its built activities, then its kickoff lines);
    /// `registration`: the started activities' registrations, `untaken` those never taken to be sent.
    static func counts(
        _ services: [APNsService], events: ServeEvents, horizon: UInt64, triggerFailures: [TriggerEventFailure],
        registeredLines: [Bool]?, lineCounts: [Int], registration: RegisterResults?, untaken: Int
    ) -> ServeEventsReport.Kickoff? {
        guard let world = services.first?.engine.world, world.defersKickoff,
            let setting = world.scenario.faults.kickoff
        else { return nil }
        typealias K = ServeEventsReport.Kickoff
        var c = K()
        c.sources = world.kickoffOffsetNanos.filter { $0 != .max }.count
        c.startBudget = setting.startBudget
        let t0 = events.t0Nanos
        let stamp = ServingKickoff.startTimestamp(epochSeconds: world.epochSeconds)
        var startFailure: [Int32: String] = [:]
        for f in triggerFailures where f.timestamp == stamp { startFailure[f.source] = f.reason }
        var lineBase = 0
        for (k, s) in services.enumerated() {
            let kickoffBase = lineBase + lineCounts[k] - s.kickoff.list.count
            lineBase += lineCounts[k]
            c.activities += s.kickoff.list.count
            c.budgetRefusals += s.kickoff.budgetRefusals
            c.unexpectedStarts += s.kickoff.unexpectedStarts
            for (j, p) in s.kickoff.list.enumerated() {
                let offset = world.kickoffOffsetNanos[Int(p.source)]
                let intended = t0 &+ offset
                let isDue = offset <= horizon
                if isDue { c.due += 1 }
                guard s.kickoff.activity[j] >= 0 else {
                    guard isDue else { continue }
                    let reason =
                        registeredLines.map { $0[kickoffBase + j] } == false
                        ? K.tokenNotRegistered
                        : startFailure[p.source].map(K.trigger)
                            ?? (s.kickoff.refusedByBudget[j] ? K.budgetSpent : K.neverPushed)
                    c.notStarted += 1
                    c.notStartedByReason[reason, default: 0] += 1
                    if c.notStartedExamples[reason, default: []].count < ServeStats.examplesPerFinding {
                        var id: [UInt8] = []
                        world.appendActivityId(device: Int(p.device), slot: Int(p.slot), to: &id)
                        c.notStartedExamples[reason, default: []].append(
                            "activity \(String(decoding: id, as: UTF8.self)) "
                                + "(\(ServeEvents.sourceName(Int(p.source)))), "
                                + "start intended at +\(offset / 1_000_000) ms")
                    }
                    continue
                }
                c.started += 1
                if !isDue { c.startedEarly += 1 }
                c.toLockScreen.record(EventTracker.since(intended, s.kickoff.startedNanos[j]))
                let key = UInt64(s.worker) << 32 | UInt64(j)
                if let at = registration?.registeredAtNanos[key] {
                    c.toRegistered.record(EventTracker.since(intended, at))
                }
                let first = s.kickoff.firstUpdateNanos[j]
                if first > 0 {
                    c.followed += 1
                    c.toFirstUpdate.record(EventTracker.since(intended, first))
                }
            }
        }
        c.registration = BackendTelling(registration, scheduled: registration?.activities ?? 0)
        // Started, posted, but never taken to be sent (serving had stopped): not registered when serving stopped.
        c.registration.pendingAtShutdown += untaken
        if registration == nil { c.registration.pendingAtShutdown = c.started }
        return c
    }

    /// Why a missing pair of local activity `i` (started while serving) of `service` is missing, for a kickoff's
    /// activity: its registration never answered 2xx, or it was registered and never pushed to; nil for one that
    /// follows nothing.
    static func missingReason(_ service: APNsService, activity i: Int, _ registration: RegisterResults?) -> String? {
        guard let entry = service.kickoff.entryOf[Int32(i)] else { return nil }
        let key = UInt64(service.worker) << 32 | UInt64(entry)
        return registration?.registeredAtNanos[key] == nil ? startedNotRegistered : startedNotPushed
    }
}
