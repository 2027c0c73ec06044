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

/// A latency histogram in HdrHistogram's layout (`HdrLayout`), stored as the counts from its lowest to
/// its highest non-zero index. Every statistic is a function of the counts alone (the highest value
/// is the top of the highest non-zero index's range), so a histogram read back from its encoding has
/// the same percentiles, mean and maximum as the one written, and each is one pass over the counts,
/// whatever the number of samples.
public struct LatencyHistogram: Sendable, Equatable {
    /// The index of `counts[0]`.
    public private(set) var first = 0
    /// Counts of indices `first ..< first + counts.count`; the first and last are non-zero.
    public private(set) var counts: [UInt64] = []
    public private(set) var totalCount: UInt64 = 0

    public init() {}

    /// A histogram from counts at indices from `first` on (leading and trailing zeros are dropped).
    public init(first: Int, counts: UnsafeBufferPointer<UInt64>) {
        var lo = 0
        var hi = counts.count
        while lo < hi && counts[lo] == 0 { lo += 1 }
        while hi > lo && counts[hi - 1] == 0 { hi -= 1 }
        guard lo < hi else { return }
        self.first = first + lo
        self.counts = Array(UnsafeBufferPointer(rebasing: counts[lo..<hi]))
        var total: UInt64 = 0
        for c in self.counts { total &+= c }
        totalCount = total
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

    /// HdrHistogram's compressed V2 encoding (what interval logs carry).
    public func encodedCompressed() -> [UInt8] {
        counts.withUnsafeBufferPointer {
            HistogramCodec.encodeCompressed(
                counts: $0, first: first, lowestDiscernibleValue: HdrLayout.lowestDiscernibleValue,
                highestTrackableValue: HdrLayout.highestTrackableValue, significantDigits: HdrLayout.significantDigits)
        }
    }

    /// The uncompressed V2 encoding.
    public func encoded() -> [UInt8] {
        counts.withUnsafeBufferPointer {
            HistogramCodec.encode(
                counts: $0, first: first, lowestDiscernibleValue: HdrLayout.lowestDiscernibleValue,
                highestTrackableValue: HdrLayout.highestTrackableValue, significantDigits: HdrLayout.significantDigits)
        }
    }

    public var isEmpty: Bool { totalCount == 0 }

    /// Makes room for `index` (not the hot path: workers record into `IntervalRecorder`).
    private mutating func cover(_ index: Int) {
        if counts.isEmpty {
            first = index
            counts = [0]
        } else if index < first {
            counts.insert(contentsOf: repeatElement(0, count: first - index), at: 0)
            first = index
        } else if index >= first + counts.count {
            counts.append(contentsOf: repeatElement(0, count: index - first - counts.count + 1))
        }
    }

    /// Records `count` values (a value above one hour is recorded as one hour; `LatencyRecorder`
    /// counts those).
    public mutating func record(_ value: UInt64, count: UInt64 = 1) {
        guard count > 0 else { return }
        let index = HdrLayout.index(of: Swift.min(value, HdrLayout.highestTrackableValue))
        cover(index)
        counts[index - first] &+= count
        totalCount &+= count
    }

    /// Adds counts at indices from `first` on.
    public mutating func add(first other: Int, counts add: UnsafeBufferPointer<UInt64>) {
        guard !add.isEmpty else { return }
        cover(other)
        cover(other + add.count - 1)
        counts.withUnsafeMutableBufferPointer { c in
            let offset = other - first
            for k in 0..<add.count {
                c[offset + k] &+= add[k]
                totalCount &+= add[k]
            }
        }
    }

    public mutating func add(_ other: LatencyHistogram) {
        other.counts.withUnsafeBufferPointer { add(first: other.first, counts: $0) }
    }

    public mutating func reset() { self = LatencyHistogram() }

    /// The lowest value recorded, as the bottom of its index's range (0 when empty).
    public var min: UInt64 { counts.isEmpty ? 0 : HdrLayout.lowestValue(at: first) }

    /// The highest value recorded, as the top of its index's range (0 when empty).
    public var max: UInt64 { counts.isEmpty ? 0 : HdrLayout.highestValue(at: first + counts.count - 1) }

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
        for k in counts.indices where counts[k] > 0 {
            let v = Double(HdrLayout.medianValue(at: first + k))
            let c = Double(counts[k])
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
        var k = 0
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
            while k < counts.count {
                if cumulative &+ counts[k] >= needed { break }
                cumulative &+= counts[k]
                k += 1
            }
            out[i] = HdrLayout.highestValue(at: first + Swift.min(k, counts.count - 1))
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
        var k = 0
        var fresh = true
        var cumulative: UInt64 = 0
        while true {
            if cumulative >= totalCount {
                if reachedLast { break }
                level = 100
                reachedLast = true
            }
            var found = false
            while k < counts.count {
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
