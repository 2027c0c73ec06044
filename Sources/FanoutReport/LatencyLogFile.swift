import FanoutHistogramLog
import FanoutMetrics
import Foundation

/// A folder's latency.hlog read back (serve's, push's and run's readers): the file's text and its intervals, and
/// each interval's histogram once it is known to be in fanout's layout.
enum LatencyLogFile {
    /// `folder`'s latency.hlog: its path, its text (StartTime is in its header) and its intervals. A file that cannot
    /// be read (a `kind` folder holds one) or parsed is the error, naming the file.
    static func read(
        _ folder: String, kind: String
    ) throws(ReportReadError) -> (path: String, text: String, intervals: [HistogramLogReader.Interval]) {
        let path = (folder as NSString).appendingPathComponent("latency.hlog")
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ReportReadError(file: path, "cannot read the file (a \(kind) folder holds latency.hlog)")
        }
        do {
            return (path, text, try HistogramLogReader.read(text))
        } catch {
            throw ReportReadError(file: path, "\(error)")
        }
    }

    /// The interval's histogram, or nil when it was written in another layout than fanout's (`HdrLayout`: its
    /// lowest value, its digits, at most one hour): each reader says so in its own words.
    static func histogram(_ interval: HistogramLogReader.Interval) -> LatencyHistogram? {
        let c = interval.counts
        guard c.lowestDiscernibleValue == HdrLayout.lowestDiscernibleValue,
            c.significantDigits == HdrLayout.significantDigits, c.first + c.counts.count <= HdrLayout.countsLength
        else { return nil }
        return c.counts.withUnsafeBufferPointer { LatencyHistogram(first: c.first, counts: $0) }
    }
}
