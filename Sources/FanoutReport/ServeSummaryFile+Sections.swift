import FanoutCore
import FanoutMetrics
import Foundation

/// summary.json's `trigger` (`fanout serve --trigger`) read back: what the trigger sent and how it ended.
public struct ServeTriggerSummary: Sendable, Equatable {
    public var url: String
    public var sent: Int
    /// Answers by HTTP status; requests that got no answer in time; failures by libcurl's message.
    public var byStatus: [Int: Int]
    public var successes: Int
    public var timeouts: Int
    public var errors: [String: Int]
    public var cancelledAtShutdown: Int
    public var unsentAtShutdown: Int
    public var waitedForSlot: Int
    public var identityHolds: Bool
    /// From each event's intended time to its answer, and to its request's start.
    public var response: LatencySummary
    public var scheduleLag: LatencySummary
}

/// summary.json's `registration` (`fanout serve --register`) read back.
public struct ServeRegistrationSummary: Sendable, Equatable {
    public var url: String
    public var activities: Int
    public var registered: Int
    public var failed: Int
    public var unregisteredAtDeadline: Int
    public var requests: Int
    public var retries: Int
    public var timeouts: Int
    public var byStatus: [Int: Int]
    public var errors: [String: Int]
    public var identityHolds: Bool
}

/// summary.json's `events` (`fanout serve --expect-events`) read back: the judge's counts (docs/INGEST.md §5),
/// the missing pairs by reason, whether the identities held, endToEnd and fan-out completion by size.
public struct ServeEventsSummary: Sendable, Equatable {
    /// The judge's counts, as summary.json names them (each read, none defaulted).
    public static let countNames = [
        "events", "dueEvents", "sharedTimestamps", "correlated", "uncorrelated", "delivered", "duplicate",
        "reordered", "notApplied", "early", "expected", "superseded", "missing", "staleAtEnd", "completeEvents",
        "incompleteEvents", "eventsWithMissing",
    ]
    /// Counts of folders written since fanout judged them, read when present (a folder from before has none, so a
    /// comparison with it judges the current run's against 0; a plan step, written now, must have them).
    /// `sentToUnregistered` only with tokens rotating while serving, `sentAfterAppEvent` only with app events (a run
    /// without has no such count, 0 compared).
    public static let laterCountNames = [
        "wrongContent", "wrongKind", "wrongShownAtEnd", "sentToUnregistered", "sentAfterAppEvent",
        "kickoffNotStarted", "kickoffNotRegistered",
    ]
    public var counts: [String: Int]
    public var missingByReason: [String: Int]
    public var identityHolds: Bool
    public var endToEnd: LatencySummary
    /// By `Metric.completionMetrics` name (`fanoutCompletion`, `fanoutCompletion.1`, …).
    public var fanoutCompletion: [String: LatencySummary]

    /// A count of `countNames` (nil: not one of them).
    public subscript(_ name: String) -> Int? { counts[name] }
    public var expected: Int { counts["expected", default: 0] }
    public var delivered: Int { counts["delivered", default: 0] }
    public var superseded: Int { counts["superseded", default: 0] }
    public var early: Int { counts["early", default: 0] }
}

extension ServeSummaryFile {
    static func trigger(_ t: Fields) throws(ReportReadError) -> ServeTriggerSummary {
        ServeTriggerSummary(
            url: try t.string("url"), sent: try t.int("sent"), byStatus: try t.statusCounts("byStatus"),
            successes: try t.int("successes"), timeouts: try t.int("timeouts"), errors: try t.counts("errors"),
            cancelledAtShutdown: try t.int("cancelledAtShutdown"), unsentAtShutdown: try t.int("unsentAtShutdown"),
            waitedForSlot: try t.int("waitedForSlot"), identityHolds: try t.bool("identityHolds"),
            response: try t.percentiles("response"), scheduleLag: try t.percentiles("scheduleLag"))
    }

    static func registration(_ g: Fields) throws(ReportReadError) -> ServeRegistrationSummary {
        ServeRegistrationSummary(
            url: try g.string("url"), activities: try g.int("activities"), registered: try g.int("registered"),
            failed: try g.int("failed"), unregisteredAtDeadline: try g.int("unregisteredAtDeadline"),
            requests: try g.int("requests"), retries: try g.int("retries"), timeouts: try g.int("timeouts"),
            byStatus: try g.statusCounts("byStatus"), errors: try g.counts("errors"),
            identityHolds: try g.bool("identityHolds"))
    }

    static func events(_ e: Fields) throws(ReportReadError) -> ServeEventsSummary {
        var counts: [String: Int] = [:]
        for name in ServeEventsSummary.countNames { counts[name] = try e.int(name) }
        for name in ServeEventsSummary.laterCountNames { counts[name] = try e.optionalInt(name) }
        let completion = try e.object("fanoutCompletion")
        var bySize: [String: LatencySummary] = [:]
        for m in Metric.completionMetrics { bySize[m.name] = try completion.percentiles(m.name) }
        return ServeEventsSummary(
            counts: counts, missingByReason: try e.counts("missingByReason"),
            identityHolds: try e.object("identity").bool("holds"), endToEnd: try e.percentiles("endToEnd"),
            fanoutCompletion: bySize)
    }
}

/// What summary.json's sections hold besides numbers and texts: flags, counts by name, percentiles, histograms.
extension Fields {
    func bool(_ key: String) throws(ReportReadError) -> Bool {
        let p = path.isEmpty ? key : path + "." + key
        // JSON true/false come back as NSNumber of Objective-C type "c" (a number is "q" or "d").
        guard let n = (value as? [String: Any])?[key] as? NSNumber, String(cString: n.objCType) == "c" else {
            throw ReportReadError(file: file, "field \(p): expected true or false")
        }
        return n.boolValue
    }

    /// An object of whole numbers (`byStatus`, `endReasons`, …), every value read.
    func counts(_ key: String) throws(ReportReadError) -> [String: Int] {
        let o = try object(key)
        var out: [String: Int] = [:]
        for k in (o.value as? [String: Any] ?? [:]).keys { out[k] = try o.int(k) }
        return out
    }

    /// Counts by HTTP status (`"200": 12`): every key a status.
    func statusCounts(_ key: String) throws(ReportReadError) -> [Int: Int] {
        var out: [Int: Int] = [:]
        for (k, n) in try counts(key) {
            guard let status = Int(k) else {
                throw ReportReadError(file: file, "field \(path.isEmpty ? key : path + "." + key).\(k): not a status")
            }
            out[status] = n
        }
        return out
    }

    /// A percentile object as `SummaryObjectWriter.percentiles` writes it in serve's and push's summary.json
    /// (`count`, `meanNanos`, `p50Nanos`, …).
    func percentiles(_ key: String) throws(ReportReadError) -> LatencySummary {
        let m = try object(key)
        let max = UInt64(try m.int("maxNanos"))
        return LatencySummary(
            count: UInt64(try m.int("count")), mean: try m.double("meanNanos"), p50: UInt64(try m.int("p50Nanos")),
            p90: UInt64(try m.int("p90Nanos")), p99: UInt64(try m.int("p99Nanos")),
            p999: UInt64(try m.int("p999Nanos")),
            // Folders written before p99.99 was: the maximum bounds it.
            p9999: UInt64(try m.optionalInt("p9999Nanos") ?? Int(max)), max: max)
    }

    /// A percentile object's exact histogram (`histogram`: HdrHistogram V2 compressed, base64), written with the
    /// distributions latency.hlog does not hold (`faults.heldFor`, `faults.retries.delay`) when they have samples.
    /// nil when the object has samples and no histogram (a folder written before it was): its percentiles alone
    /// cannot be added exactly.
    func exactHistogram(_ key: String) throws(ReportReadError) -> LatencyHistogram? {
        let m = try object(key)
        let count = try m.int("count")
        guard let text = try m.optionalString("histogram") else { return count == 0 ? LatencyHistogram() : nil }
        guard let data = Data(base64Encoded: text), let h = try? LatencyHistogram(decoding: [UInt8](data)),
            h.totalCount == UInt64(count)
        else {
            throw ReportReadError(
                file: file, "field \(m.path).histogram: expected the base64 of a histogram of \(count) samples")
        }
        return h
    }
}
