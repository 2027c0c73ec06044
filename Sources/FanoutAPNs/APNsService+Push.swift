import FanoutCore
import FanoutMetrics
import FanoutSim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Token pushes: rows 16–20 of docs/INGEST.md §3, then route and apply on the device.
extension APNsService {

    func push(
        token: ArraySlice<UInt8>, _ h: CheckedHeaders, messageId idHeader: UniqueHeader, _ r: RequestInput, _ wallMillis: Int64
    ) -> (APNsAnswer, APNsReason?) {
        let wallMillis = wallMillis &+ deviceClockOffsetMillis
        // Rotations while serving that fell due before this push arrived (one comparison when none did).
        if r.arrivalNanos >= rotations.nextNanos { stepRotations(r.arrivalNanos) }
        // App events that fell due (one comparison when none did).
        if r.arrivalNanos >= appEvents.nextNanos { stepAppEvents(r.arrivalNanos) }
        // 16–18: who holds the token.
        var kind = TargetKind.token
        // The token is looked up once: this flight carries the resolution to validate, route and deliver.
        var tokenFlight = token.withUnsafeBytes { pipeline.begin(kind: .token, target: $0) }
        var resolution = tokenFlight.resolution
        // An old token in its grace period after a rotation while serving still reaches its activity.
        if case .unknownToken = resolution, let a = graceActivity(token) {
            tokenFlight = Pipeline.InFlight(kind: .token, resolution: .activity(a))
            resolution = tokenFlight.resolution
        }
        if case .unknownToken = resolution {
            let start = token.withUnsafeBytes { pipeline.begin(kind: .startToken, target: $0).resolution }
            if case .startToken = start {
                kind = .startToken
                resolution = start
            }
        }
        let bundle: Int32
        switch resolution {
        case .activity(let a):
            bundle = pipeline.app(of: a)
            if appEvents.applied > 0 { noteAppEventPush(a, r.arrivalNanos) }
        case .startToken(_, let app): bundle = app
        default:
            if let at = retired[Array(token)] {
                noteRetiredPush(token, body: r.body)
                noteUninstalledPush(token, r.arrivalNanos)
                stats.note(.rotatedToken, "token \(String(decoding: token.prefix(16), as: UTF8.self))… apns-id \(idHeader.value)")
                return failure(.unregistered, id: idHeader, timestamp: at)
            }
            if let foreign = foreignTokens, foreign.contains(token) {
                // Another shard's device: answered as APNs answers an unknown token, counted apart (misrouted).
                stats.notThisShard += 1
                return failure(.badDeviceToken, id: idHeader)
            }
            stats.note(.unknownToken, "token \(String(decoding: token.prefix(16), as: UTF8.self))… apns-id \(idHeader.value)")
            return failure(.badDeviceToken, id: idHeader)
        }
        guard h.isLiveActivity else {
            stats.acceptedOtherPushTypes += 1
            return (APNsAnswer(status: 200, id: idHeader), nil)
        }
        // The topic's bytes borrowed in place: a copy of the optional slice went through its generic value witness
        // (~230 instructions a request with its destruction).
        let matches = h.topic!.withUnsafeBytes { t in
            let bundleCount = t.count - ".push-type.liveactivity".utf8.count
            return pipeline.withBundle(of: bundle) { app in
                app.count == bundleCount && memcmp(app.baseAddress!, t.baseAddress!, bundleCount) == 0
            }
        }
        guard matches else {
            stats.note(.wrongTopic, "token \(String(decoding: token.prefix(16), as: UTF8.self))… topic \(String(decoding: h.topic!, as: UTF8.self))")
            return failure(.deviceTokenNotForTopic, id: idHeader)
        }
        // 20, then route and apply (the pipeline judges the payload and counts every verdict and outcome).
        let t0 = clock()
        if kind == .startToken {
            guard case .startToken(let device, _) = resolution else { preconditionFailure() }
            // A kickoff's push-to-start (`faults.kickoff`) starts the device's activity of the source it names, under
            // that activity's own id and token; any other start gets a minted one, following nothing.
            let entry = kickoffEntry(device: device, body: r.body)
            guard kickoffBudgetAllows(device: device, entry: entry) else {
                record(.validate, max(clock() &- t0, 1))
                let prefix = String(decoding: token.prefix(16), as: UTF8.self)
                stats.note(
                    .limitExceeded,
                    "push-to-start token \(prefix)… apns-id \(idHeader.value): the device's start budget is spent")
                stats.acceptedPushes += 1
                return (APNsAnswer(status: 200, id: idHeader), nil)
            }
            var newId: [UInt8]
            var newToken: [UInt8] = []
            if let entry {
                (newId, newToken) = kickoffIdentity(entry)
            } else {
                let n = startedActivities
                startedActivities += 1
                newId = pipeline.store.deviceIds.withBytes(device) { Array($0) }
                newId.append(contentsOf: Array("-started-\(n)".utf8))
                engine.world.appendToken(device: Int(device), slot: 0x10000 + n, generation: 0, to: &newToken)
            }
            let refusedBefore = pipeline.accounting[.limitExceeded]
            let activitiesBefore = pipeline.store.activityCount
            let verdict = r.body.withUnsafeBytes { payload in
                token.withUnsafeBytes { target in
                    newId.withUnsafeBytes { id in
                        newToken.withUnsafeBytes { nt in
                            pipeline.push(
                                kind: .startToken, target: target, judgedPriority: Int64(h.priority), payload: payload,
                                nowMillis: wallMillis, newActivity: id, newToken: nt)
                        }
                    }
                }
            }
            let t1 = clock()
            record(.validate, max(t1 &- t0, 1))
            switch verdict {
            case .rejected(let reason): return failure(APNsReason(reason), id: idHeader)
            case .unroutable(let reason): return failure(APNsReason(reason), id: idHeader)
            case .routed:
                if pipeline.store.activityCount > activitiesBefore {
                    kickoffStarted(Int32(activitiesBefore), device: device, entry: entry, nowNanos: t1)
                }
                if pipeline.accounting[.limitExceeded] > refusedBefore {
                    stats.note(.limitExceeded, "push-to-start token \(String(decoding: token.prefix(16), as: UTF8.self))… apns-id \(idHeader.value)")
                }
                record(.delivery, max(t1 &- r.arrivalNanos, 1))
                stats.acceptedPushes += 1
                return (APNsAnswer(status: 200, id: idHeader), nil)
            }
        }
        var flight = tokenFlight
        // Validated, routed and applied inside the closure that lends the payload's bytes: the device
        // decodes the content from them (the validator's tape keeps offsets, not a pointer).
        let rejected = r.body.withUnsafeBytes { payload -> RejectReason? in
            // Rows 6–14 and the topic were judged once (RequestCheck, above); the pipeline judges the payload.
            let rejected = pipeline.validate(&flight, judgedPriority: Int64(h.priority), payload: payload)
            let t1 = clock()
            record(.validate, max(t1 &- t0, 1))
            if let rejected { return rejected }
            guard case .routed = pipeline.route(&flight), case .activity(let a) = flight.resolution else {
                preconditionFailure("a resolved token routes")
            }
            let t2 = clock()
            record(.route, max(t2 &- t1, 1))
            let outcome = pipeline.deliver(flight, payload: payload, to: a, nowMillis: wallMillis)
            let t3 = clock()
            record(.delivery, max(t3 &- r.arrivalNanos, 1))
            if tracker != nil {
                correlate(a, aps: flight.aps, outcome: outcome, nowNanos: t3, t0Nanos: tracker!.events.t0Nanos)
            }
            noteOutcome(outcome, a, idHeader.value)
            return nil
        }
        if let rejected {
            if tracker != nil, case .activity(let a) = flight.resolution {
                tracker!.noteRejected(a, body: r.body, reason: APNsReason(rejected).rawValue)
            }
            return failure(APNsReason(rejected), id: idHeader)
        }
        stats.acceptedPushes += 1
        return (APNsAnswer(status: 200, id: idHeader), nil)
    }

    func noteOutcome(_ outcome: Outcome, _ a: Int32, _ messageId: @autoclosure () -> String) {
        let finding: ServeStats.Finding
        switch outcome {
        case .ignoredStaleTimestamp: finding = .staleTimestamp
        case .ignoredEnded: finding = .afterEnd
        case .throttled: finding = .budget
        default: return
        }
        let pipeline = self.pipeline
        stats.note(finding, "activity \(pipeline.store.activityIds.string(a)) apns-id \(messageId())")
    }
}
