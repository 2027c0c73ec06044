/// The latency metrics fanout records, all in nanoseconds (DOMAIN §7).
public enum Metric: Int, CaseIterable, Sendable, Codable {
    /// Service time of each stage.
    case encode, validate, route, apply
    /// Apply end − the intended time of the source event (coordinated-omission correct).
    case endToEnd
    /// Last recipient applied − intended time, once per source event.
    case fanoutCompletion
    /// The same, bucketed by fan-out size.
    case fanoutCompletion1, fanoutCompletion2to100, fanoutCompletion101to10k, fanoutCompletionOver10k
    /// When the harness started an event − when it was due: the harness's own lag.
    case scheduleLag

    public var name: String {
        switch self {
        case .encode: "encode"
        case .validate: "validate"
        case .route: "route"
        case .apply: "apply"
        case .endToEnd: "endToEnd"
        case .fanoutCompletion: "fanoutCompletion"
        case .fanoutCompletion1: "fanoutCompletion.1"
        case .fanoutCompletion2to100: "fanoutCompletion.2-100"
        case .fanoutCompletion101to10k: "fanoutCompletion.101-10k"
        case .fanoutCompletionOver10k: "fanoutCompletion.>10k"
        case .scheduleLag: "scheduleLag"
        }
    }

    /// Fan-out completion and its size buckets: known only once every recipient is in.
    public static let completionMetrics: [Metric] = [
        .fanoutCompletion, .fanoutCompletion1, .fanoutCompletion2to100, .fanoutCompletion101to10k,
        .fanoutCompletionOver10k,
    ]

    /// The name as a file name and histogram-log tag (no `>`): `fanoutCompletion.over10k`.
    public var fileName: String { self == .fanoutCompletionOver10k ? "fanoutCompletion.over10k" : name }

    /// The completion bucket of a fan-out size.
    public static func completionBucket(fanout: Int) -> Metric {
        switch fanout {
        case ...1: .fanoutCompletion1
        case 2...100: .fanoutCompletion2to100
        case 101...10_000: .fanoutCompletion101to10k
        default: .fanoutCompletionOver10k
        }
    }
}

/// One histogram per metric: a run's totals, a merged interval, a shard's sum. Not the hot path
/// (workers record into `IntervalRecorder`); values above one hour are recorded as one hour and
/// counted in `clamped`. `fanout run`'s metrics are `Metric`s; another set (`fanout serve`'s) is
/// addressed by index.
public struct LatencyRecorder: Sendable, Equatable {
    /// Largest value tracked: one hour in nanoseconds; larger values are clamped (and counted).
    public static let highestTrackableNanos: UInt64 = HdrLayout.highestTrackableValue

    public private(set) var histograms: [LatencyHistogram]
    /// Values above `highestTrackableNanos`, recorded as that maximum.
    public var clamped: UInt64 = 0

    public init() {
        histograms = Array(repeating: LatencyHistogram(), count: Metric.allCases.count)
    }

    /// Histograms of `metricCount` metrics, addressed by index.
    public init(metricCount: Int) {
        histograms = Array(repeating: LatencyHistogram(), count: metricCount)
    }

    public var metricCount: Int { histograms.count }

    /// True when no metric holds a value.
    public var isEmpty: Bool { histograms.allSatisfy(\.isEmpty) }

    public static func makeHistogram() -> LatencyHistogram { LatencyHistogram() }

    public mutating func record(_ metric: Metric, nanos: UInt64, count: UInt64 = 1) {
        guard count > 0 else { return }
        if nanos > LatencyRecorder.highestTrackableNanos { clamped &+= count }
        histograms[metric.rawValue].record(nanos, count: count)
    }

    public subscript(_ metric: Metric) -> LatencyHistogram { histograms[metric.rawValue] }

    public subscript(metricIndex m: Int) -> LatencyHistogram { histograms[m] }

    /// Records `count` values of the metric at index `m`.
    public mutating func record(metricIndex m: Int, nanos: UInt64, count: UInt64 = 1) {
        guard count > 0 else { return }
        if nanos > LatencyRecorder.highestTrackableNanos { clamped &+= count }
        histograms[m].record(nanos, count: count)
    }

    /// Adds another recorder's histograms (counts added, never percentiles averaged); both must
    /// hold the same metrics (a `MetricsError` otherwise).
    public mutating func adding(_ other: LatencyRecorder) throws(MetricsError) {
        guard other.histograms.count == histograms.count else {
            throw MetricsError("cannot add \(other.histograms.count) metrics' histograms to \(histograms.count)")
        }
        add(other)
    }

    /// Adds another recorder's histograms (counts added, never percentiles averaged).
    public mutating func add(_ other: LatencyRecorder) {
        for i in histograms.indices where !other.histograms[i].isEmpty { histograms[i].add(other.histograms[i]) }
        clamped &+= other.clamped
    }

    /// Adds a histogram of one metric (an interval read back from a log, a shard's total).
    public mutating func add(_ metric: Metric, _ histogram: LatencyHistogram) {
        histograms[metric.rawValue].add(histogram)
    }

    public mutating func add(metricIndex m: Int, _ histogram: LatencyHistogram) { histograms[m].add(histogram) }

    public mutating func reset() { self = LatencyRecorder(metricCount: histograms.count) }
}

/// Percentile summary of one histogram, as written to `summary.json`.
public struct LatencySummary: Codable, Sendable, Equatable {
    public var unit = "ns"
    public var count: UInt64
    public var mean: Double
    public var p50: UInt64
    public var p90: UInt64
    public var p99: UInt64
    public var p999: UInt64
    public var p9999: UInt64
    public var max: UInt64

    public init(
        count: UInt64, mean: Double, p50: UInt64, p90: UInt64, p99: UInt64, p999: UInt64, p9999: UInt64,
        max: UInt64
    ) {
        self.count = count
        self.mean = mean
        self.p50 = p50
        self.p90 = p90
        self.p99 = p99
        self.p999 = p999
        self.p9999 = p9999
        self.max = max
    }

    public init(_ h: LatencyHistogram) {
        count = h.totalCount
        if count == 0 {
            mean = 0
            p50 = 0
            p90 = 0
            p99 = 0
            p999 = 0
            p9999 = 0
            max = 0
            return
        }
        mean = h.mean
        let v = h.values(atPercentiles: [50, 90, 99, 99.9, 99.99])
        p50 = v[0]
        p90 = v[1]
        p99 = v[2]
        p999 = v[3]
        p9999 = v[4]
        max = h.max
    }
}
