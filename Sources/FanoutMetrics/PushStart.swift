/// `fanout push --barrier DIR`: how the shards met before their common start. Each shard, once its population was
/// built and its connections were ready, wrote `DIR/ready-K` holding that instant; the start is the latest of the N
/// instants plus `marginNanos`, computed alike by every shard from the files (no coordinator).
public struct PushBarrierRecord: Sendable, Equatable {
    /// The directory the shards met in, as given.
    public var directory: String
    /// N: the shards the barrier waited for.
    public var shards: Int
    public var marginNanos: Int64
    public var timeoutNanos: Int64
    /// The ready instant of each shard read from its file (UNIX nanoseconds), by K; nil: never seen (a barrier that
    /// timed out).
    public var readyUnixNanos: [Int64?]
    /// This shard's own ready instant, and when the last of the N files was seen (nil: never).
    public var ownReadyUnixNanos: Int64
    public var metUnixNanos: Int64?
    /// The start the barrier fixed: max(readyUnixNanos) + marginNanos (nil: it timed out).
    public var startUnixNanos: Int64?
    /// Why the barrier was not met (its peers did not all arrive within the timeout): the run sent nothing.
    public var timedOut: String?

    public init(directory: String, shards: Int, marginNanos: Int64, timeoutNanos: Int64, ownReadyUnixNanos: Int64) {
        self.directory = directory
        self.shards = shards
        self.marginNanos = marginNanos
        self.timeoutNanos = timeoutNanos
        self.ownReadyUnixNanos = ownReadyUnixNanos
        readyUnixNanos = Array(repeating: nil, count: shards)
    }
}

/// The shards' start instants, for a merged folder: each shard's actual t0 (UNIX nanoseconds, by `K/N`), the
/// spread (latest − earliest of the shards that started) and whether every shard started within its
/// `--max-start-skew` of the common start (and of each other).
public struct PushShardStarts: Sendable, Equatable {
    public var startedUnixNanos: [String: Int64] = [:]
    /// The shards that did not start (refused, or their barrier timed out).
    public var notStarted: [String] = []
    public var maxStartSkewNanos: Int64?

    public init() {}

    public var spreadNanos: Int64? {
        guard let lo = startedUnixNanos.values.min(), let hi = startedUnixNanos.values.max() else { return nil }
        return hi - lo
    }

    /// Every shard started, and the spread of their starts is within the skew (nil: no skew to judge by).
    public var withinSkew: Bool? {
        guard let maxStartSkewNanos, let spreadNanos else { return notStarted.isEmpty ? nil : false }
        return notStarted.isEmpty && spreadNanos <= maxStartSkewNanos
    }
}
