import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import Foundation

/// A `fanout serve` run folder read back whole, the one reader of it (`fanout merge`, `fanout plan --trigger`;
/// `fanout compare` reads its summary.json through `ServeSummaryFile`): summary.json as typed values (every count
/// serve writes: requests by status and reason, accounting, connections, findings, faults; trigger, registration
/// and the judged events), and latency.hlog's histograms (the totals are the sum of the intervals, checked against
/// summary.json's counts). A missing or mistyped field is an error naming the file and the key path, never a zero.
public struct ServeFolder: Sendable {
    public var folder: String
    /// What `fanout compare` reads (counts by name, percentiles, trigger, registration, events).
    public var summary: ServeSummaryFile
    /// summary.json as the values serve rendered it from: `info`, `stats`, `accounting`, `connections`, `bytes`,
    /// `elapsedSeconds`; `latency` and `intervals` from latency.hlog. Trigger, registration and events are in
    /// `summary` (their histograms are not in the folder).
    public var results: ServeResults
    /// Every interval of latency.hlog, in the file's order.
    public var intervals: [Interval] = []
    /// Distributions summary.json holds as percentiles without their histogram (written before it did), by key
    /// path: they cannot be added exactly.
    public var withoutHistogram: [String] = []
    public var hasState = false

    public struct Interval: Sendable {
        public var metric: ServeMetric
        public var startSeconds: Double
        public var lengthSeconds: Double
        public var histogram: LatencyHistogram
    }

    /// Whether `folder` holds the summary.json of `fanout serve`.
    public static func isServe(_ folder: String) -> Bool {
        guard let (_, object) = try? SummaryFile.load(folder) else { return false }
        return (object as? [String: Any])?["kind"] as? String == "serve"
    }

    public static func read(_ folder: String) throws(ReportReadError) -> ServeFolder {
        let (file, object) = try SummaryFile.load(folder)
        guard (object as? [String: Any])?["kind"] as? String == "serve" else {
            throw ReportReadError(file: file, "not the summary of a fanout serve run (no \"kind\": \"serve\")")
        }
        let root = Fields(file: file, path: "", value: object)
        let summary = try ServeSummaryFile.parse(root, file: file)
        var withoutHistogram: [String] = []
        let results = try parseResults(root, summary, withoutHistogram: &withoutHistogram)
        var f = ServeFolder(folder: folder, summary: summary, results: results, withoutHistogram: withoutHistogram)
        try f.readLog()
        f.hasState = FileManager.default.fileExists(atPath: (folder as NSString).appendingPathComponent("state.jsonl"))
        return f
    }

    /// latency.hlog: StartTime, every interval (a tag of `ServeMetric`, fanout's histogram layout), the totals
    /// equal to summary.json's counts.
    mutating func readLog() throws(ReportReadError) {
        let (log, text, parsed) = try LatencyLogFile.read(folder, kind: "serve")
        for line in text.split(separator: "\n", maxSplits: 8) where line.hasPrefix("#[StartTime: ") {
            let value = line.dropFirst("#[StartTime: ".count).prefix { $0 != " " && $0 != "]" }
            guard let seconds = Double(value) else { throw ReportReadError(file: log, "StartTime: not a number") }
            results.info.startedAtSeconds = seconds
        }
        var totals = LatencyRecorder.serve()
        for (n, interval) in parsed.enumerated() {
            guard let tag = interval.tag, let metric = ServeMetric.allCases.first(where: { $0.name == tag }) else {
                throw ReportReadError(file: log, "interval \(n + 1): unknown tag \(interval.tag ?? "(none)")")
            }
            guard let h = LatencyLogFile.histogram(interval) else {
                throw ReportReadError(file: log, "interval \(n + 1): another histogram layout than fanout's")
            }
            totals.add(metricIndex: metric.rawValue, h)
            intervals.append(
                Interval(metric: metric, startSeconds: interval.startSeconds, lengthSeconds: interval.lengthSeconds,
                         histogram: h))
        }
        for metric in ServeMetric.allCases {
            let counted = summary.latency[metric.name]?.count ?? 0
            guard totals[serve: metric].totalCount == counted else {
                throw ReportReadError(
                    file: log,
                    "its \(metric.name) intervals hold \(totals[serve: metric].totalCount) samples, summary.json "
                        + "counts \(counted)")
            }
        }
        totals.clamped = results.latency.clamped
        results.latency = totals
        results.intervals = intervals.map { i in
            LoggedInterval(
                index: Int(i.startSeconds.rounded()), metricIndex: i.metric.rawValue,
                startNanos: UInt64((i.startSeconds * 1e9).rounded()),
                lengthNanos: UInt64((i.lengthSeconds * 1e9).rounded()),
                histogram: i.histogram)
        }
    }

    /// The histograms of the intervals that start at or after `seconds` (a plan step's measured part), by metric.
    public func window(from seconds: Double) -> LatencyRecorder {
        var out = LatencyRecorder.serve()
        for i in intervals where i.startSeconds + 1e-6 >= seconds {
            out.add(metricIndex: i.metric.rawValue, i.histogram)
        }
        return out
    }

    /// One event as the judge left it (events.jsonl's offset, events-judged.jsonl's counts).
    public struct JudgedEvent: Sendable, Equatable {
        public var event: Int
        public var offsetNanos: UInt64
        public var delivered: Int
        /// When its last follower applied it, from t0 (0: none did).
        public var lastAppliedNanos: UInt64
    }

    /// events-judged.jsonl, each event with its offset from events.jsonl (`--expect-events`).
    public func judgedEvents() throws(ReportReadError) -> [JudgedEvent] {
        var offsets: [UInt64] = []
        for line in try Self.lines((folder as NSString).appendingPathComponent("events.jsonl")) {
            offsets.append(UInt64(max(try line.int("offsetNanos"), 0)))
        }
        var out: [JudgedEvent] = []
        let judged = (folder as NSString).appendingPathComponent("events-judged.jsonl")
        for line in try Self.lines(judged) {
            let k = try line.int("event")
            guard k >= 0, k < offsets.count else {
                throw ReportReadError(file: judged, "\(line.path): event \(k) is not in events.jsonl")
            }
            out.append(
                JudgedEvent(
                    event: k, offsetNanos: offsets[k], delivered: try line.int("delivered"),
                    lastAppliedNanos: UInt64(max(try line.int("lastAppliedNanos"), 0))))
        }
        return out
    }

    /// A JSON-lines file, each line an object (its `Fields` path is `line N`).
    static func lines(_ path: String) throws(ReportReadError) -> [Fields] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ReportReadError(file: path, "cannot read the file")
        }
        var out: [Fields] = []
        for (k, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated()
        where !line.isEmpty {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else {
                throw ReportReadError(file: path, "line \(k + 1): not a JSON object")
            }
            out.append(Fields(file: path, path: "line \(k + 1)", value: object))
        }
        return out
    }
}
