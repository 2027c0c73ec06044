import FanoutCore
import FanoutMetrics
import FanoutSim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Broadcasts: answered where they arrive, fanned out after the answer, on every loop.
extension APNsService {

    func broadcast(bundle: [UInt8], _ h: CheckedHeaders, requestId idHeader: UniqueHeader, _ r: RequestInput)
        -> (APNsAnswer, APNsReason?)
    {
        guard let raw = h.channelId, let channel = channels[raw], channel.bundle == bundle else {
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
        // Sharded (`--shard K/N`): every shard answers the broadcast and applies it to its own subscribers; one of
        // them counts its verdict, so that the shards' accounting adds up to an unsharded serve's.
        let counts = shard.countsChannel(raw)
        let rejected = r.body.withUnsafeBytes {
            pipeline.validate(&flight, judgedPriority: Int64(h.priority), payload: $0, countsVerdict: counts)
        }
        let t1 = clock()
        record(.validate, max(t1 &- t0, 1))
        if let rejected { return failure(APNsReason(rejected), id: idHeader) }
        _ = pipeline.route(&flight, countsVerdict: counts)
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
        return (APNsAnswer(status: 200, id: idHeader, extraId: ids.make("apns-unique-id")), nil)
    }

    /// Broadcasts waiting for their fan-out.
    public var pendingFanouts: Int { pending.count }

    /// Applies the answered broadcasts to their subscribers (in arrival order).
    public func runPendingFanouts(wallMillis: Int64) {
        guard !pending.isEmpty else { return }
        if deviceClockOrigin != nil { takeDeviceClock(wallMillis) }  // a fan-out from another loop came first
        let wallMillis = wallMillis &+ deviceClockOffsetMillis
        let batch = pending
        pending.removeAll(keepingCapacity: true)
        for f in batch {
            // App events due by the broadcast's arrival: its ended subscribers ignore it.
            if f.arrivalNanos >= appEvents.nextNanos { stepAppEvents(f.arrivalNanos) }
            // Scanned again and applied inside the closure that lends the payload's bytes: every subscriber's
            // device decodes the content from them.
            f.payload.withUnsafeBytes { payload in
                let flight = pipeline.resume(
                    kind: .channel, resolution: .channel(f.channel), judgedPriority: Int64(f.headers.priority),
                    payload: payload)
                let subscribers = pipeline.router.subscribers[Int(f.channel)]
                let t0 = tracker?.events.t0Nanos ?? 0
                for a in subscribers {
                    let outcome = pipeline.deliver(flight, payload: payload, to: a, nowMillis: wallMillis)
                    let now = clock()
                    record(.delivery, max(now &- f.arrivalNanos, 1))
                    if tracker != nil {
                        correlate(a, aps: flight.aps, outcome: outcome, nowNanos: now, t0Nanos: t0)
                    }
                    if outcome != .applied { noteOutcome(outcome, a, "(broadcast)") }
                }
            }
            finishedPart(origin: f.origin, id: f.id, end: clock(), arrival: f.arrivalNanos)
        }
        if !dyingChannels.isEmpty { releaseDyingChannels() }
    }

    func finishedPart(origin: Int, id: Int, end: UInt64, arrival: UInt64) {
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
    /// the verdict was counted where it was answered). None do if the channel was deleted here meanwhile.
    public func acceptRemoteBroadcast(_ b: RemoteBroadcast) {
        var flight = b.channel.withUnsafeBytes { pipeline.begin(kind: .channel, target: $0) }
        guard channels[b.channel] != nil, case .channel(let c) = flight.resolution else {
            finishedPart(origin: b.origin, id: b.id, end: clock(), arrival: b.arrivalNanos)
            return
        }
        let rejected = b.payload.withUnsafeBytes {
            pipeline.validate(&flight, judgedPriority: Int64(b.headers.priority), payload: $0, countsVerdict: false)
        }
        if let rejected {
            // Every worker holds the same channels and validates alike, so this is a bug, not a client's
            // doing: counted (the summary shows it) and this worker's part ends here, instead of a trap.
            stats.note(
                .broadcastRefusedElsewhere,
                "broadcast \(b.id) from worker \(b.origin) refused here: \(APNsReason(rejected).rawValue)")
            finishedPart(origin: b.origin, id: b.id, end: clock(), arrival: b.arrivalNanos)
            return
        }
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
}
