import FanoutCore

/// What FanoutAPNs' `RetryTracker` saw: every loop's together (one tracker per serve, shared by its loops; `+=`
/// adds serves' for `fanout merge`). By kind, indexed as ``kinds``: refused = retried + never retried + untracked.
public struct RetryCounts: Sendable, Equatable {
    /// The fault kinds that refuse a push, as indices of the counts (503, 429, 500, reset).
    public static let kinds = ["503", "429", "500", "reset"]

    public var refused = [0, 0, 0, 0]
    public var retried = [0, 0, 0, 0]
    /// Refused pushes that never came back, filled in when the loops stop (``RetryTracker/pending``).
    public var neverRetried = [0, 0, 0, 0]
    /// Refused pushes not remembered: no apns-id and no readable aps.timestamp, or the serve already remembered
    /// ``RetryTracker/capacity`` of them (100,000).
    public var untracked = 0
    /// Refusal → the push's next arrival.
    public var delayNanos = LatencyHistogram()
    /// Broadcasts refused by a fault: refused = retried + never retried + untracked (no channel id or readable
    /// aps.timestamp, or over the bound).
    public var broadcasts = Counts<BroadcastCount>()
    /// Every refused push and broadcast that never came back, every loop's (for the events judge: which missing
    /// deliveries each explains). Filled in when the loops stop.
    public var unresent: [UnresentRefusal] = []

    public init() {}

    public static func += (a: inout RetryCounts, b: RetryCounts) {
        for k in 0..<4 {
            a.refused[k] += b.refused[k]
            a.retried[k] += b.retried[k]
            a.neverRetried[k] += b.neverRetried[k]
        }
        a.untracked += b.untracked
        a.delayNanos.add(b.delayNanos)
        a.broadcasts += b.broadcasts
        a.unresent += b.unresent
    }

    /// refused = retried + never retried + untracked (once the loops have stopped), token pushes and broadcasts.
    public var identityHolds: Bool {
        refused.reduce(0, +) == retried.reduce(0, +) + neverRetried.reduce(0, +) + untracked
            && broadcasts[.refused] == broadcasts[.retried] + broadcasts[.neverRetried] + broadcasts[.untracked]
    }

    /// What became of the broadcasts a fault refused (``broadcasts``).
    public enum BroadcastCount: Int, CaseIterable, Sendable {
        case refused, retried, neverRetried, untracked

        /// Its name in summary.json's `faults.retries` (`broadcastsRefused`, …).
        public var summaryKey: String {
            ["broadcastsRefused", "broadcastsRetried", "broadcastsNeverRetried", "broadcastsUntracked"][rawValue]
        }
    }
}

/// A token push or broadcast refused by a fault (`--faults`) that has not come back: its fault kind (an index of
/// ``RetryCounts/kinds``), its token (as the path carried it) or channel id (`apns-channel-id` decoded), and its
/// `aps.timestamp` (nil: none could be read).
public struct UnresentRefusal: Sendable, Equatable {
    public var kind: Int
    public var broadcast: Bool
    public var target: [UInt8]
    public var timestamp: Int64?

    package init(kind: Int, broadcast: Bool, target: [UInt8], timestamp: Int64?) {
        self.kind = kind
        self.broadcast = broadcast
        self.target = target
        self.timestamp = timestamp
    }
}
