import Foundation

/// What a trace run sent, for the summary: the file, its size in lines, its hash, its push lines and the lines of the
/// other ops (device-side, not sent).
public struct PushTraceInfo: Sendable, Equatable {
    public var path: String
    public var lines: Int
    /// FNV-1a 64 of the file's bytes, 16 hex digits.
    public var hash: String
    /// The trace's push lines (all of them, sent by this run or another shard's).
    public var pushLines: Int
    /// The lines of every other op, by op: the device's side of the trace (`request`, `startToken`, `rotate`,
    /// `subscribe`, `dismiss`) and `advance`, not sent. The whole trace's counts in every shard.
    public var notSent: [String: Int]

    public init(path: String, lines: Int, hash: String, pushLines: Int, notSent: [String: Int]) {
        self.path = path
        self.lines = lines
        self.hash = hash
        self.pushLines = pushLines
        self.notSent = notSent
    }
}

/// What a push run did and measured. Every request created at its intended time ends in exactly one of: an answer
/// (by status, and by reason when the body names one), a failure (reset, GOAWAY, connection ended, no connection),
/// or unanswered at the end (in flight or queued when the drain deadline closed the connections).
public struct PushResults: Sendable {
    public var scenario = ""
    public var seed: UInt64 = 0
    public var target = ""
    public var connections = 0
    /// Streams per connection at most, as asked (`--streams`; the server's SETTINGS may allow fewer; 0: not known).
    public var streams = 0
    public var authenticated = false
    /// Scenario events that sent pushes; the token pushes and broadcasts they made.
    public var events = 0
    public var tokenPushes = 0
    public var broadcasts = 0
    /// Push-to-start requests (a trace's `startToken` pushes, to `/3/device/STARTTOKEN`; 0 for a scenario).
    public var pushToStarts = 0
    /// The trace a trace run sent (nil: a scenario's schedule).
    public var trace: PushTraceInfo?
    /// Requests created at their intended time, and those handed to nghttp2.
    public var sent = 0
    public var submitted = 0
    public var byStatus: [Int: Int] = [:]
    public var byReason: [String: Int] = [:]
    public var failures: [String: Int] = [:]
    /// In flight or queued when the run ended (the drain deadline); of these, never handed to nghttp2.
    public var unansweredAtEnd = 0
    public var queuedAtEnd = 0
    /// The most requests queued at once for a free stream, over all connections.
    public var peakQueued = 0
    /// Every request sent, intended time → its end, failing closed: an answer's END_STREAM, a failure's moment (a
    /// reset, a GOAWAY, a connection's end, no connection), or, unanswered at the end, the run's end (censored: at
    /// least that long). Waits for a stream or a connection count: open loop. `--threshold latency.…` judges this.
    public var latency = LatencyHistogram()
    /// The answered requests alone, intended time → the answer's END_STREAM.
    public var answeredLatency = LatencyHistogram()
    /// Intended time → the request handed to nghttp2 (`dispatchLag` + `streamWait`, of the requests submitted).
    public var scheduleLag = LatencyHistogram()
    /// Intended time → the request handed to a connection: the generator's own lateness (a late timer, a busy
    /// loop). Saturation is judged on it.
    public var dispatchLag = LatencyHistogram()
    /// Handed to a connection → submitted to nghttp2: a wait for a free stream (the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS) or for a connection, the server's back-pressure; never submitted: until the
    /// request's end (censored).
    public var streamWait = LatencyHistogram()
    /// One record per second and metric (``PushIntervalSpool/tags``), compressed, for latency.hlog: a run's are on
    /// disk (`spooled`, written as the run goes on); these are held in memory (a merged folder's, read from its
    /// shards' logs). ``forEachInterval(_:)`` reads both.
    public var intervals: [PushInterval] = []
    public var spooled: PushIntervalSpool?
    public var startedAtSeconds = 0.0
    public var scheduleSeconds = 0.0
    public var elapsedSeconds = 0.0
    public var maxScheduleLagNanos: UInt64 = 0
    /// Why each connection ended.
    public var connectionEnds: [String: Int] = [:]
    public var tokensIssued = 0
    /// Ended early by SIGINT or SIGTERM (``PushOptions/stopOnSignals``).
    public var interrupted = false
    /// Connections opened during the run in place of ones that ended or drained.
    public var reconnects = 0
    /// Connections that drained during the run (a GOAWAY, their stream ids near the end): each got its replacement
    /// when the drain started. Reconnect attempts that waited for a backoff (after a connection never answered).
    public var connectionsDrained = 0
    /// Of `connectionsDrained`, the ones drained because their stream ids neared the end (not a GOAWAY).
    public var drainedForStreamIds = 0
    public var reconnectBackoffs = 0
    /// Requests sent again because the server had not processed them: queued when their connection ended or
    /// drained, refused by a GOAWAY (above its last stream id) or by RST_STREAM REFUSED_STREAM. Each is counted
    /// once in `sent`, and its latency runs from its intended time to the answer of its last try.
    public var retries = 0
    /// Every connection ended, and no more could be opened, before the schedule did: the run stopped there.
    public var connectionsLost = false
    /// `K/N` of a shard's run (nil: the whole schedule); the number of shards a merged folder adds up.
    public var shard: String?
    public var shards = 1
    /// The scenario's configuration hash (rates, devices, duration, seed and all: `Scenario.configHash`).
    public var configHash = ""
    /// `--start-at`: the requested t0 (UNIX seconds) and the measured start skew, actual t0 − requested (for a merged
    /// folder: the largest of its shards', by magnitude).
    public var requestedStartSeconds: Double?
    public var startSkewNanos: Int64?
    /// `--start-at` missed by more than `--max-start-skew` (the build and the connections took too long): the run
    /// refused to start, nothing was sent; why. For a merged folder: the shards that refused, with their reasons.
    public var startRefused: String?
    /// `--max-start-skew` as the run used it (nil: no --start-at nor --barrier), and the run's actual t0 (UNIX
    /// nanoseconds; nil: it never started).
    public var maxStartSkewNanos: Int64?
    public var startedUnixNanos: Int64?
    /// `--barrier DIR`: how the shards met (nil: no barrier). A merged folder keeps the first shard's.
    public var barrier: PushBarrierRecord?
    /// A merged folder: each shard's start and their spread (nil: not merged).
    public var shardStarts: PushShardStarts?
    /// The share of the run (t0 → its end) the generator's loop spent working, not waiting for events (nil: not
    /// measured, e.g. a merged folder). Requests that waited for streams while the loop was this busy waited for the
    /// generator itself (it read the answers and wrote the requests late), not for the server.
    public var loopBusyShare: Double?
    /// From this busy share on, a held-up schedule is the generator's (saturated), not the server's.
    public static let busyLoopShare = 0.9
    /// `--epoch`: the scenario's clock at t0 (nil: the wall clock at start).
    public var epochSeconds: Int64?
    /// A folder's own verdicts as its summary.json states them (read back for `fanout merge`; nil: judged here).
    public var recordedSaturated: Bool?
    public var recordedServerLimited: Bool?
    /// A merged folder: the shards (`K/N`) whose own verdict was saturated, and server-limited (nil: not merged).
    public var saturatedShards: [String]?
    public var serverLimitedShards: [String]?

    public init() {}

    public var answered: Int { byStatus.values.reduce(0, +) }
    public var failed: Int { failures.values.reduce(0, +) }
    /// sent = answered + failed + unanswered at the end.
    public var identityHolds: Bool { sent == answered + failed + unansweredAtEnd }
    /// The generator could not hold the schedule by itself: dispatchLag p99 (its own lateness) above the bound, or
    /// the schedule held up (``heldUp``) while its loop was busy (``loopBusy``: it read answers and wrote requests
    /// late). Its numbers would understate the server's latency: thresholds are not judged (exit 3). A merged folder
    /// is saturated when one of its shards was.
    public var saturated: Bool {
        if let shards = saturatedShards { return !shards.isEmpty }
        return recordedSaturated ?? (dispatchLag.valueAtPercentile(99) > maxScheduleLagNanos || (heldUp && loopBusy))
    }
    /// The schedule was held up after requests were handed over: streamWait p99 above the bound, or requests still
    /// queued for a stream at the end (an interrupted run's are the interruption's).
    public var heldUp: Bool {
        streamWait.valueAtPercentile(99) > maxScheduleLagNanos || (queuedAtEnd > 0 && !interrupted)
            || droppedQueueFull > 0
    }
    /// `failures`' key of requests failed at once because their queue was full (`--max-queued`), a reason the
    /// schedule was held up (the same text as FanoutWire's `H2ClientFailure.queueFull`).
    public static let droppedQueueFullKey = "dropped (queue full)"
    public var droppedQueueFull: Int { failures[PushResults.droppedQueueFullKey] ?? 0 }
    /// The generator's loop was busy (``busyLoopShare`` of the run or more): a wait for streams was its own.
    public var loopBusy: Bool { (loopBusyShare ?? 0) >= PushResults.busyLoopShare }
    /// The server held the schedule up (``heldUp``) while the generator's loop waited for it (not ``loopBusy``).
    /// Latency counts from the intended time, so the wait is in it: thresholds are judged. A merged folder is
    /// server-limited when one of its shards was.
    public var serverLimited: Bool {
        if let shards = serverLimitedShards { return !shards.isEmpty }
        return recordedServerLimited ?? (heldUp && !loopBusy)
    }
    public var requestsPerSecond: Double { elapsedSeconds > 0 ? Double(answered) / elapsedSeconds : 0 }
}

public struct PushInterval: Sendable {
    public var tag: String
    public var startSeconds: Double
    public var lengthSeconds: Double
    public var compressed: [UInt8]
    public var maxValue: UInt64
    /// The histogram's summary when known already (the spool keeps one per interval); nil: decode `compressed`.
    public var summary: LatencySummary?

    public init(
        tag: String, startSeconds: Double, lengthSeconds: Double, compressed: [UInt8], maxValue: UInt64,
        summary: LatencySummary? = nil
    ) {
        self.tag = tag
        self.startSeconds = startSeconds
        self.lengthSeconds = lengthSeconds
        self.compressed = compressed
        self.maxValue = maxValue
        self.summary = summary
    }
}

/// A failure before any request could be sent (no connection came up).
public struct PushError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
