import FanoutHistogramLog
import Histogram
import Testing

@testable import FanoutMetrics

/// A small seeded generator (SplitMix64), so the random cases repeat.
struct Seeded: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// fanout's own histogram against hdrhistogram-swift's, on the same values: the same counts per index
/// (so every encoding is the reference's), the same percentiles, mean and percentile distribution.
@Suite("LatencyHistogram (HdrHistogram's layout)")
struct LatencyHistogramTests {
    /// Latency-like values: mostly microseconds, a tail to seconds, some exact bucket edges.
    static func values(_ n: Int, seed: UInt64) -> [UInt64] {
        var g = Seeded(state: seed)
        return (0..<n).map { k in
            switch k % 10 {
            case 0: UInt64.random(in: 1...2048, using: &g)
            case 9: UInt64.random(in: 1_000_000...3_000_000_000, using: &g)
            case 8: 1 << UInt64.random(in: 11...40, using: &g)
            default: UInt64.random(in: 2_000...400_000, using: &g)
            }
        }
    }

    static func reference(_ values: [UInt64]) -> Histogram<UInt64> {
        var h = Histogram<UInt64>(
            lowestDiscernibleValue: 1, highestTrackableValue: HdrLayout.highestTrackableValue,
            numberOfSignificantValueDigits: .three)
        for v in values { _ = h.record(v) }
        return h
    }

    static func ours(_ values: [UInt64]) -> LatencyHistogram {
        var h = LatencyHistogram()
        for v in values { h.record(v) }
        return h
    }

    @Test("the layout is HdrHistogram's: 33,792 counts; index and value agree with the reference")
    func layout() {
        let h = Self.reference([1])
        for v: UInt64 in [0, 1, 2047, 2048, 2049, 4095, 4096, 1_000_000, 3_600_000_000_000] {
            let index = HdrLayout.index(of: v)
            #expect(HdrLayout.lowestValue(at: index) == h.lowestEquivalentForValue(v), "\(v)")
            #expect(HdrLayout.highestValue(at: index) == h.highestEquivalentForValue(v), "\(v)")
            #expect(HdrLayout.medianValue(at: index) == h.medianEquivalentForValue(v), "\(v)")
        }
        #expect(HdrLayout.index(of: HdrLayout.highestTrackableValue) < HdrLayout.countsLength)
    }

    @Test("same counts (encodings equal), percentiles, mean and deviation as hdrhistogram-swift", arguments: [1, 2, 3])
    func againstReference(seed: UInt64) throws {
        let values = Self.values(20_000, seed: seed)
        let reference = Self.reference(values)
        let ours = Self.ours(values)
        #expect(ours.totalCount == reference.totalCount)
        #expect(ours.encoded() == HistogramCodec.encode(reference))
        for p in [0.0, 1, 50, 90, 99, 99.9, 99.99, 100] {
            // The reference clamps its top percentiles to the raw maximum it saw; ours is the top of that
            // value's index range (a function of the counts alone): the same index.
            let expected = reference.highestEquivalentForValue(reference.valueAtPercentile(p))
            let got = ours.valueAtPercentile(p)
            if p == 0 {
                #expect(got == reference.lowestEquivalentForValue(reference.min))
            } else {
                #expect(got == expected, "p\(p): \(got) vs \(expected)")
            }
        }
        #expect(abs(ours.mean - reference.mean) <= 1e-9 * reference.mean)
        #expect(abs(ours.stdDeviation - reference.stdDeviation) <= 1e-6 * reference.stdDeviation)
        #expect(ours.max == reference.max)
    }

    @Test("the percentile distribution (.hgrm steps) stops where the reference's does")
    func percentileSteps() {
        let values = Self.values(5_000, seed: 9)
        let reference = Self.reference(values)
        let steps = Self.ours(values).percentileSteps(ticksPerHalfDistance: 5)
        let expected = Array(reference.percentiles(ticksPerHalfDistance: 5))
        #expect(steps.count == expected.count && steps.count > 30, "\(steps.count) \(expected.count)")
        for (s, e) in zip(steps, expected) {
            #expect(s.value == reference.highestEquivalentForValue(e.value))
            #expect(s.percentile == e.percentileLevelIteratedTo)
            #expect(s.totalCount == e.totalCountToThisValue)
        }
    }

    @Test("encode → decode gives the same histogram; adding equals recording everything into one")
    func roundTripAndAdd() throws {
        let a = Self.values(3_000, seed: 4)
        let b = Self.values(3_000, seed: 5)
        let ha = Self.ours(a)
        #expect(try LatencyHistogram(decoding: ha.encodedCompressed()) == ha)
        #expect(try LatencyHistogram(decoding: ha.encoded()) == ha)
        var sum = ha
        sum.add(Self.ours(b))
        #expect(sum == Self.ours(a + b))
        #expect(try LatencyHistogram(decoding: LatencyHistogram().encodedCompressed()).isEmpty)
    }

    @Test("an encoding of another layout is an error, never re-bucketed")
    func otherLayout() {
        var two = Histogram<UInt64>(
            lowestDiscernibleValue: 1, highestTrackableValue: 1_000_000, numberOfSignificantValueDigits: .two)
        _ = two.record(500)
        #expect(throws: LatencyHistogram.LayoutError.self) {
            _ = try LatencyHistogram(decoding: HistogramCodec.encodeCompressed(two))
        }
    }
}

@Suite("IntervalRecorder")
struct IntervalRecorderTests {
    @Test("an interval taken equals a histogram of the same values; the next one starts empty")
    func takeInterval() {
        let recorder = IntervalRecorder()
        let values = LatencyHistogramTests.values(10_000, seed: 11)
        var expected = LatencyHistogram()
        for v in values {
            recorder.record(.endToEnd, nanos: v)
            expected.record(v)
        }
        recorder.record(.apply, nanos: 60, count: 500)
        #expect(!recorder.isEmpty)
        let first = recorder.takeInterval()
        #expect(first[.endToEnd] == expected)
        #expect(first[.apply].totalCount == 500 && first[.apply].max == 60)
        #expect(first[.encode].isEmpty)
        #expect(recorder.isEmpty)
        let second = recorder.takeInterval()
        #expect(second[.endToEnd].isEmpty && second[.apply].isEmpty)
        recorder.record(.endToEnd, nanos: 5)
        #expect(recorder.takeInterval()[.endToEnd].totalCount == 1)
    }

    @Test("values above one hour are recorded as one hour and counted")
    func clamped() {
        let recorder = IntervalRecorder()
        recorder.record(.scheduleLag, nanos: HdrLayout.highestTrackableValue + 1, count: 3)
        recorder.record(.scheduleLag, nanos: 10)
        let taken = recorder.takeInterval()
        #expect(taken.clamped == 3)
        #expect(taken[.scheduleLag].totalCount == 4)
        #expect(
            taken[.scheduleLag].max == HdrLayout.highestValue(at: HdrLayout.index(of: HdrLayout.highestTrackableValue)))
        #expect(recorder.takeInterval().clamped == 0)
    }
}
