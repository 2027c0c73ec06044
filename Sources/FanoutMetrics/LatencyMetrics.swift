import Histogram

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

/// One worker's histograms (shared-nothing: only its own thread records into it). Recording is a
/// few arithmetic operations on preallocated counts: no allocation, no lock.
public struct LatencyRecorder: Sendable {
    /// Largest value tracked: one hour in nanoseconds; larger values are clamped (and counted).
    public static let highestTrackableNanos: UInt64 = 3_600_000_000_000

    public private(set) var histograms: [Histogram<UInt64>]
    /// Values above `highestTrackableNanos`, recorded as that maximum.
    public private(set) var clamped: UInt64 = 0

    public init() {
        histograms = Metric.allCases.map { _ in LatencyRecorder.makeHistogram() }
    }

    public static func makeHistogram() -> Histogram<UInt64> {
        Histogram<UInt64>(
            lowestDiscernibleValue: 1, highestTrackableValue: highestTrackableNanos,
            numberOfSignificantValueDigits: .three)
    }

    @inline(__always)
    public mutating func record(_ metric: Metric, nanos: UInt64) {
        var value = nanos
        if value > LatencyRecorder.highestTrackableNanos {
            value = LatencyRecorder.highestTrackableNanos
            clamped &+= 1
        }
        _ = histograms[metric.rawValue].record(value)
    }

    /// Records `count` equal values at once (a broadcast's recipients sharing one stage time).
    @inline(__always)
    public mutating func record(_ metric: Metric, nanos: UInt64, count: UInt64) {
        guard count > 0 else { return }
        let value = min(nanos, LatencyRecorder.highestTrackableNanos)
        if nanos > LatencyRecorder.highestTrackableNanos { clamped &+= count }
        _ = histograms[metric.rawValue].record(value, count: count)
    }

    public subscript(_ metric: Metric) -> Histogram<UInt64> { histograms[metric.rawValue] }

    /// Adds another worker's histograms (`Histogram.add`).
    public mutating func add(_ other: LatencyRecorder) {
        // Empty histograms are skipped: adding or resetting one still walks all its counts.
        for i in histograms.indices where other.histograms[i].totalCount > 0 { histograms[i].add(other.histograms[i]) }
        clamped &+= other.clamped
    }

    /// Adds a histogram of one metric (an interval read back from a log, a shard's total).
    public mutating func add(_ metric: Metric, _ histogram: Histogram<UInt64>) {
        histograms[metric.rawValue].add(histogram)
    }

    public mutating func reset() {
        for i in histograms.indices where histograms[i].totalCount > 0 { histograms[i].reset() }
        clamped = 0
    }
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

    public init(_ h: Histogram<UInt64>) {
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
        p50 = h.valueAtPercentile(50)
        p90 = h.valueAtPercentile(90)
        p99 = h.valueAtPercentile(99)
        p999 = h.valueAtPercentile(99.9)
        p9999 = h.valueAtPercentile(99.99)
        max = h.max
    }
}
