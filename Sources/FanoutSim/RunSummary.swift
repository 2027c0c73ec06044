import FanoutCore
import FanoutMetrics
import Foundation

/// `summary.json` of a run folder (schema 1). Later issues add files, not keys that break this.
public enum RunSummary {
    public static let toolVersion = "0.1.0"

    public static func json(_ r: RunResult, gitRevision: String) -> String {
        let s = r.scenario
        let a = r.accounting
        var o = JSONTextWriter()
        o.open()
        o.field("schema", int: 1)
        o.key("run")
        o.open()
        o.field("tool", string: "fanout")
        o.field("version", string: toolVersion)
        o.field("gitRevision", string: gitRevision)
        o.field("scenario", string: s.name)
        o.field("seed", int: Int(s.seed))
        o.field("configHash", string: s.configHash)
        o.field("clock", string: s.clock.rawValue)
        o.field("workers", int: r.workers)
        o.field("durationSeconds", number: s.durationSeconds)
        o.field("wallSeconds", number: (r.wallSeconds * 1000).rounded() / 1000)
        o.field("startedAt", string: ISO8601DateFormatter().string(from: r.startedAt))
        o.key("machine")
        o.inline(
            "{\"cores\": \(ProcessInfo.processInfo.activeProcessorCount), \"cpu\": \(JSONTextWriter.quote(Machine.cpu)), "
                + "\"os\": \(JSONTextWriter.quote(Machine.os))}")
        o.field("timerOverheadNanos", number: (r.timerOverheadNanos * 10).rounded() / 10)
        o.field("stageSampleEvery", int: s.stageSampleEvery)
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
            let l = LatencySummary(r.recorder[metric])
            o.key(metric.name)
            o.inline(
                "{\"unit\": \"ns\", \"count\": \(l.count), \"mean\": \(JSONTextWriter.number((l.mean * 10).rounded() / 10)), "
                    + "\"p50\": \(l.p50), \"p90\": \(l.p90), \"p99\": \(l.p99), \"p999\": \(l.p999), "
                    + "\"p9999\": \(l.p9999), \"max\": \(l.max)}")
        }
        o.close()
        o.key("throughput")
        o.open()
        let seconds = max(r.wallSeconds, 1e-9)
        o.field("deliveriesPerSecond", number: (Double(a.deliveries) / seconds).rounded())
        o.field("pushesPerSecond", number: (Double(a.pushes) / seconds).rounded())
        o.field("eventsPerSecond", number: (Double(r.events) / seconds).rounded())
        o.close()
        o.key("memory")
        o.open()
        o.field("peakResidentBytes", int: r.peakResidentBytes)
        o.field("baselineResidentBytes", int: r.baselineResidentBytes)
        let perActivity = r.activities > 0 ? (r.peakResidentBytes - r.baselineResidentBytes) / r.activities : 0
        o.field("bytesPerActivity", int: perActivity)
        o.close()
        o.close()
        return o.text + "\n"
    }

    static func dict(_ pairs: [(String, Int)]) -> String {
        "{" + pairs.map { "\(JSONTextWriter.quote($0.0)): \($0.1)" }.joined(separator: ", ") + "}"
    }
}

/// Facts about the machine for a report.
public enum Machine {
    public static var cpu: String {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return "unknown" }
        for line in text.split(separator: "\n") where line.hasPrefix("model name") {
            return line.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) }
                ?? "unknown"
        }
        return "unknown"
    }

    public static var os: String {
        if let text = try? String(contentsOfFile: "/etc/os-release", encoding: .utf8) {
            for line in text.split(separator: "\n") where line.hasPrefix("PRETTY_NAME=") {
                return String(line.dropFirst("PRETTY_NAME=".count)).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            }
        }
        return ProcessInfo.processInfo.operatingSystemVersionString
    }

    /// The git revision of the working directory, or "unknown".
    public static func gitRevision() -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "rev-parse", "--short=12", "HEAD"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
            process.waitUntilExit()
        } catch {
            return "unknown"
        }
        guard process.terminationStatus == 0 else { return "unknown" }
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
