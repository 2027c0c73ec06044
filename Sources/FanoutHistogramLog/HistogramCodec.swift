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

    /// The uncompressed V2 encoding.
    public static func encode(_ h: Histogram<UInt64>) -> [UInt8] {
        let layout = Layout(lowestDiscernibleValue: h.lowestDiscernibleValue, significantDigits: digits(h))
        var payload: [UInt8] = []
        var nextIndex = 0
        // Only the indices between the smallest and the largest recorded value, one count read each
        // (the library's recordedValues() iterator costs far more per index than the lookup).
        var encoded: UInt64 = 0
        if h.totalCount > 0 {
            let last = layout.index(of: h.maxRecorded)
            var index = layout.index(of: h.min)
            while index <= last {
                let count = h.countForValue(layout.value(at: index))
                if count > 0 {
                    if index > nextIndex { appendZigZag(-Int64(index - nextIndex), to: &payload) }
                    appendZigZag(Int64(count), to: &payload)
                    nextIndex = index + 1
                    encoded &+= count
                }
                index += 1
            }
        }
        // The library tracks min and max on every record and add; should they ever disagree with the
        // counts, walk every recorded value instead.
        if encoded != h.totalCount {
            payload.removeAll()
            nextIndex = 0
            for bucket in h.recordedValues() where bucket.count > 0 {
                let index = layout.index(of: bucket.value)
                if index > nextIndex { appendZigZag(-Int64(index - nextIndex), to: &payload) }
                appendZigZag(Int64(bucket.count), to: &payload)
                nextIndex = index + 1
            }
        }
        var out: [UInt8] = []
        appendBigEndian(encodingCookie, to: &out)
        appendBigEndian(UInt32(payload.count), to: &out)
        appendBigEndian(UInt32(0), to: &out)
        appendBigEndian(UInt32(digits(h)), to: &out)
        appendBigEndian(h.lowestDiscernibleValue, to: &out)
        appendBigEndian(h.highestTrackableValue, to: &out)
        appendBigEndian((1.0 as Double).bitPattern, to: &out)
        out.append(contentsOf: payload)
        return out
    }

    /// The compressed V2 encoding (what histogram logs carry, in base64).
    public static func encodeCompressed(_ h: Histogram<UInt64>) -> [UInt8] {
        let compressed = Zlib.compress(encode(h))
        var out: [UInt8] = []
        appendBigEndian(compressedCookie, to: &out)
        appendBigEndian(UInt32(compressed.count), to: &out)
        out.append(contentsOf: compressed)
        return out
    }

    /// Decodes a compressed or uncompressed V2 encoding.
    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> Histogram<UInt64> {
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
            return try decode(inflated)
        }
        guard cookie == encodingCookie else {
            throw DecodeError(description: "unknown cookie 0x\(String(cookie, radix: 16)) (expected a V2 encoding)")
        }
        guard bytes.count >= 40 else { throw DecodeError(description: "truncated histogram header") }
        let payloadLength = Int(readBigEndian(bytes, 4, as: UInt32.self))
        let digitCount = Int(readBigEndian(bytes, 12, as: UInt32.self))
        let lowest = readBigEndian(bytes, 16, as: UInt64.self)
        let highest = readBigEndian(bytes, 24, as: UInt64.self)
        guard let significant = SignificantDigits(rawValue: Int8(clamping: digitCount)), lowest >= 1,
            highest >= 2 * lowest, bytes.count >= 40 + payloadLength
        else { throw DecodeError(description: "bad histogram header") }
        var h = Histogram<UInt64>(
            lowestDiscernibleValue: lowest, highestTrackableValue: highest, numberOfSignificantValueDigits: significant)
        let layout = Layout(lowestDiscernibleValue: lowest, significantDigits: digitCount)
        var offset = 40
        let end = 40 + payloadLength
        var index = 0
        while offset < end {
            let value = try readZigZag(bytes, &offset, end)
            if value < 0 {
                index += Int(-value)
            } else {
                if value > 0 { _ = h.record(layout.value(at: index), count: UInt64(value)) }
                index += 1
            }
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
