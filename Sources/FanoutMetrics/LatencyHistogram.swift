import FanoutHistogramLog

/// HdrHistogram's counts layout for fanout's latencies: lowest discernible value 1 ns, highest
/// trackable value one hour, 3 significant digits — 33,792 counts, the same indices as Java's, C's,
/// Python's and hdrhistogram-swift's histograms of these parameters, so every encoding is theirs.
public enum HdrLayout {
    public static let lowestDiscernibleValue: UInt64 = 1
    public static let highestTrackableValue: UInt64 = 3_600_000_000_000
    public static let significantDigits = 3
    /// log2 of half the sub-bucket count (1,024 = 2,000 rounded up to a power of two, halved).
    @usableFromInline static let subBucketHalfCountMagnitude = 10
    @usableFromInline static let subBucketHalfCount = 1024
    @usableFromInline static let subBucketMask: UInt64 = 2047
    /// 64 − unit magnitude (0) − sub-bucket half-count magnitude − 1.
    @usableFromInline static let leadingZeroCountBase = 53
    /// (buckets + 1) × sub-bucket half count, 32 buckets cover one hour in nanoseconds.
    public static let countsLength = 33 * 1024

    /// The counts index of a value (at most `highestTrackableValue`).
    @inlinable @inline(__always)
    public static func index(of value: UInt64) -> Int {
        let bucketIndex = leadingZeroCountBase &- (value | subBucketMask).leadingZeroBitCount
        let subBucketIndex = Int(truncatingIfNeeded: value &>> UInt64(bucketIndex))
        return ((bucketIndex &+ 1) &<< subBucketHalfCountMagnitude) &+ (subBucketIndex &- subBucketHalfCount)
    }

    /// The lowest value counted at an index.
    @inlinable
    public static func lowestValue(at index: Int) -> UInt64 {
        var bucketIndex = (index >> subBucketHalfCountMagnitude) - 1
        var subBucketIndex = (index & (subBucketHalfCount - 1)) + subBucketHalfCount
        if bucketIndex < 0 {
            subBucketIndex -= subBucketHalfCount
            bucketIndex = 0
        }
        return UInt64(subBucketIndex) << UInt64(bucketIndex)
    }

    /// How many values an index counts together.
    @inlinable
    public static func rangeSize(at index: Int) -> UInt64 {
        1 << UInt64(max(0, (index >> subBucketHalfCountMagnitude) - 1))
    }

    /// The highest value counted at an index (HdrHistogram's `highestEquivalentValue`).
    @inlinable
    public static func highestValue(at index: Int) -> UInt64 { lowestValue(at: index) + rangeSize(at: index) - 1 }

    /// The middle of an index's range (HdrHistogram's `medianEquivalentValue`, what mean and standard
    /// deviation use).
    @inlinable
    public static func medianValue(at index: Int) -> UInt64 { lowestValue(at: index) + rangeSize(at: index) >> 1 }
}

/// A latency histogram in HdrHistogram's layout (`HdrLayout`), stored as the counts of a span of
/// indices that grows, in steps that at least double it, as values arrive (so adding and recording stay
/// amortised O(1) per index); `low`...`high` is the range of non-zero counts. Every statistic is a function
/// of the counts alone (the highest value is the top of the highest non-zero index's range), so a
/// histogram read back from its encoding has the same percentiles, mean and maximum as the one written,
/// and each is one pass over the non-zero range, whatever the number of samples.
public struct LatencyHistogram: Sendable, Equatable {
    /// The index of `counts[0]`.
    private var first = 0
    /// Counts of indices `first ..< first + counts.count` (zero outside `low...high`).
    private var counts: [UInt64] = []
    /// The lowest and the highest index with a non-zero count (`low > high` when empty).
    public private(set) var low = Int.max
    public private(set) var high = -1
    public private(set) var totalCount: UInt64 = 0

    public init() {}

    /// A histogram from counts at indices from `first` on.
    public init(first: Int, counts: UnsafeBufferPointer<UInt64>) {
        add(first: first, counts: counts)
    }

    public static func == (a: LatencyHistogram, b: LatencyHistogram) -> Bool {
        guard a.totalCount == b.totalCount, a.low == b.low, a.high == b.high else { return false }
        guard a.low <= a.high else { return true }
        for index in a.low...a.high where a.counts[index - a.first] != b.counts[index - b.first] { return false }
        return true
    }

    public struct LayoutError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Decodes a V2 encoding (compressed or not). An encoding of other parameters is an error, never
    /// re-bucketed or clamped.
    public init(decoding bytes: [UInt8]) throws {
        let c = try HistogramCodec.decodeCounts(bytes)
        guard c.lowestDiscernibleValue == HdrLayout.lowestDiscernibleValue,
            c.significantDigits == HdrLayout.significantDigits,
            c.first + c.counts.count <= HdrLayout.countsLength
        else {
            throw LayoutError(
                description:
                    "a histogram of lowest value \(c.lowestDiscernibleValue), \(c.significantDigits) digits and "
                    + "highest \(c.highestTrackableValue): fanout reads 1, 3 digits, at most one hour in nanoseconds")
        }
        self = c.counts.withUnsafeBufferPointer { LatencyHistogram(first: c.first, counts: $0) }
    }

    /// The non-zero range's counts and the index of the first.
    func withNonZero<R>(_ body: (UnsafeBufferPointer<UInt64>, Int) -> R) -> R {
        guard low <= high else { return body(UnsafeBufferPointer(start: nil, count: 0), 0) }
        return counts.withUnsafeBufferPointer {
            body(UnsafeBufferPointer(rebasing: $0[(low - first)...(high - first)]), low)
        }
    }

    /// HdrHistogram's compressed V2 encoding (what interval logs carry).
    public func encodedCompressed() -> [UInt8] {
        withNonZero {
            HistogramCodec.encodeCompressed(
                counts: $0, first: $1, lowestDiscernibleValue: HdrLayout.lowestDiscernibleValue,
                highestTrackableValue: HdrLayout.highestTrackableValue, significantDigits: HdrLayout.significantDigits)
        }
    }

    /// The uncompressed V2 encoding.
    public func encoded() -> [UInt8] {
        withNonZero {
            HistogramCodec.encode(
                counts: $0, first: $1, lowestDiscernibleValue: HdrLayout.lowestDiscernibleValue,
                highestTrackableValue: HdrLayout.highestTrackableValue, significantDigits: HdrLayout.significantDigits)
        }
    }

    public var isEmpty: Bool { totalCount == 0 }

    /// Makes room for indices `from...to`, growing the span at least twofold (not the hot path: workers
    /// record into `IntervalRecorder`).
    private mutating func cover(_ from: Int, _ to: Int) {
        if counts.isEmpty {
            let span = Swift.max(to - from + 1, 64)
            first = Swift.max(0, Swift.min(from, HdrLayout.countsLength - span))
            counts = Array(repeating: 0, count: Swift.min(span, HdrLayout.countsLength - first))
            return
        }
        let end = first + counts.count
        guard from < first || to >= end else { return }
        let grow = Swift.max(counts.count, 64)
        let newFirst = from < first ? Swift.max(0, Swift.min(from, first - grow)) : first
        let newEnd = to >= end ? Swift.min(HdrLayout.countsLength, Swift.max(to + 1, end + grow)) : end
        if newFirst < first { counts.insert(contentsOf: repeatElement(0, count: first - newFirst), at: 0) }
        if newEnd > end { counts.append(contentsOf: repeatElement(0, count: newEnd - end)) }
        first = newFirst
    }

    /// Records `count` values (a value above one hour is recorded as one hour; `LatencyRecorder`
    /// counts those).
    public mutating func record(_ value: UInt64, count: UInt64 = 1) {
        guard count > 0 else { return }
        let index = HdrLayout.index(of: Swift.min(value, HdrLayout.highestTrackableValue))
        // Within the span already held (nearly always): no call (`fanout push` records five samples a request).
        if _slowPath(index < first || index >= first &+ counts.count) { cover(index, index) }
        counts[index &- first] &+= count
        totalCount &+= count
        low = Swift.min(low, index)
        high = Swift.max(high, index)
    }

    /// Adds counts at indices from `first` on.
    public mutating func add(first other: Int, counts add: UnsafeBufferPointer<UInt64>) {
        var lo = 0
        var hi = add.count
        while lo < hi && add[lo] == 0 { lo += 1 }
        while hi > lo && add[hi - 1] == 0 { hi -= 1 }
        guard lo < hi else { return }
        cover(other + lo, other + hi - 1)
        let offset = other - first
        counts.withUnsafeMutableBufferPointer { c in
            for k in lo..<hi {
                c[offset + k] &+= add[k]
                totalCount &+= add[k]
            }
        }
        low = Swift.min(low, other + lo)
        high = Swift.max(high, other + hi - 1)
    }

    public mutating func add(_ other: LatencyHistogram) {
        other.withNonZero { add(first: $1, counts: $0) }
    }

    /// Empties the histogram, keeping its storage (a per-second histogram does not grow its span again each second).
    public mutating func reset() {
        if low <= high {
            let from = low - first, to = high - first
            counts.withUnsafeMutableBufferPointer { c in
                for k in from...to { c[k] = 0 }
            }
        }
        low = Int.max
        high = -1
        totalCount = 0
    }

    /// The lowest value recorded, as the bottom of its index's range (0 when empty).
    public var min: UInt64 { isEmpty ? 0 : HdrLayout.lowestValue(at: low) }

    /// The highest value recorded, as the top of its index's range (0 when empty).
    public var max: UInt64 { isEmpty ? 0 : HdrLayout.highestValue(at: high) }

    /// The count at a value's index.
    public func count(at value: UInt64) -> UInt64 {
        let index = HdrLayout.index(of: Swift.min(value, HdrLayout.highestTrackableValue)) - first
        return index >= 0 && index < counts.count ? counts[index] : 0
    }

    /// Mean and standard deviation from the middle of each index's range, in one pass
    /// (HdrHistogram's definitions).
    public var meanAndDeviation: (mean: Double, deviation: Double) {
        guard totalCount > 0 else { return (0, 0) }
        var sum = 0.0
        var sumSquares = 0.0
        for index in low...high where counts[index - first] > 0 {
            let v = Double(HdrLayout.medianValue(at: index))
            let c = Double(counts[index - first])
            sum += v * c
            sumSquares += v * v * c
        }
        let n = Double(totalCount)
        let mean = sum / n
        return (mean, (Swift.max(sumSquares / n - mean * mean, 0)).squareRoot())
    }

    public var mean: Double { meanAndDeviation.mean }
    public var stdDeviation: Double { meanAndDeviation.deviation }

    /// The count a percentile needs (HdrHistogram's rounding: one ulp below, rounded up, at least 1).
    static func rank(_ percentile: Double, of total: UInt64) -> UInt64 {
        let requested = Swift.min(Swift.max(percentile.nextDown, 0), 100)
        return Swift.max(1, UInt64((requested * Double(total) / 100).rounded(.up)))
    }

    /// The value at a percentile: the top of the range of the index where the cumulative count reaches
    /// it (HdrHistogram's `valueAtPercentile`); `min` at 0, `max` at 100.
    public func valueAtPercentile(_ percentile: Double) -> UInt64 {
        values(atPercentiles: [percentile])[0]
    }

    /// Several percentiles (ascending or not) in one pass.
    public func values(atPercentiles percentiles: [Double]) -> [UInt64] {
        guard totalCount > 0 else { return percentiles.map { _ in 0 } }
        let order = percentiles.indices.sorted { percentiles[$0] < percentiles[$1] }
        var out = [UInt64](repeating: 0, count: percentiles.count)
        var cumulative: UInt64 = 0
        var k = low
        for i in order {
            let p = percentiles[i]
            if p <= 0 {
                out[i] = min
                continue
            }
            if p >= 100 {
                out[i] = max
                continue
            }
            let needed = LatencyHistogram.rank(p, of: totalCount)
            while k < high {
                if cumulative &+ counts[k - first] >= needed { break }
                cumulative &+= counts[k - first]
                k += 1
            }
            out[i] = HdrLayout.highestValue(at: k)
        }
        return out
    }

    /// One step of HdrHistogram's percentile distribution (`outputPercentileDistribution`, `.hgrm`).
    public struct PercentileStep: Sendable, Equatable {
        public var value: UInt64
        public var percentile: Double
        public var totalCount: UInt64
    }

    /// The steps of HdrHistogram's percentile iteration: `ticksPerHalfDistance` steps in each half of
    /// the distance to 100%, then a last step at 100%; the same stops as the reference implementations.
    public func percentileSteps(ticksPerHalfDistance ticks: Int = 5) -> [PercentileStep] {
        guard totalCount > 0 else { return [] }
        var steps: [PercentileStep] = []
        var level = 0.0
        var reachedLast = false
        var k = low - first
        let end = high - first + 1
        var fresh = true
        var cumulative: UInt64 = 0
        while true {
            if cumulative >= totalCount {
                if reachedLast { break }
                level = 100
                reachedLast = true
            }
            var found = false
            while k < end {
                if fresh {
                    cumulative &+= counts[k]
                    fresh = false
                }
                if counts[k] != 0 && 100 * Double(cumulative) / Double(totalCount) >= level {
                    steps.append(
                        PercentileStep(
                            value: HdrLayout.highestValue(at: first + k), percentile: level, totalCount: cumulative))
                    if level != 100 {
                        let halvings = Self.floorLog2(100 / (100 - level))
                        let reportingTicks = UInt64(ticks) * (UInt64(1) << UInt64(Swift.min(halvings + 1, 62)))
                        level += 100 / Double(reportingTicks)
                    }
                    found = true
                    break
                }
                k += 1
                fresh = true
            }
            if !found { break }
        }
        return steps
    }

    /// ⌊log2 x⌋ for x ≥ 1, without Foundation.
    static func floorLog2(_ x: Double) -> Int {
        var e = 0
        var v = x
        while v >= 2 {
            v /= 2
            e += 1
        }
        return e
    }
}
