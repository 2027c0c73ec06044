import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import FanoutReport
import FanoutTrace
import Foundation

/// The run folder of `fanout serve`: summary.json and summary.md (answers, device-side accounting with its
/// identities, latency percentiles, connections, findings with examples), one `.hgrm` per latency metric,
/// population.jsonl (written at start) and state.jsonl (what a user would see at the end, in the trace
/// state-dump format). Every file is renamed into place; summary.json last.
public enum ServeReport {
    public struct Info: Sendable {
        public var scenario: String
        public var seed: UInt64
        public var listen: String
        public var transport: String
        public var auth: String
        public var startedAt: String
        public var gitRevision: String
        public var workers = 1
        /// UNIX seconds of the start (the histogram log's StartTime).
        public var startedAtSeconds = 0.0
        public init(scenario: String, seed: UInt64, listen: String, transport: String, auth: String,
                    startedAt: String, gitRevision: String) {
            self.scenario = scenario
            self.seed = seed
            self.listen = listen
            self.transport = transport
            self.auth = auth
            self.startedAt = startedAt
            self.gitRevision = gitRevision
        }
    }

    public static func files(
        _ info: Info, service: APNsService, connections: ConnectionStats, bytes: (read: Int, written: Int),
        elapsedSeconds: Double, nowMillis: Int64
    ) -> [String: String] {
        files(info, services: [service], connections: connections, bytes: bytes, elapsedSeconds: elapsedSeconds,
            nowMillis: nowMillis)
    }

    /// The files of a run served by several workers: their measurements added, their state dumps merged (lines
    /// sorted as one dump sorts them, one totals line).
    public static func files(
        _ info: Info, services: [APNsService], connections: ConnectionStats, bytes: (read: Int, written: Int),
        elapsedSeconds: Double, nowMillis: Int64
    ) -> [String: String] {
        var files: [String: String] = [:]
        var stats = ServeStats()
        var accounting = Accounting()
        for s in services {
            stats.add(s.stats)
            accounting.add(s.pipeline.accounting)
        }
        for m in ServeMetric.allCases {
            files["\(m.name).hgrm"] =
                "#[fanout serve \(m.name): \(m.about); values in microseconds (us), recorded in nanoseconds]\n"
                + PercentileText.distribution(stats[m], scale: 1000)
        }
        if services.count == 1 {
            files["state.jsonl"] = String(
                decoding: StateDump.render(services[0].pipeline, nowMillis: nowMillis), as: UTF8.self)
        } else {
            var activities: [Substring] = []
            var devices: [Substring] = []
            var texts: [String] = []
            for s in services {
                texts.append(String(decoding: StateDump.render(s.pipeline, nowMillis: nowMillis), as: UTF8.self))
            }
            for text in texts {
                for line in text.split(separator: "\n") {
                    if line.hasPrefix("{\"activity\"") { activities.append(line) }
                    else if line.hasPrefix("{\"device\"") { devices.append(line) }
                }
            }
            activities.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            devices.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            var dump = (activities + devices).joined(separator: "\n") + "\n"
            dump += String(decoding: StateDump.totalsLine(accounting), as: UTF8.self)
            files["state.jsonl"] = dump
        }
        let seconds = overTime(services)
        files["latency.hlog"] = histogramLog(info, seconds)
        files["report.html"] = ServeHTML.render(
            info, stats, accounting, connections, bytes, elapsedSeconds, seconds: seconds.map(\.row))
        files["summary.json"] = summaryJSON(info, stats, accounting, connections, bytes, elapsedSeconds)
        files["summary.md"] = summaryMarkdown(info, stats, accounting, connections, bytes, elapsedSeconds)
        return files
    }

    /// One second of the run, all workers added: requests, and each metric's histogram log line (compressed).
    struct Second {
        var row: ServeHTML.SecondRow
        var encoded: [(tag: String, bytes: [UInt8], max: UInt64)]
    }

    /// The workers' seconds merged one second at a time (never more than one second's histograms in memory).
    static func overTime(_ services: [APNsService]) -> [Second] {
        var byIndex: [Int: [ServeInterval]] = [:]
        for s in services { for i in s.intervals { byIndex[i.index, default: []].append(i) } }
        var out: [Second] = []
        for index in byIndex.keys.sorted() {
            let parts = byIndex[index]!
            var merged = [LatencyHistogram](repeating: LatencyHistogram(), count: ServeMetric.allCases.count)
            for part in parts {
                for (k, bytes) in part.encoded.enumerated() where !bytes.isEmpty {
                    // Encoded by this process a moment ago: a failure would be a bug, never a dropped sample.
                    merged[k].add(try! LatencyHistogram(decoding: bytes))
                }
            }
            let service = merged[ServeMetric.service.rawValue]
            let delivery = merged[ServeMetric.delivery.rawValue]
            let row = ServeHTML.SecondRow(
                index: index, requests: parts.reduce(0) { $0 + $1.requests },
                serviceP50: service.isEmpty ? 0 : service.valueAtPercentile(50),
                serviceP99: service.isEmpty ? 0 : service.valueAtPercentile(99),
                deliveryP99: delivery.isEmpty ? 0 : delivery.valueAtPercentile(99))
            var encoded: [(tag: String, bytes: [UInt8], max: UInt64)] = []
            for m in ServeMetric.allCases where !merged[m.rawValue].isEmpty {
                encoded.append((m.name, merged[m.rawValue].encodedCompressed(), merged[m.rawValue].max))
            }
            out.append(Second(row: row, encoded: encoded))
        }
        return out
    }

    /// HdrHistogram interval log 1.3: every metric tagged, one interval per second.
    static func histogramLog(_ info: Info, _ seconds: [Second]) -> String {
        var writer = HistogramLogWriter(startTimeSeconds: (info.startedAtSeconds * 1000).rounded() / 1000)
        for second in seconds {
            for e in second.encoded {
                writer.append(
                    tag: e.tag, startSeconds: Double(second.row.index), lengthSeconds: 1, compressed: e.bytes,
                    maxValue: e.max)
            }
        }
        return writer.text
    }

    static func percentiles(_ h: LatencyHistogram) -> [String: Any] {
        let v = h.values(atPercentiles: [50, 90, 99, 99.9])
        return [
            "count": h.totalCount, "p50Nanos": v[0], "p90Nanos": v[1], "p99Nanos": v[2], "p999Nanos": v[3],
            "maxNanos": h.max, "meanNanos": h.isEmpty ? 0 : Int(h.mean.rounded()),
        ]
    }

    static func accountingJSON(_ a: Accounting) -> [String: Any] {
        var rejected: [String: Int] = [:]
        for r in RejectReason.allCases where a[r] > 0 { rejected[r.name] = a[r] }
        var unroutable: [String: Int] = [:]
        for r in UnroutableReason.allCases where a[r] > 0 { unroutable[r.name] = a[r] }
        var outcomes: [String: Int] = [:]
        for o in Outcome.allCases { outcomes[o.name] = a[o] }
        return [
            "pushes": a.pushes, "rejected": rejected, "unroutable": unroutable, "routed": a.routed,
            "deliveries": a.deliveries, "outcomes": outcomes, "identitiesHold": a.identitiesHold,
        ]
    }

    static func summaryJSON(
        _ info: Info, _ s: ServeStats, _ a: Accounting, _ c: ConnectionStats, _ bytes: (read: Int, written: Int),
        _ elapsed: Double
    ) -> String {
        var latency: [String: Any] = [:]
        for m in ServeMetric.allCases { latency[m.name] = percentiles(s[m]) }
        var findings: [String: Any] = [:]
        for f in ServeStats.Finding.allCases {
            findings["\(f)"] = ["about": f.about, "count": s.findings[f] ?? 0, "examples": s.examples[f] ?? []]
        }
        var reasons: [String: Int] = [:]
        for (r, n) in s.byReason { reasons[r.rawValue] = n }
        var statuses: [String: Int] = [:]
        for (k, n) in s.byStatus { statuses[String(k)] = n }
        let object: [String: Any] = [
            "kind": "serve",
            "scenario": info.scenario, "seed": info.seed, "listen": info.listen, "transport": info.transport,
            "auth": info.auth, "startedAt": info.startedAt, "gitRevision": info.gitRevision, "workers": info.workers,
            "elapsedSeconds": (elapsed * 1000).rounded() / 1000,
            "requests": [
                "total": s.requests, "byStatus": statuses, "byReason": reasons, "acceptedPushes": s.acceptedPushes,
                "acceptedBroadcasts": s.acceptedBroadcasts, "acceptedOtherPushTypes": s.acceptedOtherPushTypes,
                "channelRequests": s.channelRequests, "identitiesHold": s.identitiesHold,
                "wireIdentityHolds": c.answersAccountedFor(requests: s.requests),
                "ratePerSecond": elapsed > 0 ? (Double(s.requests) / elapsed * 10).rounded() / 10 : 0,
            ],
            "accounting": accountingJSON(a),
            "latency": latency,
            "connections": [
                "accepted": c.accepted, "closed": c.closed, "peakOpen": c.peakOpen, "tls": c.tlsConnections,
                "bytesIn": bytes.read, "bytesOut": bytes.written, "streamsReset": c.streamsReset,
                "endReasons": c.endReasons, "refused": c.refused, "acceptErrors": c.acceptErrors,
                "streamsRefused": c.streamsRefused, "requestTimeouts": c.requestTimeouts,
                "outputPauses": c.outputPauses, "trailerFields": c.trailerFields,
                "responsesSubmitted": c.responsesSubmitted, "answersDropped": c.answersDropped,
            ],
            "findings": findings,
        ]
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    static func micros(_ nanos: UInt64) -> String { String(format: "%.1f", Double(nanos) / 1000) }

    static func summaryMarkdown(
        _ info: Info, _ s: ServeStats, _ a: Accounting, _ c: ConnectionStats, _ bytes: (read: Int, written: Int),
        _ elapsed: Double
    ) -> String {
        var md = "# fanout serve — \(info.scenario)\n\n"
        md += "Listening on \(info.listen) (\(info.transport), auth \(info.auth), \(info.workers) event loop"
        md += info.workers == 1 ? "), " : "s), "
        md += "started \(info.startedAt), "
        md += String(format: "served %.1f s", elapsed) + ", revision \(info.gitRevision), seed \(info.seed).\n\n"
        md += "## Requests\n\n| answer | count |\n|---|---:|\n"
        for (status, n) in s.byStatus.sorted(by: { $0.key < $1.key }) { md += "| \(status) | \(n) |\n" }
        md += "| **total** | **\(s.requests)** |\n\n"
        if !s.byReason.isEmpty {
            md += "| reason | status | count |\n|---|---:|---:|\n"
            for (r, n) in s.byReason.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                md += "| \(r.rawValue) | \(r.status) | \(n) |\n"
            }
            md += "\n"
        }
        md += "Accepted: \(s.acceptedPushes) token pushes, \(s.acceptedBroadcasts) broadcasts, "
        md += "\(s.acceptedOtherPushTypes) of other push types (reaching no activity); \(s.channelRequests) "
        md += "channel-management requests. Identities (requests = Σ statuses, failures = Σ reasons): "
        md += s.identitiesHold ? "hold.\n\n" : "**BROKEN**.\n\n"
        md += "## Devices\n\n"
        md += "Pushes judged by the devices' pipeline \(a.pushes): routed \(a.routed), rejected \(a.rejectedTotal), "
        md += "unroutable \(a.unroutableTotal); deliveries \(a.deliveries). "
        md += "Identities (pushes = rejected + unroutable + routed, deliveries = Σ outcomes): "
        md += a.identitiesHold ? "hold.\n\n" : "**BROKEN**.\n\n"
        md += "| outcome | count |\n|---|---:|\n"
        for o in Outcome.allCases { md += "| \(o.name) | \(a[o]) |\n" }
        md += "\n## Latency (µs)\n\n| metric | count | p50 | p90 | p99 | p99.9 | max |\n|---|---:|---:|---:|---:|---:|---:|\n"
        for m in ServeMetric.allCases {
            let h = s[m]
            let v = h.values(atPercentiles: [50, 90, 99, 99.9])
            md += "| \(m.name) | \(h.totalCount) | \(micros(v[0])) | \(micros(v[1])) | \(micros(v[2])) | "
            md += "\(micros(v[3])) | \(micros(h.max)) |\n"
        }
        md += "\nservice: \(ServeMetric.service.about); delivery: \(ServeMetric.delivery.about); "
        md += "fanout: \(ServeMetric.fanout.about).\n\n"
        md += "## Connections\n\n"
        md += "\(c.accepted) accepted (\(c.tlsConnections) over TLS), peak \(c.peakOpen) open, \(bytes.read) bytes in, "
        md += "\(bytes.written) bytes out, \(c.streamsReset) streams reset.\n\n"
        md += "Bounds hit: \(c.refused) connections refused (over --max-connections), \(c.acceptErrors) accept errors, "
        md += "\(c.streamsRefused) streams refused (over --max-open-streams), \(c.requestTimeouts) requests timed out, "
        md += "\(c.outputPauses) output pauses (clients not reading), \(c.trailerFields) trailer fields ignored.\n\n"
        md += "Answers: \(s.requests) produced = \(c.responsesSubmitted) submitted to nghttp2 + \(c.answersDropped) "
        md += "dropped (stream already gone): "
        md += c.answersAccountedFor(requests: s.requests) ? "holds.\n\n" : "**BROKEN**.\n\n"
        if !c.endReasons.isEmpty {
            md += "| how connections ended | count |\n|---|---:|\n"
            for (r, n) in c.endReasons.sorted(by: { $0.key < $1.key }) { md += "| \(r) | \(n) |\n" }
            md += "\n"
        }
        md += "## Findings for the backend\n\n"
        var any = false
        for f in ServeStats.Finding.allCases {
            guard let n = s.findings[f], n > 0 else { continue }
            any = true
            md += "- **\(f.about)**: \(n)\n"
            for e in s.examples[f] ?? [] { md += "  - `\(e)`\n" }
        }
        if !any { md += "None: no push went to a rotated or unknown token, none was stale, late, rejected or throttled.\n" }
        md += "\nFiles: report.html, latency.hlog (every metric, one interval per second), "
        md += "population.jsonl (the subscribers, written at start), state.jsonl (what users see at the end), "
        md += ServeMetric.allCases.map { "\($0.name).hgrm" }.joined(separator: ", ") + ".\n"
        return md
    }
}
