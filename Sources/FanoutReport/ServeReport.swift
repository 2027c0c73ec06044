import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import Foundation

/// The run folder of `fanout serve`, rendered from its `ServeResults`: summary.json and summary.md (answers,
/// device-side accounting with its identities, latency percentiles, connections, findings with examples),
/// report.html, latency.hlog (the loops' intervals merged, each sample once; the totals are their sum), one `.hgrm`
/// per latency metric, events-judged.jsonl (`--expect-events`). population.jsonl (written at start) and state.jsonl
/// (what a user would see at the end, in the trace state-dump format) are FanoutServe's, streamed from the live
/// services. Every file is renamed into place; summary.json last.
public enum ServeReport {
    /// What state.jsonl holds (`--state`).
    public typealias StateDetail = ServeResults.StateDetail
    public typealias Info = ServeResults.Info

    /// The run's measurements read back from its log: the totals (the sum of the intervals) and every interval.
    public typealias Measured = (totals: LatencyRecorder, intervals: [LoggedInterval])

    /// The run's verdict on itself (`ServeVerdict`): its `--threshold`s were checked before the run.
    public static func verdict(_ info: Info, _ latency: LatencyRecorder) -> ServeVerdict {
        ServeVerdict.judge(info, latency: latency, thresholds: info.thresholds.compactMap { try? ServeObjective(parsing: $0) })
    }

    /// The files of a run (file name → contents), state.jsonl and population.jsonl apart. A summary.json that
    /// could not be written is thrown.
    public static func files(_ r: ServeResults) throws(MetricsError) -> [String: String] {
        try files(r, mergedShards: [])
    }

    /// The files of the run `fanout merge` added up from `mergedShards` (their lines in summary.json and
    /// summary.md; empty for one serve).
    public static func files(
        _ r: ServeResults, mergedShards: [MergedShard]
    ) throws(MetricsError) -> [String: String] {
        var files: [String: String] = [:]
        let info = r.info
        let (stats, accounting, connections, bytes) = (r.stats, r.accounting, r.connections, r.bytes)
        let elapsedSeconds = r.elapsedSeconds
        let latency = r.latency
        for m in metrics(info) {
            files["\(m.name).hgrm"] =
                "#[fanout serve \(m.name): \(m.about); values in microseconds (us), recorded in nanoseconds]\n"
                + PercentileText.distribution(latency[serve: m], scale: 1000)
        }
        if let t = info.trigger {
            files["trigger-response.hgrm"] =
                "#[fanout serve --trigger: from each event's intended time to its answer; values in microseconds "
                + "(us), recorded in nanoseconds]\n" + PercentileText.distribution(t.responseNanos, scale: 1000)
            files["trigger-schedule-lag.hgrm"] =
                "#[fanout serve --trigger: from each event's intended time to its request's start; values in "
                + "microseconds (us), recorded in nanoseconds]\n"
                + PercentileText.distribution(t.scheduleLagNanos, scale: 1000)
        }
        files["latency.hlog"] = histogramLog(info, r.intervals)
        if let events = info.events {
            files["events-judged.jsonl"] = eventsJudged(events)
            files["freshness.hgrm"] =
                "#[fanout serve --expect-events freshness: every expected (event, follower) pair, from the event's "
                + "intended time until the follower showed it or a newer event of its source; the "
                + "\(events.freshnessCensored) missing pairs censored at the judge's horizon; values in microseconds "
                + "(us), recorded in nanoseconds]\n" + PercentileText.distribution(events.freshness, scale: 1000)
        }
        files["report.html"] = ServeHTML.render(
            info, stats, latency, accounting, connections, bytes, elapsedSeconds, seconds: overTime(r.intervals))
        files["summary.json"] = try summaryJSON(
            info, stats, latency, accounting, connections, bytes, elapsedSeconds, merged: mergedShards)
        files["summary.md"] = summaryMarkdown(
            info, stats, latency, accounting, connections, bytes, elapsedSeconds, merged: mergedShards)
        return files
    }

    /// One row per second of the run, from the intervals' summaries (nothing decoded): responses submitted
    /// (the service samples), service p50 and p99, delivery p99. A second without samples is a row of zeros.
    static func overTime(_ intervals: [LoggedInterval]) -> [ServeHTML.SecondRow] {
        guard let last = intervals.map(\.index).max() else { return [] }
        var rows = (0...last).map {
            ServeHTML.SecondRow(index: $0, requests: 0, serviceP50: 0, serviceP99: 0, deliveryP99: 0)
        }
        for i in intervals {
            switch ServeMetric(rawValue: i.metricIndex) {
            case .service:
                rows[i.index].requests = Int(i.summary.count)
                rows[i.index].serviceP50 = i.summary.p50
                rows[i.index].serviceP99 = i.summary.p99
            case .delivery: rows[i.index].deliveryP99 = i.summary.p99
            case .endToEnd:
                rows[i.index].endToEndCount = Int(i.summary.count)
                rows[i.index].endToEndP99 = i.summary.p99
            default: break
            }
        }
        return rows
    }

    /// HdrHistogram interval log 1.3: StartTime when serving began, every metric tagged, each interval with its
    /// real start and length (the loops' earliest start to their latest end; the last one partial).
    static func histogramLog(_ info: Info, _ intervals: [LoggedInterval]) -> String {
        var writer = HistogramLogWriter(startTimeSeconds: (info.startedAtSeconds * 1000).rounded() / 1000)
        for i in intervals {
            let tag = ServeMetric(rawValue: i.metricIndex)?.name ?? "metric\(i.metricIndex)"
            writer.append(
                tag: tag, startSeconds: Double(i.startNanos) / 1e9, lengthSeconds: Double(i.lengthNanos) / 1e9,
                compressed: i.bytes, maxValue: i.summary.max)
        }
        return writer.text
    }

    /// `percentiles` and the histogram itself (HdrHistogram V2 compressed, base64) when it has samples: for the
    /// distributions latency.hlog does not hold (`faults.heldFor`, `faults.retries.delay`), so that `fanout merge`
    /// adds them exactly (`ServeFolder` reads it back).
    static func percentilesAndHistogram(_ h: LatencyHistogram) -> [String: Any] {
        var object = percentiles(h)
        if !h.isEmpty { object["histogram"] = Data(h.encodedCompressed()).base64EncodedString() }
        return object
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
        _ info: Info, _ s: ServeStats, _ latency: LatencyRecorder, _ a: Accounting, _ c: ConnectionStats,
        _ bytes: (read: Int, written: Int),
        _ elapsed: Double, merged: [MergedShard] = []
    ) throws(MetricsError) -> String {
        var latencyObject: [String: Any] = [:]
        for m in metrics(info) { latencyObject[m.name] = percentiles(latency[serve: m]) }
        var findings: [String: Any] = [:]
        for f in ServeStats.Finding.allCases {
            findings["\(f)"] = ["about": f.about, "count": s.findings[f] ?? 0, "examples": s.examples[f] ?? []]
        }
        var reasons: [String: Int] = [:]
        for (r, n) in s.byReason { reasons[r.rawValue] = n }
        var object: [String: Any] = [
            "kind": "serve",
            "scenario": info.scenario, "seed": info.seed, "listen": info.listen, "transport": info.transport,
            "auth": info.auth, "startedAt": info.startedAt, "gitRevision": info.gitRevision, "workers": info.workers,
            "state": info.state.rawValue,
            "elapsedSeconds": (elapsed * 1000).rounded() / 1000,
            "requests": [
                "total": s.requests, "byStatus": byStatus(s.byStatus), "byReason": reasons,
                "acceptedPushes": s.acceptedPushes, "acceptedBroadcasts": s.acceptedBroadcasts,
                "acceptedOtherPushTypes": s.acceptedOtherPushTypes,
                "channelRequests": s.channelRequests, "identitiesHold": s.identitiesHold,
                "channelLimits": [
                    "perAppRefused": s.channelRefusals.perApp, "apiBundlesRefused": s.channelRefusals.bundles,
                    "listsCut": s.channelRefusals.listsCut,
                ],
                "wireIdentityHolds": c.answersAccountedFor(requests: s.requests),
                "ratePerSecond": elapsed > 0 ? (Double(s.requests) / elapsed * 10).rounded() / 10 : 0,
            ],
            "accounting": accountingJSON(a),
            "latency": latencyObject,
            // Samples above one hour, recorded as one hour (counted, never dropped).
            "measurement": ["clampedSamples": latency.clamped],
            "connections": [
                "accepted": c[.accepted], "closed": c[.closed], "peakOpen": c[.peakOpen], "tls": c[.tlsConnections],
                "bytesIn": bytes.read, "bytesOut": bytes.written, "streamsReset": c[.streamsReset],
                "endReasons": c.endReasons, "refused": c[.refused], "acceptErrors": c[.acceptErrors],
                "streamsRefused": c[.streamsRefused], "requestsRefused": c[.requestsRefused],
                "requestTimeouts": c[.requestTimeouts],
                "outputPauses": c[.outputPauses], "trailerFields": c[.trailerFields],
                "responsesSubmitted": c[.responsesSubmitted], "answersDropped": c[.answersDropped],
                "misplacedRequests": c[.misplacedRequests],
            ],
            "findings": findings,
            "faults": faultsJSON(info, c.faults),
        ]
        if let t = info.trigger { object["trigger"] = triggerJSON(t) }
        if let g = info.registration { object["registration"] = registrationJSON(g) }
        if let manage = info.manageListen { object["manageListen"] = manage }
        if let events = info.events { object["events"] = eventsJSON(events, latency) }
        object["verdict"] = verdict(info, latency).json
        if !info.flags.isEmpty {
            object["flags"] = info.flags
            object["flagsHash"] = info.flagsHash
        }
        shardJSON(info, s, merged: merged, into: &object)
        do {
            let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
            return String(decoding: data, as: UTF8.self) + "\n"
        } catch {
            throw MetricsError("summary.json could not be written: \(error)")
        }
    }

    /// summary.json's `trigger` (only with `--trigger`).
    static func triggerJSON(_ t: TriggerResults) -> [String: Any] {
        return [
            "url": t.url, "concurrency": t.concurrency, "sent": t.sent, "byStatus": byStatus(t.byStatus),
            "successes": t.successes, "timeouts": t.timeouts, "errors": t.errors,
            "cancelledAtShutdown": t.cancelledAtShutdown, "unsentAtShutdown": t.unsentAtShutdown,
            "waitedForSlot": t.waitedForSlot, "peakInFlight": t.peakInFlight, "completed": t.completed,
            "identityHolds": t.identityHolds, "response": percentiles(t.responseNanos),
            "scheduleLag": percentiles(t.scheduleLagNanos), "neverLeft": t.neverLeft, "spread": t.spread.rawValue,
            "byURL": byURLJSON(t.byURL, cancelled: "cancelledAtShutdown", unsent: "unsentAtShutdown"),
            "byURLAddsUp": t.byURLAddsUp,
        ]
    }

    /// summary.json's `registration` (only with `--register`).
    static func registrationJSON(_ g: RegisterResults) -> [String: Any] {
        return [
            "url": g.url, "activities": g.activities, "registered": g.registered, "failed": g.failed,
            "unregisteredAtDeadline": g.unregisteredAtDeadline, "requests": g.requests, "retries": g.retries,
            "byStatus": byStatus(g.byStatus), "timeouts": g.timeouts, "errors": g.errors,
            "elapsedSeconds": (g.elapsedSeconds * 1000).rounded() / 1000, "identityHolds": g.identityHolds,
            "interrupted": g.interrupted,
            "response": percentiles(g.responseNanos), "spread": BackendSpread.roundRobin.rawValue,
            "byURL": byURLJSON(g.byURL, cancelled: "cancelledAtDeadline", unsent: "unsentAtDeadline"),
            "byURLAddsUp": g.byURLAddsUp,
        ]
    }

    /// The findings for the backend that happened (summary.md's and report.html's list), in their order: what each
    /// is, how many, its examples.
    static func listedFindings(_ s: ServeStats) -> [(about: String, count: Int, examples: [String])] {
        ServeStats.Finding.allCases.compactMap { f in
            guard let n = s.findings[f], n > 0 else { return nil }
            return (f.about, n, s.examples[f] ?? [])
        }
    }

    /// summary.md's *Registration* section (only with `--register`).
    static func registrationMarkdown(_ info: Info) -> String {
        guard let g = info.registration else { return "" }
        var md = "## Registration\n\n"
        md += "POST \(g.url) before serving started, " + String(format: "%.2f s", g.elapsedSeconds) + ": "
        md += "\(g.registered) of \(g.activities) activities registered, \(g.failed) failed after every attempt, "
        md += "\(g.unregisteredAtDeadline) unregistered at the deadline; \(g.requests) requests (\(g.retries) retries), "
        md += "\(g.timeouts) timeouts, \(g.errors.values.reduce(0, +)) errors. "
        md += g.interrupted ? "Interrupted (SIGINT or SIGTERM): serving ended at once. " : ""
        md += "activities = registered + failed + unregistered: " + (g.identityHolds ? "holds.\n\n" : "**BROKEN**.\n\n")
        md += backendTablesMarkdown(
            g.counts, errorColumn: "attempts", g.byURL, addsUp: g.byURLAddsUp, cancelled: "cancelled at the deadline",
            unsent: "unsent at the deadline")
        return md
    }

    /// A backend sender's tables in summary.md (the trigger's, the registration's): its answers by status, its
    /// errors (`errorColumn`: what one of them counts), and its per-URL table when it had several URLs.
    static func backendTablesMarkdown(
        _ counts: BackendCounts, errorColumn: String, _ byURL: [BackendURLResults], addsUp: Bool, cancelled: String,
        unsent: String
    ) -> String {
        MarkdownTable.counts("answer", "count", counts.byStatus)
            + MarkdownTable.counts("error", errorColumn, counts.errors)
            + byURLMarkdown(byURL, addsUp: addsUp, cancelled: cancelled, unsent: unsent)
    }

    /// How many of the trigger's requests were in flight at most: to each URL when it had several (with how the
    /// events were spread), after "at most N in flight" in summary.md and report.html.
    static func peakInFlight(_ t: TriggerResults) -> String {
        t.byURL.count > 1
            ? " to each URL (events spread by \(t.spread.rawValue); peak \(t.peakInFlight) in all)"
            : " (peak \(t.peakInFlight))"
    }

    /// summary.md's *Trigger* section (only with `--trigger`).
    static func triggerMarkdown(_ info: Info) -> String {
        guard let t = info.trigger else { return "" }
        var md = "## Trigger\n\n"
        md += "POST \(t.url), at most \(t.concurrency) in flight" + peakInFlight(t)
        md += ": \(t.sent) events sent, "
        md += "\(t.successes) answered 2xx, \(t.timeouts) timed out, \(t.errors.values.reduce(0, +)) failed, "
        md += "\(t.cancelledAtShutdown) cancelled at shutdown; \(t.unsentAtShutdown) due but unsent at shutdown; "
        md += "\(t.waitedForSlot) waited for a free slot; \(t.neverLeft) never left (no connection). "
        md += t.completed ? "Every event of the schedule was sent and ended before shutdown. " : ""
        md += "sent = answered + timeouts + errors + cancelled: " + (t.identityHolds ? "holds.\n\n" : "**BROKEN**.\n\n")
        md += backendTablesMarkdown(
            t.counts, errorColumn: "count", t.byURL, addsUp: t.byURLAddsUp, cancelled: "cancelled at shutdown",
            unsent: "unsent at shutdown")
        md += MarkdownTable.percentiles(
            "µs from the intended time",
            [("response (answered)", t.responseNanos), ("schedule lag (request left)", t.scheduleLagNanos)],
            value: micros)
        md += "\n"
        return md
    }

    /// What `--latency` and `--faults` injected (zeros when neither was given).
    static func faultsJSON(_ info: Info, _ f: FaultCounts) -> [String: Any] {
        var injected: [String: Int] = [:]
        for (kind, n) in f.injected { injected[kind] = n }
        let r = f.retries
        func byKind(_ counts: [Int]) -> [String: Int] {
            Dictionary(uniqueKeysWithValues: zip(RetryCounts.kinds, counts))
        }
        var retries: [String: Any] = [
            "refused": byKind(r.refused), "retried": byKind(r.retried), "neverRetried": byKind(r.neverRetried),
            "untracked": r.untracked, "identityHolds": r.identityHolds, "delay": percentilesAndHistogram(r.delayNanos),
        ]
        for (c, n) in r.broadcasts.all { retries[c.summaryKey] = n }
        return [
            "latency": info.latency ?? NSNull(), "faults": info.faults ?? NSNull(), "injected": injected,
            "held": f[.held], "heldPeak": f[.heldPeak], "heldOverflow": f[.heldOverflow],
            "heldFor": percentilesAndHistogram(f.heldNanos), "retries": retries,
        ]
    }

    /// summary.md's *Faults* section (only when `--latency` or `--faults` was given).
    static func faultsMarkdown(_ info: Info, _ f: FaultCounts) -> String {
        guard info.latency != nil || info.faults != nil else { return "" }
        var md = "## Faults injected\n\n"
        md += "--latency \(info.latency ?? "none"), --faults \(info.faults ?? "none"), seed \(info.seed).\n\n"
        md += "| fault | count |\n|---|---:|\n"
        for (kind, n) in f.injected { md += "| \(kind) | \(n) |\n" }
        let held = f.heldNanos.values(atPercentiles: [50, 99])
        md += "\nAnswers held: \(f[.held]) (at most \(f[.heldPeak]) at once; \(f[.heldOverflow]) sent at once, over "
        md += "--max-open-streams held), for p50 \(micros(held[0])) µs, p99 \(micros(held[1])) µs, max "
        md += "\(micros(f.heldNanos.max)) µs. 503/429/500 are counted with the answers above and reached no device; "
        md += "reset streams got RST_STREAM INTERNAL_ERROR and are not in the requests; goaway: connections sent "
        md += "GOAWAY Shutdown; stall: answers held to a stall window's end. The service time includes the time "
        md += "an answer was held.\n\n"
        let r = f.retries
        if r.refused.reduce(0, +) > 0 {
            md += "| refused token pushes | refused | came back | never did |\n|---|---:|---:|---:|\n"
            for (k, kind) in RetryCounts.kinds.enumerated() {
                md += "| \(kind) | \(r.refused[k]) | \(r.retried[k]) | \(r.neverRetried[k]) |\n"
            }
            let v = r.delayNanos.values(atPercentiles: [50, 99])
            md += "\nRetries (the same apns-id, or the same token and aps.timestamp, on the same event loop) came "
            md += "back after p50 \(micros(v[0])) µs, p99 \(micros(v[1])) µs, max \(micros(r.delayNanos.max)) µs; "
            md += "\(r.untracked) refused pushes untracked (no apns-id nor aps.timestamp, or over 100,000 remembered "
            md += "per loop). refused = came back + never did + untracked: "
            md += r.identityHolds ? "holds.\n\n" : "**BROKEN**.\n\n"
        }
        return md
    }

    static func micros(_ nanos: UInt64) -> String { String(format: "%.1f", Double(nanos) / 1000) }

    static func summaryMarkdown(
        _ info: Info, _ s: ServeStats, _ latency: LatencyRecorder, _ a: Accounting, _ c: ConnectionStats,
        _ bytes: (read: Int, written: Int),
        _ elapsed: Double, merged: [MergedShard] = []
    ) -> String {
        var md = "# fanout serve — \(info.scenario)"
        md += (merged.isEmpty ? "" : ", \(merged.count) shards merged") + "\n\n"
        md += "Listening on \(info.listen)" + (info.manageListen.map { ", channel management on \($0)" } ?? "")
        md += " (\(info.transport), auth \(info.auth), \(info.workers) event loop"
        md += info.workers == 1 ? "), " : "s), "
        md += "started \(info.startedAt), "
        md += String(format: "served %.1f s", elapsed) + ", revision \(info.gitRevision), seed \(info.seed).\n\n"
        md += verdict(info, latency).markdown + shardMarkdown(info, s, merged: merged)
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
        md += "channel-management requests"
        let cr = s.channelRefusals
        if cr != ServeStats.ChannelRefusals() {
            md += " (bounds hit: \(cr.perApp) creates over 10,000 per app, \(cr.bundles) over the API bundle cap, "
            md += "\(cr.listsCut) all-channels answers cut)"
        }
        md += ". Identities (requests = Σ statuses, failures = Σ reasons): "
        md += s.identitiesHold ? "hold.\n\n" : "**BROKEN**.\n\n"
        md += "## Devices\n\n"
        md += "Pushes judged by the devices' pipeline \(a.pushes): routed \(a.routed), rejected \(a.rejectedTotal), "
        md += "unroutable \(a.unroutableTotal); deliveries \(a.deliveries). "
        md += "Identities (pushes = rejected + unroutable + routed, deliveries = Σ outcomes): "
        md += a.identitiesHold ? "hold.\n\n" : "**BROKEN**.\n\n"
        md += "| outcome | count |\n|---|---:|\n"
        for o in Outcome.allCases { md += "| \(o.name) | \(a[o]) |\n" }
        md += "\n## Latency (µs)\n\n"
        md += MarkdownTable.percentiles("metric", metrics(info).map { ($0.name, latency[serve: $0]) }, value: micros)
        md += "\nservice: \(ServeMetric.service.about); delivery: \(ServeMetric.delivery.about); "
        md += "fanout: \(ServeMetric.fanout.about).\n\n"
        if let events = info.events { md += eventsMarkdown(events, latency) }
        md += "## Connections\n\n"
        md += "\(c[.accepted]) accepted (\(c[.tlsConnections]) over TLS), peak \(c[.peakOpen]) open, \(bytes.read) bytes in, "
        md += "\(bytes.written) bytes out, \(c[.streamsReset]) streams reset.\n\n"
        md += boundsHit(c) + "\n\n"
        md += wireIdentity(s, c, broken: "**BROKEN**") + "\n\n"
        if info.manageListen != nil { md += misplaced(c) + "\n\n" }
        md += MarkdownTable.counts("how connections ended", "count", c.endReasons)
        md += faultsMarkdown(info, c.faults)
        md += registrationMarkdown(info)
        md += triggerMarkdown(info)
        md += "## Findings for the backend\n\n"
        let findings = listedFindings(s)
        for (about, n, examples) in findings {
            md += "- **\(about)**: \(n)\n" + examples.map { "  - `\($0)`\n" }.joined()
        }
        if findings.isEmpty {
            md += "None: no push went to a rotated or unknown token, none was stale, late, rejected or throttled.\n"
        }
        md += "\nFiles: report.html, latency.hlog (every metric, one interval per second of serving, each sample "
        md += "once), "
        md += merged.isEmpty ? "population.jsonl (the subscribers, written at start), " : ""
        switch info.state {
        case .full: md += "state.jsonl (what users see at the end), "
        case .summary: md += "state.jsonl (the totals line only: --state summary), "
        case .none: md += "no state.jsonl (--state none), "
        }
        if info.events != nil { md += "events.jsonl (the scenario's events, written at start), events-judged.jsonl, " }
        md += metrics(info).map { "\($0.name).hgrm" }.joined(separator: ", ")
        md += info.events == nil ? "" : ", freshness.hgrm"
        md += info.trigger == nil ? ".\n" : ", trigger-response.hgrm, trigger-schedule-lag.hgrm.\n"
        return md
    }
}
