import Foundation
import Histogram

/// The HdrHistogram interval log, format version 1.3 (as Java's `HistogramLogWriter` writes it and
/// HistogramLogProcessor, HistogramLogAnalyzer and HdrHistogram_py read it):
///
///     #[Histogram log format version 1.3]
///     #[StartTime: 1700000000.000 (seconds since epoch), 2023-11-14T22:13:20Z]
///     "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
///     Tag=endToEnd,0.000,1.000,12.345,HISTFAAA…
///
/// Interval start and length are seconds relative to StartTime; Interval_Max is the interval's
/// largest value divided by `maxValueUnitRatio` (1e6: nanoseconds shown as milliseconds, Java's
/// default); the last field is the base64 of the compressed V2 encoding.
public struct HistogramLogWriter {
    public private(set) var text = ""
    public let maxValueUnitRatio: Double

    public init(startTimeSeconds: Double, maxValueUnitRatio: Double = 1e6) {
        self.maxValueUnitRatio = maxValueUnitRatio
        let date = Date(timeIntervalSince1970: startTimeSeconds)
        text += "#[Histogram log format version 1.3]\n"
        text += String(
            format: "#[StartTime: %.3f (seconds since epoch), %@]\n", startTimeSeconds,
            ISO8601DateFormatter().string(from: date))
        text += "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n"
    }

    public mutating func append(tag: String, startSeconds: Double, lengthSeconds: Double, histogram: Histogram<UInt64>)
    {
        append(
            tag: tag, startSeconds: startSeconds, lengthSeconds: lengthSeconds,
            compressed: HistogramCodec.encodeCompressed(histogram),
            maxValue: histogram.totalCount == 0 ? 0 : histogram.max)
    }

    /// The text appended so far, removed from the writer (a long log written to a file a piece at a time).
    public mutating func takeText() -> String {
        defer { text = "" }
        return text
    }

    /// Appends an interval already in the compressed V2 encoding.
    public mutating func append(
        tag: String, startSeconds: Double, lengthSeconds: Double, compressed: [UInt8], maxValue: UInt64
    ) {
        let encoded = Data(compressed).base64EncodedString()
        let max = Double(maxValue) / maxValueUnitRatio
        text += String(format: "Tag=%@,%.3f,%.3f,%.3f,", tag, startSeconds, lengthSeconds, max) + encoded + "\n"
    }
}

/// Reads interval histograms back from a log (this project's own round trips and tools).
public enum HistogramLogReader {
    public struct Interval {
        public var tag: String?
        public var startSeconds: Double
        public var lengthSeconds: Double
        /// The interval's counts, decoded (and so checked) when the log was read.
        public var counts: HistogramCodec.Counts

        /// The interval as hdrhistogram-swift's histogram (tests and interop). The bytes are made from counts
        /// that decoded when the log was read, so they decode; a codec bug would throw, not trap.
        public func histogram() throws -> Histogram<UInt64> {
            let bytes = counts.counts.withUnsafeBufferPointer {
                HistogramCodec.encode(
                    counts: $0, first: counts.first, lowestDiscernibleValue: counts.lowestDiscernibleValue,
                    highestTrackableValue: counts.highestTrackableValue, significantDigits: counts.significantDigits)
            }
            return try HistogramCodec.decode(bytes)
        }
    }

    public struct ReadError: Error, CustomStringConvertible {
        public var line: Int
        public var message: String
        public var description: String { "line \(line): \(message)" }
    }

    public static func read(_ text: String) throws(ReadError) -> [Interval] {
        var intervals: [Interval] = []
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(rawLine)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix("\"StartTimestamp\"") { continue }
            var fields = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            var tag: String?
            if let first = fields.first, first.hasPrefix("Tag=") {
                tag = String(first.dropFirst(4))
                fields.removeFirst()
            }
            guard fields.count == 4, let start = Double(fields[0]), let length = Double(fields[1]),
                let data = Data(base64Encoded: fields[3])
            else { throw ReadError(line: number + 1, message: "expected Tag=…,start,length,max,base64") }
            do {
                intervals.append(
                    Interval(
                        tag: tag, startSeconds: start, lengthSeconds: length,
                        counts: try HistogramCodec.decodeCounts(Array(data))))
            } catch {
                throw ReadError(line: number + 1, message: "\(error)")
            }
        }
        return intervals
    }
}
