import FanoutCore
import FanoutMetrics
import FanoutSim

/// Which token pushes refused by an injected fault (503, 429, 500, reset) came back, after how long, and which
/// never did (docs/INGEST.md §3, *Fault injection*). A push is known again by either of its keys: its `apns-id` when
/// it carries a canonical one, and its token with its `aps.timestamp` (the same update: a backend that retries
/// without an `apns-id`, or with a fresh one, resends it). One per serve: with several loops FanoutServe's `RetryLedger` holds it under a lock, since a retry
/// may reach another loop (another connection, with `--workers` above 1). At most `capacity` (100,000) refused pushes
/// are remembered; more are counted `untracked`. Only used while faults that refuse are configured.
///
/// Broadcasts refused by a fault are remembered too, by their `apns-channel-id` and `aps.timestamp` (counted apart,
/// `broadcasts[.refused]`): a refused broadcast refuses every subscriber's delivery. Each refused push or broadcast
/// that never came back is kept with its target and timestamp (`RetryCounts.unresent`) so that the events judge can
/// name it as the reason of the deliveries it left missing (`ServeEventsReport.missingByReason`).
package struct RetryTracker {
    package static let defaultCapacity = 100_000
    let capacity: Int

    private struct Waiting {
        var atNanos: UInt64
        var kind: Int
        /// What the events judge needs of it: its token (or channel id) and `aps.timestamp`.
        var unresent: Unresent
        /// Its `apns-id`'s key when it is kept by its content key and had both (an entry of `aliases`).
        var alias: UInt64?
    }

    typealias Unresent = UnresentRefusal

    /// The refused token pushes by their content key (token and `aps.timestamp`) when they have one, else by their
    /// `apns-id`'s key; `aliases` finds those kept by content from their `apns-id`.
    private var waiting: [UInt64: Waiting] = [:]
    private var aliases: [UInt64: UInt64] = [:]
    private var waitingBroadcasts: [UInt64: Waiting] = [:]
    private var tape = JSONTape()
    var counts = RetryCounts()

    package init(capacity: Int = RetryTracker.defaultCapacity) {
        self.capacity = capacity
    }

    /// A token push's keys: its canonical `apns-id`'s, and its token with its `aps.timestamp`; nil when it has
    /// neither.
    package mutating func keys(_ r: RequestInput, token: ArraySlice<UInt8>) -> RetryKeys? {
        var keys = RetryKeys()
        if let id = r.header(.apnsId), RequestCheck.isCanonicalUUID(id) { keys.id = Self.hash(id, salt: 1) }
        if let timestamp = timestamp(r.body) {
            keys.content = Mix.hash(Self.hash(token, salt: 2), UInt64(bitPattern: timestamp))
        }
        return keys.id == nil && keys.content == nil ? nil : keys
    }

    /// A push arrived: if it is one refused before (either key), it came back (counted, with the delay since its
    /// refusal).
    package mutating func arrived(_ keys: RetryKeys, nowNanos: UInt64) {
        var found: UInt64?
        if let content = keys.content, waiting[content] != nil {
            found = content
        } else if let id = keys.id {
            found = aliases[id] ?? (waiting[id] != nil ? id : nil)
        }
        guard let found, let refused = waiting.removeValue(forKey: found) else { return }
        if let alias = refused.alias, aliases[alias] == found { aliases.removeValue(forKey: alias) }
        counts.retried[refused.kind] += 1
        counts.delayNanos.record(max(1, min(nowNanos &- refused.atNanos, HdrLayout.highestTrackableValue)))
    }

    /// A push was refused by fault `kind` (an index of ``kinds``); ``arrived(_:nowNanos:)`` was told of it first.
    /// `token` and the body's `aps.timestamp` are kept for the events judge (read here, on the refused path only).
    package mutating func refused(
        _ keys: RetryKeys?, kind: Int, nowNanos: UInt64, token: ArraySlice<UInt8> = [], body: [UInt8] = []
    ) {
        counts.refused[kind] += 1
        guard let keys, let primary = keys.content ?? keys.id, waiting.count < capacity else {
            counts.untracked += 1
            return
        }
        let unresent = Unresent(kind: kind, broadcast: false, target: Array(token), timestamp: timestamp(body))
        let alias = keys.content != nil ? keys.id : nil
        // The same update refused anew: its entry is replaced, with the alias this attempt brings.
        if let old = waiting[primary]?.alias, aliases[old] == primary { aliases.removeValue(forKey: old) }
        waiting[primary] = Waiting(atNanos: nowNanos, kind: kind, unresent: unresent, alias: alias)
        if let alias { aliases[alias] = primary }
    }

    /// A broadcast's key: its channel id (decoded, as the router knows channels) and aps.timestamp, and both; nil
    /// when it has no well-formed channel id or no readable timestamp.
    package mutating func broadcastKey(_ r: RequestInput) -> (key: UInt64, channel: [UInt8], timestamp: Int64)? {
        guard case .success(let (channel, _)) = RequestCheck.channelId(r.headers), let timestamp = timestamp(r.body)
        else { return nil }
        return (Mix.hash(Self.hash(channel, salt: 3), UInt64(bitPattern: timestamp)), channel, timestamp)
    }

    /// A broadcast arrived: one refused before (same channel, same aps.timestamp) came back.
    package mutating func broadcastArrived(_ key: UInt64) {
        guard waitingBroadcasts.removeValue(forKey: key) != nil else { return }
        counts.broadcasts[.retried] += 1
    }

    /// A broadcast was refused by fault `kind`; ``broadcastArrived(_:)`` was told of it first.
    package mutating func broadcastRefused(
        _ identity: (key: UInt64, channel: [UInt8], timestamp: Int64)?, kind: Int, nowNanos: UInt64
    ) {
        counts.broadcasts[.refused] += 1
        guard let identity, waitingBroadcasts.count < capacity else {
            counts.broadcasts[.untracked] += 1
            return
        }
        let unresent = Unresent(kind: kind, broadcast: true, target: identity.channel, timestamp: identity.timestamp)
        waitingBroadcasts[identity.key] = Waiting(atNanos: nowNanos, kind: kind, unresent: unresent, alias: nil)
    }

    /// The counts with the refused pushes still waiting counted as never retried (when the loop stops), and every
    /// refused push and broadcast that never came back listed for the events judge.
    package var final: RetryCounts {
        var c = counts
        c.neverRetried = pending
        c.broadcasts[.neverRetried] = waitingBroadcasts.count
        c.unresent = waiting.values.map(\.unresent) + waitingBroadcasts.values.map(\.unresent)
        return c
    }

    /// Refused pushes that have not come back (yet), by kind.
    var pending: [Int] {
        var out = [0, 0, 0, 0]
        for w in waiting.values { out[w.kind] += 1 }
        return out
    }

    private mutating func timestamp(_ body: [UInt8]) -> Int64? { apsTimestamp(body, tape: &tape) }

    /// A token's or channel's bytes hashed (FNV-1a, salted, then mixed): the retry keys, and `--faults`' draw keys.
    package static func hash(_ bytes: some Collection<UInt8>, salt: UInt64) -> UInt64 {
        Mix.hash(FNV1a.hash(bytes, from: FNV1a.offsetBasis ^ salt), salt)  // FNV-1a, salted, then mixed
    }
}

/// A refused token push's two keys (``RetryTracker/keys(_:token:)``): its `apns-id`'s and its content's (token and
/// `aps.timestamp`); either may be missing, not both.
package struct RetryKeys: Equatable {
    package var id: UInt64?
    package var content: UInt64?

    package init(id: UInt64? = nil, content: UInt64? = nil) {
        self.id = id
        self.content = content
    }
}

/// A push body's `aps.timestamp`, if it is JSON with one (read with `tape`; off the hot path: refusals, rejections).
package func apsTimestamp(_ body: [UInt8], tape: inout JSONTape) -> Int64? {
    guard !body.isEmpty else { return nil }
    return body.withUnsafeBytes { bytes -> Int64? in
        guard tape.scan(bytes) == nil else { return nil }
        let doc = tape.reading(bytes)
        guard doc.count > 0 else { return nil }
        let aps = doc.member(0, "aps")
        guard aps >= 0 else { return nil }
        let ts = doc.member(aps, "timestamp")
        return ts >= 0 ? doc.int64(ts) : nil
    }
}
