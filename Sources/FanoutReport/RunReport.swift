import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import Foundation

/// What a run folder says about one run: made from a finished simulation (`fanout run`), read
/// back from a folder (`fanout compare`, `fanout merge`), and rendered as every file of the folder.
public struct RunReport: Sendable {
    public var info: RunInfo
    public var accounting: Accounting
    public var activities: Int
    public var events: Int
    /// Totals of the whole run, one histogram per metric (nanoseconds).
    public var recorder: LatencyRecorder
    /// Interval histograms (the histogram log), by interval then metric.
    public var intervals: [MergedInterval]
    public var intervalNanos: UInt64
    public var peakResidentBytes: Int
    public var baselineResidentBytes: Int
    /// Per-event completion, kept for sharded runs (`completion.tsv`): what `merge` needs.
    public var completion: EventCompletions?
    /// Resident memory and open file descriptors over the run (every 10 s).
    public var resources: [ResourceSample] = []
    /// How the run measured: the sampling rule and its cost, what was clamped, the cost model.
    public var measurement = MeasurementInfo()

    public init(
        info: RunInfo, accounting: Accounting, activities: Int, events: Int, recorder: LatencyRecorder,
        intervals: [MergedInterval], intervalNanos: UInt64, peakResidentBytes: Int, baselineResidentBytes: Int,
        completion: EventCompletions?
    ) {
        self.info = info
        self.accounting = accounting
        self.activities = activities
        self.events = events
        self.recorder = recorder
        self.intervals = intervals
        self.intervalNanos = intervalNanos
        self.peakResidentBytes = peakResidentBytes
        self.baselineResidentBytes = baselineResidentBytes
        self.completion = completion
    }

    public subscript(_ metric: Metric) -> LatencyHistogram { recorder[metric] }

    public var bytesPerActivity: Int {
        activities > 0 ? max(peakResidentBytes - baselineResidentBytes, 0) / activities : 0
    }

    /// Per second of wall time.
    public func perSecond(_ count: Int) -> Double { (Double(count) / max(info.wallSeconds, 1e-9)).rounded() }

    /// The interval summaries of one metric, in interval order (made when each interval closed).
    public func intervalSummaries(_ metric: Metric) -> [(index: Int, summary: LatencySummary)] {
        intervals.filter { $0.metric == metric }.map { ($0.index, $0.summary) }
    }
}

/// The `run` part of `summary.json`: what ran, where, how.
public struct RunInfo: Sendable, Equatable {
    public static let toolVersion = "0.1.0"

    public var tool: String
    public var version: String
    public var gitRevision: String
    public var scenario: String
    public var seed: UInt64
    public var configHash: String
    public var clock: String
    public var workers: Int
    public var durationSeconds: Double
    public var wallSeconds: Double
    /// Seconds since the epoch (written as ISO 8601 with milliseconds).
    public var startedAtSeconds: Double
    public var machine: MachineInfo
    public var timerOverheadNanos: Double
    public var stageSampleEvery: Int
    /// `K/N` for one shard of a sharded run; nil for a whole run or a merge.
    public var shard: String?
    /// How many shard folders a merged report came from (1: not a merge).
    public var shards: Int

    public init(
        tool: String, version: String, gitRevision: String, scenario: String, seed: UInt64, configHash: String,
        clock: String, workers: Int, durationSeconds: Double, wallSeconds: Double, startedAtSeconds: Double,
        machine: MachineInfo, timerOverheadNanos: Double, stageSampleEvery: Int, shard: String?, shards: Int
    ) {
        self.tool = tool
        self.version = version
        self.gitRevision = gitRevision
        self.scenario = scenario
        self.seed = seed
        self.configHash = configHash
        self.clock = clock
        self.workers = workers
        self.durationSeconds = durationSeconds
        self.wallSeconds = wallSeconds
        self.startedAtSeconds = startedAtSeconds
        self.machine = machine
        self.timerOverheadNanos = timerOverheadNanos
        self.stageSampleEvery = stageSampleEvery
        self.shard = shard
        self.shards = shards
    }

    public var startedAt: String { RunInfo.isoText(startedAtSeconds) }

    static func isoText(_ seconds: Double) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: Date(timeIntervalSince1970: seconds))
    }

    static func isoSeconds(_ text: String) -> Double? {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = f.date(from: text) { return d.timeIntervalSince1970 }
        return ISO8601DateFormatter().date(from: text)?.timeIntervalSince1970
    }
}

/// The machine a run ran on.
public struct MachineInfo: Sendable, Equatable {
    public var cores: Int
    public var cpu: String
    public var os: String

    public static var current: MachineInfo {
        MachineInfo(cores: ProcessInfo.processInfo.activeProcessorCount, cpu: Machine.cpu, os: Machine.os)
    }
}

/// How a run measured (`summary.json` "measurement", summary.md "Measurement").
public struct MeasurementInfo: Sendable, Equatable {
    /// The sampling rule, in words.
    public var sampling = ""
    /// Clock reads taken for measurements (real time; 0 in virtual time) and their share of deliveries.
    public var clockReads = 0
    /// Samples above one hour, recorded as one hour (counted, never dropped).
    public var clampedSamples: UInt64 = 0
    /// (worker, event) pairs with no local recipient: the worker did nothing for the event.
    public var eventsSkipped = 0
    /// Virtual time's cost model, as the scenario's `costModel` object (nil in real time).
    public var costModel: String?
    /// Wall-clock seconds merging the workers' last hand-over (after the run's wall time).
    public var finalMergeSeconds = 0.0
    /// Wall-clock seconds rendering every file of the run folder but summary.json itself.
    public var reportSeconds = 0.0

    public init() {}
}
