import FanoutCore
import FanoutMetrics
import FanoutSim

/// Which token pushes refused by an injected fault (503, 429, 500, reset) came back, after how long, and which
/// never did (docs/INGEST.md §3, *Fault injection*). A push is known again by its `apns-id` when it carries a
/// canonical one, else by its token and `aps.timestamp` (a backend that retries without an `apns-id` resends the
/// same update). One per event loop: a retry that reaches another loop (another connection, with
/// `--workers` above 1) is not matched. At most `capacity` (100,000) refused pushes are remembered; more are counted
/// `untracked`. Only used while faults that refuse are configured. Confined to its loop's thread.
struct RetryTracker {
    static let defaultCapacity = 100_000
    let capacity: Int
    /// The fault kinds that refuse a push, as indices of the counts (503, 429, 500, reset).
    static let kinds = ["503", "429", "500", "reset"]

    private var waiting: [UInt64: (atNanos: UInt64, kind: Int)] = [:]
    private var tape = JSONTape()
    var counts = RetryCounts()

    init(capacity: Int = RetryTracker.defaultCapacity) {
        self.capacity = capacity
    }

    /// A token push's key: its apns-id, else its token and aps.timestamp; nil when it has neither.
    mutating func key(_ r: RequestInput, token: ArraySlice<UInt8>) -> UInt64? {
        if let id = r.header("apns-id"), RequestCheck.isCanonicalUUID(id) { return Self.hash(id, salt: 1) }
        guard let timestamp = timestamp(r.body) else { return nil }
        return Mix.hash(Self.hash(token, salt: 2), UInt64(bitPattern: timestamp))
    }

    /// A push arrived: if it is one refused before, it came back (counted, with the delay since its refusal).
    mutating func arrived(_ key: UInt64, nowNanos: UInt64) {
        guard let refused = waiting.removeValue(forKey: key) else { return }
        counts.retried[refused.kind] += 1
        counts.delayNanos.record(max(1, min(nowNanos &- refused.atNanos, HdrLayout.highestTrackableValue)))
    }

    /// A push was refused by fault `kind` (an index of ``kinds``); ``arrived(_:nowNanos:)`` was told of it first.
    mutating func refused(_ key: UInt64?, kind: Int, nowNanos: UInt64) {
        counts.refused[kind] += 1
        guard let key, waiting.count < capacity else {
            counts.untracked += 1
            return
        }
        waiting[key] = (nowNanos, kind)
    }

    /// The counts with the refused pushes still waiting counted as never retried (when the loop stops).
    var final: RetryCounts {
        var c = counts
        c.neverRetried = pending
        return c
    }

    /// Refused pushes that have not come back (yet), by kind.
    var pending: [Int] {
        var out = [0, 0, 0, 0]
        for w in waiting.values { out[w.kind] += 1 }
        return out
    }

    private mutating func timestamp(_ body: [UInt8]) -> Int64? {
        body.withUnsafeBytes { bytes -> Int64? in
            guard tape.scan(bytes) == nil else { return nil }
            let doc = tape.reading(bytes)
            guard doc.count > 0 else { return nil }
            let aps = doc.member(0, "aps")
            guard aps >= 0 else { return nil }
            let ts = doc.member(aps, "timestamp")
            return ts >= 0 ? doc.int64(ts) : nil
        }
    }

    private static func hash(_ bytes: some Collection<UInt8>, salt: UInt64) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325 ^ salt  // FNV-1a, then mixed
        for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01B3 }
        return Mix.hash(h, salt)
    }
}

/// What ``RetryTracker`` saw on a loop (added across loops for the run folder). By kind, indexed as
/// ``RetryTracker/kinds``: refused = retried + never retried + untracked.
public struct RetryCounts: Sendable, Equatable {
    public var refused = [0, 0, 0, 0]
    public var retried = [0, 0, 0, 0]
    /// Refused pushes that never came back, filled in when the loop stops (``RetryTracker/pending``).
    public var neverRetried = [0, 0, 0, 0]
    /// Refused pushes not remembered: no apns-id and no readable aps.timestamp, or the loop already remembered
    /// ``RetryTracker/capacity`` of them (100,000).
    public var untracked = 0
    /// Refusal → the push's next arrival.
    public var delayNanos = LatencyHistogram()

    public init() {}

    public mutating func add(_ o: RetryCounts) {
        for k in 0..<4 {
            refused[k] += o.refused[k]
            retried[k] += o.retried[k]
            neverRetried[k] += o.neverRetried[k]
        }
        untracked += o.untracked
        delayNanos.add(o.delayNanos)
    }

    /// refused = retried + never retried + untracked (once the loops have stopped).
    public var identityHolds: Bool {
        refused.reduce(0, +) == retried.reduce(0, +) + neverRetried.reduce(0, +) + untracked
    }
}
