import Histogram

/// HdrHistogram's V2 encoding (as Java's `encodeIntoCompressedByteBuffer`, HdrHistogram_py and
/// HdrHistogram_c write it), which hdrhistogram-swift 0.2.0 does not provide.
///
/// Uncompressed: a 40-byte big-endian header — cookie `0x1c849313`, payload length, normalizing
/// index offset (0), significant digits, lowest discernible value, highest trackable value,
/// integer-to-double ratio (1.0) — then the counts in index order as ZigZag LEB128 64-bit
/// integers, a run of n zero counts written as −n. Compressed: cookie `0x1c849314`, the length
/// of the zlib stream, and the zlib-deflated uncompressed encoding.
public enum HistogramCodec {
    static let encodingCookie: UInt32 = 0x1C84_9313
    static let compressedCookie: UInt32 = 0x1C84_9314

    public struct DecodeError: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// The layout of HdrHistogram's counts array for given parameters (the index arithmetic every
    /// implementation shares).
    struct Layout {
        let unitMagnitude: Int
        let subBucketHalfCountMagnitude: Int
        let subBucketHalfCount: Int
        let subBucketMask: UInt64
        let leadingZeroCountBase: Int

        init(lowestDiscernibleValue: UInt64, significantDigits: Int) {
            unitMagnitude = 63 - lowestDiscernibleValue.leadingZeroBitCount  // floor(log2)
            var largest: UInt64 = 2
            for _ in 0..<significantDigits { largest *= 10 }
            let subBucketCountMagnitude = 64 - (largest - 1).leadingZeroBitCount  // ceil(log2)
            subBucketHalfCountMagnitude = max(subBucketCountMagnitude, 1) - 1
            subBucketHalfCount = 1 << subBucketHalfCountMagnitude
            subBucketMask = UInt64((1 << (subBucketHalfCountMagnitude + 1)) - 1) << UInt64(unitMagnitude)
            leadingZeroCountBase = 64 - unitMagnitude - subBucketHalfCountMagnitude - 1
        }

        func index(of value: UInt64) -> Int {
            let bucketIndex = leadingZeroCountBase - (value | subBucketMask).leadingZeroBitCount
            let subBucketIndex = Int(value >> UInt64(bucketIndex + unitMagnitude))
            return ((bucketIndex + 1) << subBucketHalfCountMagnitude) + (subBucketIndex - subBucketHalfCount)
        }

        /// HdrHistogram's counts array length for a highest trackable value.
        func countsLength(highestTrackableValue: UInt64) -> Int {
            var smallestUntrackable = UInt64(subBucketHalfCount) << UInt64(unitMagnitude + 1)
            var buckets = 1
            while smallestUntrackable <= highestTrackableValue {
                if smallestUntrackable > UInt64.max / 2 { return (buckets + 2) * subBucketHalfCount }
                smallestUntrackable <<= 1
                buckets += 1
            }
            return (buckets + 1) * subBucketHalfCount
        }

        func value(at index: Int) -> UInt64 {
            var bucketIndex = (index >> subBucketHalfCountMagnitude) - 1
            var subBucketIndex = (index & (subBucketHalfCount - 1)) + subBucketHalfCount
            if bucketIndex < 0 {
                subBucketIndex -= subBucketHalfCount
                bucketIndex = 0
            }
            return UInt64(subBucketIndex) << UInt64(bucketIndex + unitMagnitude)
        }
    }

    static func digits(_ h: Histogram<UInt64>) -> Int {
        Int(h.numberOfSignificantValueDigits.rawValue)
    }

    /// A histogram's parameters and its counts from index `first` on (the rest are zero): what the
    /// V2 encoding carries, independent of any histogram implementation.
    public struct Counts: Sendable, Equatable {
        public var lowestDiscernibleValue: UInt64
        public var highestTrackableValue: UInt64
        public var significantDigits: Int
        public var first: Int
        public var counts: [UInt64]

        public init(
            lowestDiscernibleValue: UInt64, highestTrackableValue: UInt64, significantDigits: Int, first: Int,
            counts: [UInt64]
        ) {
            self.lowestDiscernibleValue = lowestDiscernibleValue
            self.highestTrackableValue = highestTrackableValue
            self.significantDigits = significantDigits
            self.first = first
            self.counts = counts
        }
    }

    /// The uncompressed V2 encoding of counts at indices `first ..< first + counts.count`.
    public static func encode(
        counts: UnsafeBufferPointer<UInt64>, first: Int, lowestDiscernibleValue: UInt64,
        highestTrackableValue: UInt64, significantDigits: Int
    ) -> [UInt8] {
        var payload: [UInt8] = []
        payload.reserveCapacity(64 + counts.count / 4)
        var nextIndex = 0
        for k in 0..<counts.count where counts[k] > 0 {
            let index = first + k
            if index > nextIndex { appendZigZag(-Int64(index - nextIndex), to: &payload) }
            appendZigZag(Int64(counts[k]), to: &payload)
            nextIndex = index + 1
        }
        var out: [UInt8] = []
        out.reserveCapacity(40 + payload.count)
        appendBigEndian(encodingCookie, to: &out)
        appendBigEndian(UInt32(payload.count), to: &out)
        appendBigEndian(UInt32(0), to: &out)
        appendBigEndian(UInt32(significantDigits), to: &out)
        appendBigEndian(lowestDiscernibleValue, to: &out)
        appendBigEndian(highestTrackableValue, to: &out)
        appendBigEndian((1.0 as Double).bitPattern, to: &out)
        out.append(contentsOf: payload)
        return out
    }

    /// The compressed V2 encoding of counts (see `encode(counts:…)`).
    public static func encodeCompressed(
        counts: UnsafeBufferPointer<UInt64>, first: Int, lowestDiscernibleValue: UInt64,
        highestTrackableValue: UInt64, significantDigits: Int
    ) -> [UInt8] {
        compress(
            encode(
                counts: counts, first: first, lowestDiscernibleValue: lowestDiscernibleValue,
                highestTrackableValue: highestTrackableValue, significantDigits: significantDigits))
    }

    static func compress(_ uncompressed: [UInt8]) -> [UInt8] {
        let compressed = Zlib.compress(uncompressed)
        var out: [UInt8] = []
        out.reserveCapacity(8 + compressed.count)
        appendBigEndian(compressedCookie, to: &out)
        appendBigEndian(UInt32(compressed.count), to: &out)
        out.append(contentsOf: compressed)
        return out
    }

    /// The uncompressed V2 encoding.
    public static func encode(_ h: Histogram<UInt64>) -> [UInt8] {
        let layout = Layout(lowestDiscernibleValue: h.lowestDiscernibleValue, significantDigits: digits(h))
        var counts: [UInt64] = []
        var first = 0
        if h.totalCount > 0 {
            first = layout.index(of: h.min)
            let last = layout.index(of: h.maxRecorded)
            counts = (first...last).map { h.countForValue(layout.value(at: $0)) }
        }
        // The library tracks min and max on every record and add; should they ever disagree with the
        // counts, walk every recorded value instead.
        if counts.reduce(0, &+) != h.totalCount {
            var byIndex: [Int: UInt64] = [:]
            for bucket in h.recordedValues() where bucket.count > 0 {
                byIndex[layout.index(of: bucket.value), default: 0] += UInt64(bucket.count)
            }
            first = byIndex.keys.min() ?? 0
            let last = byIndex.keys.max() ?? 0
            counts = byIndex.isEmpty ? [] : (first...last).map { byIndex[$0] ?? 0 }
        }
        return counts.withUnsafeBufferPointer {
            encode(
                counts: $0, first: first, lowestDiscernibleValue: h.lowestDiscernibleValue,
                highestTrackableValue: h.highestTrackableValue, significantDigits: digits(h))
        }
    }

    /// The compressed V2 encoding (what histogram logs carry, in base64).
    public static func encodeCompressed(_ h: Histogram<UInt64>) -> [UInt8] {
        compress(encode(h))
    }

    /// Decodes a compressed or uncompressed V2 encoding into its parameters and counts.
    public static func decodeCounts(_ bytes: [UInt8]) throws(DecodeError) -> Counts {
        guard bytes.count >= 8 else { throw DecodeError(description: "too short for a histogram encoding") }
        let cookie = readBigEndian(bytes, 0, as: UInt32.self)
        if cookie == compressedCookie {
            let length = Int(readBigEndian(bytes, 4, as: UInt32.self))
            guard bytes.count >= 8 + length else { throw DecodeError(description: "truncated compressed histogram") }
            let inflated: [UInt8]
            do {
                inflated = try Zlib.decompress(Array(bytes[8..<(8 + length)]))
            } catch {
                throw DecodeError(description: "bad zlib stream: \(error)")
            }
            return try decodeCounts(inflated)
        }
        guard cookie == encodingCookie else {
            throw DecodeError(description: "unknown cookie 0x\(String(cookie, radix: 16)) (expected a V2 encoding)")
        }
        guard bytes.count >= 40 else { throw DecodeError(description: "truncated histogram header") }
        let payloadLength = Int(readBigEndian(bytes, 4, as: UInt32.self))
        let digitCount = Int(readBigEndian(bytes, 12, as: UInt32.self))
        let lowest = readBigEndian(bytes, 16, as: UInt64.self)
        let highest = readBigEndian(bytes, 24, as: UInt64.self)
        guard (0...5).contains(digitCount), lowest >= 1, highest >= 2 * lowest, bytes.count >= 40 + payloadLength
        else { throw DecodeError(description: "bad histogram header") }
        let layout = Layout(lowestDiscernibleValue: lowest, significantDigits: digitCount)
        let length = layout.countsLength(highestTrackableValue: highest)
        var offset = 40
        let end = 40 + payloadLength
        var index = 0
        var first = -1
        var counts: [UInt64] = []
        while offset < end {
            let value = try readZigZag(bytes, &offset, end)
            if value < 0 {
                guard value > -Int64(length) else { throw DecodeError(description: "zero run beyond the counts") }
                index += Int(-value)
            } else {
                if value > 0 {
                    guard index < length else {
                        throw DecodeError(description: "a count at index \(index), beyond the \(length) of the layout")
                    }
                    if first < 0 { first = index }
                    let k = index - first
                    if counts.count < k { counts.append(contentsOf: repeatElement(0, count: k - counts.count)) }
                    counts.append(UInt64(value))
                }
                index += 1
            }
        }
        return Counts(
            lowestDiscernibleValue: lowest, highestTrackableValue: highest, significantDigits: digitCount,
            first: max(first, 0), counts: counts)
    }

    /// Decodes a compressed or uncompressed V2 encoding.
    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> Histogram<UInt64> {
        let c = try decodeCounts(bytes)
        guard let significant = SignificantDigits(rawValue: Int8(clamping: c.significantDigits)) else {
            throw DecodeError(description: "bad histogram header")
        }
        var h = Histogram<UInt64>(
            lowestDiscernibleValue: c.lowestDiscernibleValue, highestTrackableValue: c.highestTrackableValue,
            numberOfSignificantValueDigits: significant)
        let layout = Layout(lowestDiscernibleValue: c.lowestDiscernibleValue, significantDigits: c.significantDigits)
        for (k, count) in c.counts.enumerated() where count > 0 {
            _ = h.record(layout.value(at: c.first + k), count: count)
        }
        return h
    }

    // MARK: Bytes

    static func appendZigZag(_ value: Int64, to out: inout [UInt8]) {
        var v = UInt64(bitPattern: (value << 1) ^ (value >> 63))
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    static func readZigZag(_ bytes: [UInt8], _ offset: inout Int, _ end: Int) throws(DecodeError) -> Int64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard offset < end, shift < 64 else { throw DecodeError(description: "bad LEB128 count") }
            let byte = bytes[offset]
            offset += 1
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { break }
            shift += 7
        }
        return Int64(bitPattern: result >> 1) ^ -Int64(bitPattern: result & 1)
    }

    static func appendBigEndian<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }

    static func readBigEndian<T: FixedWidthInteger>(_ bytes: [UInt8], _ offset: Int, as: T.Type) -> T {
        var value: T = 0
        for k in 0..<MemoryLayout<T>.size { value = value << 8 | T(bytes[offset + k]) }
        return value
    }
}
