import FanoutCore
import FanoutMetrics
import Foundation

/// `summary.json` of a run folder (schema 1): written by `fanout run` and `fanout merge`, read by
/// `fanout compare` and `fanout merge`. Later changes add keys, never rename or remove them.
public enum SummaryJSON {
    public static func text(_ r: RunReport) -> String {
        let i = r.info
        let a = r.accounting
        var o = JSONTextWriter()
        o.open()
        o.field("schema", int: 1)
        o.key("run")
        o.open()
        o.field("tool", string: i.tool)
        o.field("version", string: i.version)
        o.field("gitRevision", string: i.gitRevision)
        o.field("scenario", string: i.scenario)
        o.field("seed", int: Int(i.seed))
        o.field("configHash", string: i.configHash)
        o.field("clock", string: i.clock)
        o.field("workers", int: i.workers)
        o.field("durationSeconds", number: i.durationSeconds)
        o.field("wallSeconds", number: i.wallSeconds)
        o.field("startedAt", string: i.startedAt)
        o.key("machine")
        o.inline(
            "{\"cores\": \(i.machine.cores), \"cpu\": \(JSONTextWriter.quote(i.machine.cpu)), "
                + "\"os\": \(JSONTextWriter.quote(i.machine.os))}")
        o.field("timerOverheadNanos", number: i.timerOverheadNanos)
        o.field("stageSampleEvery", int: i.stageSampleEvery)
        o.key("shard")
        o.inline(i.shard.map(JSONTextWriter.quote) ?? "null")
        o.field("shards", int: i.shards)
        o.close()
        o.key("counts")
        o.open()
        o.field("pushes", int: a.pushes)
        o.key("rejected")
        o.inline(dict(RejectReason.allCases.map { ($0.name, a[$0]) }))
        o.key("unroutable")
        o.inline(dict(UnroutableReason.allCases.map { ($0.name, a[$0]) }))
        o.field("routed", int: a.routed)
        o.field("deliveries", int: a.deliveries)
        o.key("outcomes")
        o.inline(dict(Outcome.allCases.map { ($0.name, a[$0]) }))
        o.field("requests", int: a.requests)
        o.field("requestsLimitExceeded", int: a.requestsLimitExceeded)
        o.field("activities", int: r.activities)
        o.field("events", int: r.events)
        o.field("identitiesHold", bool: a.identitiesHold)
        o.close()
        o.key("latency")
        o.open()
        for metric in Metric.allCases {
            let l = LatencySummary(r[metric])
            o.key(metric.name)
            o.inline(
                "{\"unit\": \"ns\", \"count\": \(l.count), "
                    + "\"mean\": \(JSONTextWriter.number((l.mean * 10).rounded() / 10)), "
                    + "\"p50\": \(l.p50), \"p90\": \(l.p90), \"p99\": \(l.p99), \"p999\": \(l.p999), "
                    + "\"p9999\": \(l.p9999), \"max\": \(l.max)}")
        }
        o.close()
        o.key("measurement")
        o.open()
        let m = r.measurement
        o.field("sampling", string: m.sampling)
        o.field("clockReads", int: m.clockReads)
        o.field("clampedSamples", int: Int(m.clampedSamples))
        o.field("eventsSkipped", int: m.eventsSkipped)
        o.key("costModel")
        o.inline(m.costModel ?? "null")
        o.field("finalMergeSeconds", number: (m.finalMergeSeconds * 1e4).rounded() / 1e4)
        o.field("reportSeconds", number: (m.reportSeconds * 1e4).rounded() / 1e4)
        o.close()
        o.key("throughput")
        o.open()
        o.field("deliveriesPerSecond", number: r.perSecond(a.deliveries))
        o.field("pushesPerSecond", number: r.perSecond(a.pushes))
        o.field("eventsPerSecond", number: r.perSecond(r.events))
        o.close()
        o.key("memory")
        o.open()
        o.field("peakResidentBytes", int: r.peakResidentBytes)
        o.field("baselineResidentBytes", int: r.baselineResidentBytes)
        o.field("bytesPerActivity", int: r.bytesPerActivity)
        o.close()
        o.field("intervalSeconds", number: Double(r.intervalNanos) / 1e9)
        o.key("resources")
        o.open()
        o.field("sampleEverySeconds", number: ResourceSample.intervalSeconds)
        o.key("samples")
        o.inline(
            "["
                + r.resources.map {
                    "[\(JSONTextWriter.number(($0.elapsedSeconds * 10).rounded() / 10)), \($0.residentBytes), "
                        + "\($0.openFileDescriptors)]"
                }.joined(separator: ", ") + "]")
        if let trend = ResourceTrend(r.resources) {
            o.field("rssFlat", bool: trend.rssFlat)
            o.field("fdsFlat", bool: trend.fdsFlat)
        }
        o.close()
        o.close()
        return o.text + "\n"
    }

    static func dict(_ pairs: [(String, Int)]) -> String {
        "{" + pairs.map { "\(JSONTextWriter.quote($0.0)): \($0.1)" }.joined(separator: ", ") + "}"
    }
}
