import FanoutHistogramLog
import FanoutMetrics
import Foundation

/// The run folder of `fanout push`: summary.json, summary.md, report.html, latency.hlog (tags `latency`,
/// `scheduleLag`, `answeredLatency`, `dispatchLag`, `streamWait`, one interval per second), and a .hgrm of each.
public enum PushReport {
    /// The exit status of a run whose generator was saturated (dispatchLag p99, its own lateness, above the bound):
    /// its numbers understate the server's latency, so a CI gate must not pass on them.
    public static let saturatedExitCode: Int32 = 3
    /// The exit status of a run ended early by SIGINT or SIGTERM (its folder written), as shells count SIGINT.
    public static let interruptedExitCode: Int32 = 130
    /// `--start-at` missed by more than `--max-start-skew`: the run refused to start (`PushResults.startRefused`).
    public static let startRefusedExitCode: Int32 = 7

    /// Every file of the folder but latency.hlog; `thresholds` (`--threshold`) judged on `r` in summary.json,
    /// summary.md and report.html.
    static func filesButLog(
        _ r: PushResults, gitRevision: String?, thresholds: [PushThreshold] = []
    ) throws -> [String: String] {
        let gate = PushGate(thresholds, r)
        var files: [String: String] = [:]
        files["latency.hgrm"] =
            "#[fanout push latency: from each request's intended time to its answer's END_STREAM; values in "
            + "microseconds (us), recorded in nanoseconds]\n" + PercentileText.distribution(r.latency, scale: 1000)
        files["schedule-lag.hgrm"] =
            "#[fanout push scheduleLag: from each request's intended time to its submission to nghttp2; values in "
            + "microseconds (us), recorded in nanoseconds]\n" + PercentileText.distribution(r.scheduleLag, scale: 1000)
        let more = [
            ("answered-latency.hgrm", "answeredLatency: answered requests alone, intended time → END_STREAM",
                r.answeredLatency),
            ("dispatch-lag.hgrm", "dispatchLag: intended time → handed to a connection (the generator's lateness)",
                r.dispatchLag),
            ("stream-wait.hgrm", "streamWait: handed to a connection → submitted to nghttp2 (the server's streams)",
                r.streamWait),
        ]
        for (name, what, h) in more {
            files[name] = "#[fanout push \(what); values in microseconds (us), recorded in nanoseconds]\n"
                + PercentileText.distribution(h, scale: 1000)
        }
        files["summary.json"] = try summaryJSON(r, gitRevision: gitRevision, gate: gate)
        files["summary.md"] = summaryMarkdown(r, gitRevision: gitRevision, gate: gate)
        files["report.html"] = try PushHTML.render(r, gitRevision: gitRevision, gate: gate)
        return files
    }

    /// Every file of the folder, latency.hlog included (in memory: ``write(folder:_:gitRevision:thresholds:)``
    /// writes the same bytes without holding the log whole).
    public static func files(
        _ r: PushResults, gitRevision: String?, thresholds: [PushThreshold] = []
    ) throws -> [String: String] {
        var files = try filesButLog(r, gitRevision: gitRevision, thresholds: thresholds)
        var log = ""
        try histogramLog(r) { log += $0 }
        files["latency.hlog"] = log
        return files
    }

    /// Writes the run folder: latency.hlog a piece at a time from the run's interval spool (a long run's log is never
    /// in memory whole), then the other files, summary.json last; each through a temporary name, renamed into place.
    public static func write(
        folder: String, _ r: PushResults, gitRevision: String?, thresholds: [PushThreshold] = []
    ) throws {
        let files = try filesButLog(r, gitRevision: gitRevision, thresholds: thresholds)
        try RunFiles.write(folder: folder, name: "latency.hlog") { write in try histogramLog(r, write) }
        try RunFiles.write(folder: folder, files: files)
    }

    /// latency.hlog's text (one interval per second and tag, ``PushIntervalSpool/tags``), handed to `write` in pieces
    /// of about 1 MiB.
    static func histogramLog(_ r: PushResults, _ write: (String) throws -> Void) throws {
        var writer = HistogramLogWriter(startTimeSeconds: (r.startedAtSeconds * 1000).rounded() / 1000)
        try r.forEachInterval { i in
            writer.append(
                tag: i.tag, startSeconds: i.startSeconds, lengthSeconds: i.lengthSeconds, compressed: i.compressed,
                maxValue: i.maxValue)
            if writer.text.utf8.count >= 1 << 20 { try write(writer.takeText()) }
        }
        try write(writer.takeText())
    }

    static func summaryJSON(_ r: PushResults, gitRevision: String?, gate: PushGate) throws -> String {
        let object: [String: Any] = [
            "tool": "fanout push", "scenario": r.scenario, "seed": r.seed, "target": r.target,
            "connections": r.connections, "streams": r.streams, "authentication": r.authenticated ? "jwt" : "none",
            "gitRevision": gitRevision ?? "unknown",
            "startedAtSeconds": r.startedAtSeconds, "scheduleSeconds": r.scheduleSeconds,
            "elapsedSeconds": r.elapsedSeconds,
            "events": r.events, "tokenPushes": r.tokenPushes, "broadcasts": r.broadcasts,
            "pushToStarts": r.pushToStarts, "source": source(r),
            "requests": [
                "sent": r.sent, "submitted": r.submitted, "answered": r.answered, "byStatus": byStatus(r.byStatus),
                "byReason": r.byReason, "failed": r.failed, "failures": r.failures,
                "unansweredAtEnd": r.unansweredAtEnd, "queuedAtEnd": r.queuedAtEnd, "peakQueued": r.peakQueued,
                "answeredPerSecond": r.requestsPerSecond,
            ],
            "identity": ["holds": r.identityHolds, "rule": "sent = answered + failed + unansweredAtEnd"],
            "latency": percentiles(r.latency), "scheduleLag": percentiles(r.scheduleLag),
            "answeredLatency": percentiles(r.answeredLatency), "dispatchLag": percentiles(r.dispatchLag),
            "streamWait": percentiles(r.streamWait),
            "verdict": verdict(r),
            "saturation": [
                "saturated": r.saturated, "serverLimited": r.serverLimited,
                "maxScheduleLagNanos": r.maxScheduleLagNanos,
                "scheduleLagP99Nanos": r.scheduleLag.valueAtPercentile(99),
                "dispatchLagP99Nanos": r.dispatchLag.valueAtPercentile(99),
                "streamWaitP99Nanos": r.streamWait.valueAtPercentile(99), "queuedAtEnd": r.queuedAtEnd,
                "loopBusyShare": r.loopBusyShare.map { $0 as Any } ?? NSNull(),
                "exitCode": r.saturated ? Int(saturatedExitCode) : 0,
                "saturatedShards": r.saturatedShards.map { $0 as Any } ?? NSNull(),
                "serverLimitedShards": r.serverLimitedShards.map { $0 as Any } ?? NSNull(),
            ],
            "epochSeconds": r.epochSeconds.map { $0 as Any } ?? NSNull(),
            "thresholds": [
                "judged": gate.notJudged == nil, "notJudgedBecause": gate.notJudged.map { $0 as Any } ?? NSNull(),
                "broken": gate.broken.count,
                "results": gate.results.map { t -> [String: Any] in
                    ["threshold": t.threshold, "measured": t.measured, "limit": t.limit, "met": t.met]
                },
            ],
            "exitCode": Int(gate.exitCode(r)),
            "connectionEnds": r.connectionEnds, "providerTokensIssued": r.tokensIssued, "interrupted": r.interrupted,
            "reconnects": r.reconnects, "retries": r.retries, "connectionsLost": r.connectionsLost,
            "connectionsDrained": r.connectionsDrained, "reconnectBackoffs": r.reconnectBackoffs,
            "drainedForStreamIds": r.drainedForStreamIds,
            "shard": r.shard ?? NSNull(), "shards": r.shards, "configHash": r.configHash,
            "startAt": startJSON(r), "barrier": barrierJSON(r),
        ]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    /// What was sent: the scenario's schedule, or a trace (its path, lines, hash, push lines and the other ops' lines,
    /// not sent).
    static func source(_ r: PushResults) -> [String: Any] {
        guard let t = r.trace else { return ["kind": "scenario", "name": r.scenario] }
        return [
            "kind": "trace", "path": t.path, "lines": t.lines, "fnv1a64": t.hash, "pushLines": t.pushLines,
            "notSentDeviceSide": t.notSent,
        ]
    }

    static func millis(_ nanos: UInt64) -> String { String(format: "%.3f", Double(nanos) / 1e6) }

    /// summary.json's `verdict`: `saturated` (the generator fell behind: exit 3), `server-limited` (the server held
    /// the schedule up: judged) or `held` (the schedule was held).
    static func verdict(_ r: PushResults) -> String {
        r.startRefused != nil ? "not started" : r.saturated ? "saturated" : r.serverLimited ? "server-limited" : "held"
    }

    /// Why the generator was saturated: its dispatchLag p99 against the bound, or (merged) the shards that were.
    public static func saturationCause(_ r: PushResults) -> String {
        if let shards = r.saturatedShards {
            return "shard" + (shards.count == 1 ? " " : "s ") + shards.joined(separator: ", ") + " saturated"
        }
        let p99 = r.dispatchLag.valueAtPercentile(99)
        if p99 <= r.maxScheduleLagNanos && r.heldUp && r.loopBusy {
            let dropped = r.droppedQueueFull > 0
                ? ", \(r.droppedQueueFull) requests \(PushResults.droppedQueueFullKey) (--max-queued)" : ""
            return "its loop was busy \(busy(r)) of the run while requests waited for streams (streamWait p99 "
                + "\(millis(r.streamWait.valueAtPercentile(99))) ms\(dropped)): it read the answers and wrote the "
                + "requests late"
        }
        return "dispatchLag p99 \(millis(p99)) ms (the generator's own lateness) "
            + (p99 > r.maxScheduleLagNanos ? "is above" : "against") + " the bound \(millis(r.maxScheduleLagNanos)) ms"
    }

    /// The loop's busy share, as a percentage ("unknown" when not measured).
    static func busy(_ r: PushResults) -> String {
        r.loopBusyShare.map { String(format: "%.0f%%", $0 * 100) } ?? "unknown"
    }

    /// Why the run is server-limited: its streamWait p99 against the bound, requests queued at the end, or (merged)
    /// the shards that were.
    public static func serverLimitCause(_ r: PushResults) -> String {
        if let shards = r.serverLimitedShards {
            return "shard" + (shards.count == 1 ? " " : "s ") + shards.joined(separator: ", ") + " server-limited"
        }
        var why: [String] = []
        let p99 = r.streamWait.valueAtPercentile(99)
        if p99 > r.maxScheduleLagNanos {
            why.append("streamWait p99 \(millis(p99)) ms (waits for the server's streams) is above the bound "
                + "\(millis(r.maxScheduleLagNanos)) ms")
        }
        if r.queuedAtEnd > 0 { why.append("\(r.queuedAtEnd) requests were still queued for a stream at the end") }
        if r.droppedQueueFull > 0 {
            why.append("\(r.droppedQueueFull) requests \(PushResults.droppedQueueFullKey) (--max-queued)")
        }
        if r.loopBusyShare != nil {
            why.append("the generator's loop busy \(busy(r)) of the run, waiting for the server the rest")
        }
        return why.isEmpty ? "recorded so" : why.joined(separator: "; ")
    }

    static func summaryMarkdown(_ r: PushResults, gitRevision: String?, gate: PushGate) -> String {
        var md = "# fanout push \(r.scenario) → \(r.target)\n\n"
        if r.interrupted {
            md += "**Interrupted** (SIGINT or SIGTERM) after \(String(format: "%.1f", r.elapsedSeconds)) s: what "
            md += "was in flight or queued then is counted unanswered at the end "
            md += "(exit status \(interruptedExitCode)).\n\n"
        }
        if let refused = r.startRefused {
            let code = r.barrier?.timedOut == nil ? startRefusedExitCode : barrierTimedOutExitCode
            md += "**Refused to start**: \(refused); nothing was sent, so that the shards start together or not at "
            md += "all (exit status \(code)).\n\n"
        }
        if r.saturated {
            md += "**Generator saturated**: " + saturationCause(r)
                + ". The latencies below understate the server's: the client could not hold the schedule "
                + "(exit status \(saturatedExitCode)).\n\n"
        }
        if r.serverLimited {
            md += "**Server-limited**: " + serverLimitCause(r)
                + ". The server held the schedule up, not the generator: latency counts from the intended time, "
                + "the wait included, and the thresholds are judged on it.\n\n"
        }
        md += thresholdsMarkdown(gate)
        md += "Seed \(r.seed), \(r.connections) connection\(r.connections == 1 ? "" : "s"), authentication "
        md += "\(r.authenticated ? "ES256 provider tokens (\(r.tokensIssued) issued)" : "none"), commit "
        md += "\(gitRevision ?? "unknown"). Schedule \(String(format: "%.1f", r.scheduleSeconds)) s, run "
        md += "\(String(format: "%.1f", r.elapsedSeconds)) s.\n\n"
        md += "## Requests\n\n"
        if let shard = r.shard {
            md += "Shard \(shard): the events whose index is \(shard.split(separator: "/")[0]) modulo "
            md += "\(shard.split(separator: "/")[1]) (`fanout merge` adds the shards' folders).\n\n"
        } else if r.shards > 1 {
            md += "Merged from \(r.shards) shards (`fanout merge`): counts and histograms added.\n\n"
        }
        md += startMarkdown(r)
        if let t = r.trace {
            md += "Trace `\(t.path)` (\(t.lines) lines, FNV-1a 64 \(t.hash)): \(r.events) of its \(t.pushLines) push "
            md += "lines sent: \(r.tokenPushes) token pushes, \(r.pushToStarts) push-to-start, \(r.broadcasts) "
            md += "broadcasts. Not sent (device-side): "
            md += t.notSent.isEmpty
                ? "none.\n\n" : t.notSent.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                    .joined(separator: ", ") + " lines.\n\n"
        } else {
            md += "\(r.events) events: \(r.tokenPushes) token pushes, \(r.broadcasts) broadcasts.\n\n"
        }
        md += "| sent | answered | failed | unanswered at end | identity |\n|---:|---:|---:|---:|---|\n"
        md += "| \(r.sent) | \(r.answered) | \(r.failed) | \(r.unansweredAtEnd) | "
        md += "\(r.identityHolds ? "holds" : "**broken**") (sent = answered + failed + unanswered at end) |\n\n"
        md += String(format: "Answered %.0f requests/s over the run; ", r.requestsPerSecond)
        md += "peak \(r.peakQueued) queued for a free stream; \(r.queuedAtEnd) still queued at the end.\n\n"
        if !r.byStatus.isEmpty {
            md += "| status | answers |\n|---:|---:|\n"
            for (status, n) in r.byStatus.sorted(by: { $0.key < $1.key }) { md += "| \(status) | \(n) |\n" }
            md += "\n"
        }
        md += MarkdownTable.counts("reason", "answers", r.byReason)
        md += MarkdownTable.counts("failure", "requests", r.failures)
        md += "## Latency (ms)\n\n"
        md += "latency: every request sent, intended time → its end: the answer's END_STREAM, a failure (reset, "
        md += "GOAWAY, …), or the run's end for one unanswered (censored); thresholds judge it (fail closed). "
        md += "answeredLatency: the answered ones alone. A wait for a stream or a connection counts, as wrk2 counts "
        md += "it. dispatchLag: intended time → handed to a connection (the generator's own lateness: saturation). "
        md += "streamWait: handed to a connection → submitted to nghttp2 (the server's stream limit: "
        md += "server-limited). scheduleLag: intended time → submitted (the two together).\n\n"
        let rows = [
            ("latency", r.latency), ("answeredLatency", r.answeredLatency), ("scheduleLag", r.scheduleLag),
            ("dispatchLag", r.dispatchLag), ("streamWait", r.streamWait),
        ]
        md += MarkdownTable.percentiles("metric", rows, value: millis)
        md += "\n## Connections\n\n\(r.reconnects) opened during the run in place of ones that ended or drained "
        md += "(\(r.connectionsDrained) drained, \(r.drainedForStreamIds) of them for their stream ids, "
        md += "\(r.reconnectBackoffs) after a backoff); "
        md += "\(r.retries) requests sent again (never processed: queued at a connection's end or drain, or refused "
        md += "by a GOAWAY or REFUSED_STREAM)"
        md += r.connectionsLost
            ? "; **every connection ended before the schedule did** (the run stopped).\n\n" : ".\n\n"
        for (reason, n) in r.connectionEnds.sorted(by: { $0.key < $1.key }) { md += "- \(n) × \(reason)\n" }
        md += "\nFiles: report.html, latency.hlog (tags " + PushIntervalSpool.tags.joined(separator: ", ")
        md += ", one interval per second from t0), latency.hgrm, answered-latency.hgrm, schedule-lag.hgrm, "
        md += "dispatch-lag.hgrm, stream-wait.hgrm, summary.json.\n"
        return md
    }

    /// The `--threshold` table (nothing without thresholds): met, BROKEN, or why none was judged.
    static func thresholdsMarkdown(_ gate: PushGate) -> String {
        guard !gate.results.isEmpty else { return "" }
        var md = ""
        if let why = gate.notJudged {
            md += "**Thresholds not judged**: \(why).\n\n"
        } else if !gate.broken.isEmpty {
            md += "**Threshold broken**: " + gate.broken.map { "`\($0.threshold)` (\($0.measured))" }
                .joined(separator: ", ") + " (exit status \(PushGate.brokenExitCode)).\n\n"
        }
        md += "| threshold | measured | limit | verdict |\n|---|---:|---|---|\n"
        for t in gate.results {
            let verdict = gate.notJudged != nil ? "not judged" : t.met ? "met" : "**BROKEN**"
            md += "| `\(t.threshold)` | \(t.measured) | \(t.limit) | \(verdict) |\n"
        }
        return md + "\n"
    }
}
