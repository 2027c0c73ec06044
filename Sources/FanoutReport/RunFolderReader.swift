import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import Foundation

/// A file of a run folder that cannot be read: names the file and the field or line.
public struct ReportReadError: Error, CustomStringConvertible, Equatable {
    public var file: String
    public var message: String
    /// Set when `fanout merge` refuses the set of folders it was given (its own exit status).
    public var refusal: MergeRefusal?
    public var description: String { "\(file): \(message)" }

    public init(file: String, _ message: String, refusal: MergeRefusal? = nil) {
        self.file = file
        self.message = message
        self.refusal = refusal
    }

    /// `fanout merge`'s refusal of a folder whose `what` (its scenario, seed, configuration…) is `value` where the
    /// first folder's is `firstValue`: the folders are not shards of one `run` ("run", "push run", "serve run").
    static func notOneRun(
        _ folder: String, _ what: String, _ value: String, first firstFolder: String, _ firstValue: String,
        run: String
    ) -> ReportReadError {
        ReportReadError(
            file: folder, "\(what) \(value) differs from \(firstFolder)'s \(firstValue): not shards of one \(run)",
            refusal: .notOneRun)
    }
}

/// Why `fanout merge` refuses a set of folders, each with its exit status (1 stays for unreadable folders).
public enum MergeRefusal: Sendable, Equatable {
    /// A shard missing or given twice, shards of different N, or a folder that is not a shard: exit 5.
    case shardSet
    /// Folders that are not shards of one run: another scenario, seed, configuration (rates, devices, duration)
    /// or clock, or `fanout run` and `fanout push` folders mixed: exit 6.
    case notOneRun

    public var exitCode: Int32 {
        switch self {
        case .shardSet: 5
        case .notOneRun: 6
        }
    }
}

/// `summary.json` read back: the run's description, its counts and its percentiles.
public struct SummaryFile: Sendable {
    public var path: String
    public var info: RunInfo
    public var accounting: Accounting
    public var activities: Int
    public var events: Int
    public var latency: [Metric: LatencySummary]
    public var peakResidentBytes: Int
    public var baselineResidentBytes: Int
    public var intervalSeconds: Double?
    public var deliveriesPerSecond: Double
    public var resources: [ResourceSample] = []
    public var measurement = MeasurementInfo()

    /// Reads `path`: a `summary.json` or a run folder holding one.
    public static func read(_ path: String) throws(ReportReadError) -> SummaryFile {
        let (file, object) = try load(path)
        if (object as? [String: Any])?["kind"] as? String == "serve" {
            throw ReportReadError(file: file, "a fanout serve run's summary (read it with AnySummaryFile)")
        }
        return try parse(Fields(file: file, path: "", value: object), file: file)
    }

    /// The file a path names (a summary.json or a folder holding one) and its JSON.
    static func load(_ path: String) throws(ReportReadError) -> (file: String, object: Any) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ReportReadError(file: path, "no such file or folder")
        }
        let file = isDirectory.boolValue ? (path as NSString).appendingPathComponent("summary.json") : path
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ReportReadError(file: file, "cannot read the file (a run folder holds summary.json)")
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
            throw ReportReadError(file: file, "not valid JSON" + (detail.map { " (\($0))" } ?? ""))
        }
        return (file, object)
    }

    static func parse(_ root: Fields, file: String) throws(ReportReadError) -> SummaryFile {
        let schema = try root.int("schema")
        guard schema == 1 else { throw ReportReadError(file: file, "field schema: expected 1, got \(schema)") }
        let run = try root.object("run")
        let machine = try run.object("machine")
        let info = RunInfo(
            tool: try run.string("tool"), version: try run.string("version"),
            gitRevision: try run.string("gitRevision"),
            scenario: try run.string("scenario"), seed: UInt64(try run.int("seed")),
            configHash: try run.string("configHash"), clock: try run.string("clock"), workers: try run.int("workers"),
            durationSeconds: try run.double("durationSeconds"), wallSeconds: try run.double("wallSeconds"),
            startedAtSeconds: try run.date("startedAt"),
            machine: MachineInfo(
                cores: try machine.int("cores"), cpu: try machine.string("cpu"),
                os: try machine.string("os")),
            timerOverheadNanos: try run.double("timerOverheadNanos"), stageSampleEvery: try run.int("stageSampleEvery"),
            shard: try run.optionalString("shard"), shards: try run.optionalInt("shards") ?? 1)
        let counts = try root.object("counts")
        var a = Accounting()
        a.pushes = try counts.int("pushes")
        let rejected = try counts.object("rejected")
        for r in RejectReason.allCases { a.rejected[r.rawValue] = try rejected.int(r.name) }
        let unroutable = try counts.object("unroutable")
        for r in UnroutableReason.allCases { a.unroutable[r.rawValue] = try unroutable.int(r.name) }
        a.routed = try counts.int("routed")
        a.deliveries = try counts.int("deliveries")
        let outcomes = try counts.object("outcomes")
        for o in Outcome.allCases { a.outcomes[o.rawValue] = try outcomes.int(o.name) }
        a.requests = try counts.int("requests")
        a.requestsLimitExceeded = try counts.int("requestsLimitExceeded")
        let latencyObject = try root.object("latency")
        var latency: [Metric: LatencySummary] = [:]
        for metric in Metric.allCases {
            guard let m = try latencyObject.optionalObject(metric.name) else { continue }
            let unit = try m.string("unit")
            guard unit == "ns" else {
                throw ReportReadError(file: file, "field \(m.path).unit: expected \"ns\", got \"\(unit)\"")
            }
            latency[metric] = LatencySummary(
                count: UInt64(try m.int("count")), mean: try m.double("mean"), p50: UInt64(try m.int("p50")),
                p90: UInt64(try m.int("p90")), p99: UInt64(try m.int("p99")), p999: UInt64(try m.int("p999")),
                p9999: UInt64(try m.int("p9999")), max: UInt64(try m.int("max")))
        }
        let memory = try root.object("memory")
        let throughput = try root.object("throughput")
        var resources: [ResourceSample] = []
        if let r = try root.optionalObject("resources") {
            guard let rows = (r.value as? [String: Any])?["samples"] as? [[Any]] else {
                throw ReportReadError(file: file, "field resources.samples: expected a list of [seconds, bytes, fds]")
            }
            for (n, row) in rows.enumerated() {
                let cells = row.compactMap { $0 as? NSNumber }
                guard cells.count == 3, row.count == 3 else {
                    throw ReportReadError(file: file, "field resources.samples[\(n)]: expected [seconds, bytes, fds]")
                }
                resources.append(
                    ResourceSample(
                        elapsedSeconds: cells[0].doubleValue, residentBytes: cells[1].intValue,
                        openFileDescriptors: cells[2].intValue))
            }
        }
        var summary = SummaryFile(
            path: file, info: info, accounting: a, activities: try counts.int("activities"),
            events: try counts.int("events"), latency: latency,
            peakResidentBytes: try memory.int("peakResidentBytes"),
            baselineResidentBytes: try memory.int("baselineResidentBytes"),
            intervalSeconds: try root.optionalDouble("intervalSeconds"),
            deliveriesPerSecond: try throughput.double("deliveriesPerSecond"))
        summary.resources = resources
        if let m = try root.optionalObject("measurement") {
            summary.measurement.sampling = try m.string("sampling")
            summary.measurement.clockReads = try m.int("clockReads")
            summary.measurement.clampedSamples = UInt64(try m.int("clampedSamples"))
            summary.measurement.eventsSkipped = try m.int("eventsSkipped")
            if let model = (m.value as? [String: Any])?["costModel"] as? [String: Any] {
                let fields = model.keys.sorted().map { "\"\($0)\": \(model[$0]!)" }
                summary.measurement.costModel = "{" + fields.joined(separator: ", ") + "}"
            }
        }
        return summary
    }
}

/// A run folder read back whole: `summary.json` plus the histograms of `latency.hlog` (the totals
/// are the sum of its intervals) and, for a shard, `completion.tsv`.
public enum RunFolderReader {
    public static func read(_ folder: String) throws(ReportReadError) -> RunReport {
        let summary = try SummaryFile.read(folder)
        let logPath = (folder as NSString).appendingPathComponent("latency.hlog")
        guard let data = FileManager.default.contents(atPath: logPath) else {
            throw ReportReadError(file: logPath, "cannot read the file")
        }
        let parsed: [HistogramLogReader.Interval]
        do {
            parsed = try HistogramLogReader.read(String(decoding: data, as: UTF8.self))
        } catch {
            throw ReportReadError(file: logPath, "\(error)")
        }
        var recorder = LatencyRecorder()
        var intervals: [MergedInterval] = []
        let byFileName = Dictionary(uniqueKeysWithValues: Metric.allCases.map { ($0.fileName, $0) })
        var intervalSeconds = summary.intervalSeconds ?? 0
        for (n, interval) in parsed.enumerated() {
            guard let tag = interval.tag, let metric = byFileName[tag] else {
                throw ReportReadError(file: logPath, "interval \(n + 1): unknown tag \(interval.tag ?? "(none)")")
            }
            if intervalSeconds <= 0 { intervalSeconds = interval.lengthSeconds }
            let index = Int((interval.startSeconds / max(intervalSeconds, 1e-9)).rounded())
            guard let h = LatencyLogFile.histogram(interval) else {
                let c = interval.counts
                throw ReportReadError(
                    file: logPath,
                    "interval \(n + 1): a histogram of lowest value \(c.lowestDiscernibleValue) and "
                        + "\(c.significantDigits) digits (fanout writes 1 and 3, at most one hour)")
            }
            recorder.add(metric, h)
            intervals.append(MergedInterval(index: index, metric: metric, histogram: h))
        }
        for metric in Metric.allCases {
            let expected = summary.latency[metric]?.count ?? 0
            guard recorder[metric].totalCount == expected else {
                throw ReportReadError(
                    file: logPath,
                    "\(metric.name): the intervals hold \(recorder[metric].totalCount) values, summary.json says \(expected)"
                )
            }
        }
        let completionPath = (folder as NSString).appendingPathComponent(CompletionFile.name)
        var completion: EventCompletions?
        if let data = FileManager.default.contents(atPath: completionPath) {
            completion = try CompletionFile.parse(String(decoding: data, as: UTF8.self), file: completionPath)
        }
        var report = RunReport(
            info: summary.info, accounting: summary.accounting, activities: summary.activities, events: summary.events,
            recorder: recorder, intervals: intervals,
            intervalNanos: UInt64((max(intervalSeconds, 0.001) * 1e9).rounded()),
            peakResidentBytes: summary.peakResidentBytes, baselineResidentBytes: summary.baselineResidentBytes,
            completion: completion)
        report.resources = summary.resources
        report.measurement = summary.measurement
        return report
    }
}

/// `completion.tsv` of a shard's run folder: per source event, its intended time, when its last
/// recipient in the shard was applied and how many recipients it had there (nanoseconds from the
/// run start). `fanout merge` takes the latest completion across shards.
public enum CompletionFile {
    public static let name = "completion.tsv"
    static let header = "event\tintendedNanos\tlastAppliedNanos\trecipients"

    public static func text(_ c: EventCompletions) -> String {
        var out = "# fanout shard completion, one line per source event\n" + header + "\n"
        out.reserveCapacity(c.count * 24)
        for e in 0..<c.count {
            out += "\(e)\t\(c.intendedNanos[e])\t\(c.lastNanos[e])\t\(c.recipients[e])\n"
        }
        return out
    }

    public static func parse(_ text: String, file: String) throws(ReportReadError) -> EventCompletions {
        var c = EventCompletions()
        for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.isEmpty || line.hasPrefix("#") || line == header { continue }
            let f = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard f.count == 4, let e = Int(f[0]), let intended = UInt64(f[1]), let last = UInt64(f[2]),
                let recipients = Int32(f[3])
            else {
                throw ReportReadError(
                    file: file, "line \(n + 1): expected event, intendedNanos, lastAppliedNanos, recipients")
            }
            guard e == c.count else {
                throw ReportReadError(file: file, "line \(n + 1): field event: expected \(c.count), got \(e)")
            }
            c.intendedNanos.append(intended)
            c.lastNanos.append(last)
            c.recipients.append(recipients)
        }
        return c
    }
}

/// Typed access to a parsed JSON object, with errors naming the file and the field.
struct Fields {
    let file: String
    let path: String
    let value: Any

    private func child(_ key: String) -> (String, Any?) {
        let p = path.isEmpty ? key : path + "." + key
        return (p, (value as? [String: Any])?[key])
    }

    private func fail(_ p: String, _ expected: String) -> ReportReadError {
        ReportReadError(file: file, "field \(p): expected \(expected)")
    }

    func object(_ key: String) throws(ReportReadError) -> Fields {
        let (p, v) = child(key)
        guard let v, v is [String: Any] else { throw fail(p, "an object") }
        return Fields(file: file, path: p, value: v)
    }

    func optionalObject(_ key: String) throws(ReportReadError) -> Fields? {
        let (p, v) = child(key)
        guard let v, !(v is NSNull) else { return nil }
        guard v is [String: Any] else { throw fail(p, "an object") }
        return Fields(file: file, path: p, value: v)
    }

    func string(_ key: String) throws(ReportReadError) -> String {
        let (p, v) = child(key)
        guard let s = v as? String else { throw fail(p, "a string") }
        return s
    }

    func optionalString(_ key: String) throws(ReportReadError) -> String? {
        let (p, v) = child(key)
        guard let v, !(v is NSNull) else { return nil }
        guard let s = v as? String else { throw fail(p, "a string or null") }
        return s
    }

    func number(_ v: Any?) -> NSNumber? {
        // JSON true/false come back as NSNumber too, of Objective-C type "c" (a number is "q" or "d").
        guard let n = v as? NSNumber, String(cString: n.objCType) != "c" else { return nil }
        return n
    }

    func int(_ key: String) throws(ReportReadError) -> Int {
        let (p, v) = child(key)
        guard let n = number(v) else { throw fail(p, "a whole number") }
        if let i = Int(n.stringValue) { return i }
        let d = n.doubleValue
        guard d.isFinite, d == d.rounded(), abs(d) < 9e15 else { throw fail(p, "a whole number") }
        return Int(d)
    }

    func optionalInt(_ key: String) throws(ReportReadError) -> Int? {
        let (_, v) = child(key)
        guard let v, !(v is NSNull) else { return nil }
        return try int(key)
    }

    func double(_ key: String) throws(ReportReadError) -> Double {
        let (p, v) = child(key)
        guard let n = number(v), n.doubleValue.isFinite else { throw fail(p, "a number") }
        return n.doubleValue
    }

    func optionalDouble(_ key: String) throws(ReportReadError) -> Double? {
        let (_, v) = child(key)
        guard let v, !(v is NSNull) else { return nil }
        return try double(key)
    }

    func date(_ key: String) throws(ReportReadError) -> Double {
        let text = try string(key)
        guard let seconds = RunInfo.isoSeconds(text) else {
            throw fail(path.isEmpty ? key : path + "." + key, "an ISO 8601 time")
        }
        return seconds
    }
}
