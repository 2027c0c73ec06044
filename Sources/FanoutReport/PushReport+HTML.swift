import FanoutMetrics
import Foundation

/// `report.html` of `fanout push`: one self-contained page (the run report's inline CSS and SVG; no script, nothing
/// loaded). The verdict first (was the generator saturated or the server the limit, and why; what was answered;
/// failures; thresholds; start skew), then the percentile spectra, answers and latency and scheduleLag per second from
/// latency.hlog's intervals, the answers by status and reason, the connections, and the percentile table.
public enum PushHTML {
    static func e(_ s: String) -> String { HTMLText.escape(s) }

    static let latencyColor = "#D55E00"
    static let lagColor = "#6b6b6b"
    static let answeredColor = "#E69F00"
    static let dispatchColor = "#0072B2"
    static let waitColor = "#009E73"

    /// Every histogram of the run, named and coloured, in the table's order.
    static func metrics(_ r: PushResults) -> [(String, String, LatencyHistogram)] {
        [
            ("latency", latencyColor, r.latency), ("answeredLatency", answeredColor, r.answeredLatency),
            ("scheduleLag", lagColor, r.scheduleLag), ("dispatchLag", dispatchColor, r.dispatchLag),
            ("streamWait", waitColor, r.streamWait),
        ]
    }

    public static func render(_ r: PushResults, gitRevision: String?, gate: PushGate) throws -> String {
        let title = "fanout push: \(r.scenario) → \(r.target)"
        var out = HTMLPage.start(title: title)
        out += header(r, title: title, gitRevision: gitRevision)
        out += verdict(r, gate)
        out += tiles(r)
        out += "</header>\n"
        out += spectra(r)
        out += try overTime(r)
        out += answers(r)
        out += connections(r)
        out += percentileTable(r)
        out += HTMLPage.end(maker: "fanout push (git \(e(gitRevision ?? "unknown")))")
        return out
    }

    static func header(_ r: PushResults, title: String, gitRevision: String?) -> String {
        let slice =
            r.shard.map { "shard \($0)" } ?? (r.shards > 1 ? "merged from \(r.shards) shards" : "whole schedule")
        let streams = r.streams > 0 ? " × \(r.streams) streams" : ""
        var out = "<header>\n<h1>\(e(title))</h1>\n<p class=\"sub\">\(r.connections) connection"
        out += "\(r.connections == 1 ? "" : "s")\(streams) · auth "
        out += r.authenticated ? "ES256 provider tokens" : "none"
        out += " · seed \(r.seed) · config <code>\(e(r.configHash))</code> · \(e(slice)) · schedule "
        out += String(format: "%.1f s, run %.1f s", r.scheduleSeconds, r.elapsedSeconds)
        out += " · git <code>\(e(gitRevision ?? "unknown"))</code></p>\n"
        return out
    }

    /// Saturated or not and why, answered of sent, failures, unanswered, thresholds, start skew, the exit status.
    static func verdict(_ r: PushResults, _ gate: PushGate) -> String {
        let code = gate.exitCode(r)
        var items: [String] = []
        for (name, h, side) in [
            ("dispatchLag", r.dispatchLag, "the generator's own lateness: saturated above it"),
            ("streamWait", r.streamWait, "waits for the server's streams: server-limited above it"),
        ] {
            let p99 = h.valueAtPercentile(99)
            items.append(
                "\(name) p99 \(Units.duration(p99)) "
                    + (p99 > r.maxScheduleLagNanos ? "<b class=\"bad\">above</b>" : "within")
                    + " the bound \(Units.duration(r.maxScheduleLagNanos)) (--max-schedule-lag; \(side))")
        }
        if let share = r.loopBusyShare {
            items.append(
                "the generator's loop busy " + String(format: "%.0f%%", share * 100) + " of the run ("
                    + (share >= PushResults.busyLoopShare
                        ? "<b class=\"bad\">busy</b>: requests that waited for streams waited for it)"
                        : "waiting for events the rest: a wait for streams is the server's)"))
        }
        if let shards = r.saturatedShards, !shards.isEmpty {
            items.append("<b class=\"bad\">saturated shards: \(e(shards.joined(separator: ", ")))</b>")
        }
        if let shards = r.serverLimitedShards, !shards.isEmpty {
            items.append("server-limited shards: \(e(shards.joined(separator: ", ")))")
        }
        items.append(
            "peak \(Units.grouped(r.peakQueued)) queued for a free stream; "
                + (r.queuedAtEnd > 0 && !r.interrupted
                    ? "<b class=\"bad\">\(Units.grouped(r.queuedAtEnd)) still queued at the end</b>"
                    : "\(Units.grouped(r.queuedAtEnd)) queued at the end"))
        items.append(
            "\(Units.grouped(r.answered)) of \(Units.grouped(r.sent)) requests answered ("
                + HTMLText.escape(percent(r.answered, r.sent)) + "), \(Units.grouped(r.failed)) failed, "
                + "\(Units.grouped(r.unansweredAtEnd)) unanswered at the end; sent = answered + failed + unanswered: "
                + (r.identityHolds ? "holds" : "<b class=\"bad\">BROKEN</b>"))
        if !r.failures.isEmpty {
            items.append(
                "failures: " + r.failures.sorted { $0.key < $1.key }.map { "\(e($0.key)) \(Units.grouped($0.value))" }
                    .joined(separator: ", "))
        }
        if let requested = r.requestedStartSeconds {
            let skew = r.startSkewNanos.map { String(format: "%.3f ms", Double($0) / 1e6) } ?? "unknown"
            let spread = r.shardStarts?.spreadNanos.map { String(format: "%.3f ms", Double($0) / 1e6) }
            items.append(
                "start at \(String(format: "%.3f", requested)) ("
                    + (r.barrier == nil ? "--start-at" : "fixed by --barrier") + "): start skew \(skew)" + (r.shards > 1 ? ", the largest of the shards'" : "")
                    + (spread.map { "; shard starts spread \($0)" } ?? ""))
        }
        if r.interrupted { items.append("<b class=\"bad\">interrupted</b> by SIGINT or SIGTERM") }
        if r.connectionsLost { items.append("<b class=\"bad\">every connection ended before the schedule did</b>") }
        let ok = code == 0
        var out = "<div class=\"identities \(ok ? "ok" : "broken")\"><strong>"
        if !r.identityHolds || r.connectionsLost {
            out += "✗ the run failed"
        } else if r.interrupted {
            out += "✗ interrupted: partial numbers"
        } else if r.saturated {
            out += "✗ generator saturated: these latencies understate the server's"
        } else if !gate.broken.isEmpty {
            out += "✗ threshold broken: " + gate.broken.map { e($0.threshold) }.joined(separator: ", ")
                + (r.serverLimited ? " (server-limited: the server held the schedule up)" : "")
        } else if r.serverLimited {
            out += "server-limited: the server held the schedule up, not the generator; latency counts from the "
                + "intended time" + (gate.results.isEmpty ? "" : "; every threshold met")
        } else {
            out += "✓ the generator held the schedule" + (gate.results.isEmpty ? "" : "; every threshold met")
        }
        out += "</strong><span>exit status \(code)</span></div>\n<ul class=\"verdict\">\n"
        for item in items { out += "<li>\(item)</li>\n" }
        out += "</ul>\n"
        if !gate.results.isEmpty {
            out += "<table>\n<thead><tr><th>threshold</th><th class=\"n\">measured</th><th>limit</th><th>verdict</th>"
            out += "</tr></thead>\n<tbody>\n"
            for t in gate.results {
                let v = gate.notJudged != nil ? "not judged" : t.met ? "met" : "<b class=\"bad\">BROKEN</b>"
                out += "<tr><td><code>\(e(t.threshold))</code></td><td class=\"n\">\(e(t.measured))</td>"
                out += "<td>\(e(t.limit))</td><td>\(v)</td></tr>\n"
            }
            out += "</tbody>\n</table>\n"
            if let why = gate.notJudged { out += "<p class=\"note\">Not judged: \(e(why)).</p>\n" }
        }
        return out
    }

    /// Which histogram is which.
    static let metricNote =
        "latency: every request sent, its intended time → its end: the answer's END_STREAM, a failure (reset, "
        + "GOAWAY, connection ended, no connection), or the run's end for one unanswered (censored) — what "
        + "--threshold latency.… judges (fail closed); answeredLatency: the answered requests alone (a wait for a "
        + "stream or a connection counts in both: coordinated omission accounted for); dispatchLag: intended time → "
        + "handed to a connection (the generator's own lateness); streamWait: handed to a connection → submitted to "
        + "nghttp2 (the server's stream limit); scheduleLag: intended time → submitted (the two together)."

    static func percent(_ part: Int, _ whole: Int) -> String { HTMLText.percent(Double(part), of: Double(whole)) }

    static func tiles(_ r: PushResults) -> String {
        let l = LatencySummary(r.latency)
        let g = LatencySummary(r.dispatchLag)
        let w = LatencySummary(r.streamWait)
        func d(_ s: LatencySummary, _ v: UInt64) -> String { s.count > 0 ? Units.duration(v) : "–" }
        let tiles: [(String, String, String)] = [
            ("sent", Units.grouped(r.sent), "\(Units.grouped(r.events)) events"),
            ("answered", Units.grouped(r.answered), String(format: "%.0f per second", r.requestsPerSecond)),
            ("latency p50", d(l, l.p50), "median"), ("latency p99", d(l, l.p99), "1 in 100 slower"),
            ("latency p99.9", d(l, l.p999), "1 in 1,000 slower"),
            ("latency max", d(l, l.max), "\(Units.grouped(Int(l.count))) values"),
            ("dispatchLag p99", d(g, g.p99), "bound \(Units.duration(r.maxScheduleLagNanos)): the generator"),
            ("streamWait p99", d(w, w.p99), "bound \(Units.duration(r.maxScheduleLagNanos)): the server"),
            ("peak queued", Units.grouped(r.peakQueued), "waiting for a free stream"),
        ]
        var out = "<div class=\"tiles\">\n"
        for (k, v, note) in tiles {
            out += "<div class=\"tile\"><span>\(k)</span><b>\(v)</b><small>\(e(note))</small></div>\n"
        }
        return out + "</div>\n"
    }

    static func spectra(_ r: PushResults) -> String {
        var out = "<section>\n<h2>Latency percentile spectrum</h2>\n"
        out += "<p class=\"note\">As HdrHistogram's plotter: the x axis is log(1/(1−p)), every “nine” the same width; "
        out += "latency on a log scale. " + metricNote + "</p>\n"
        out += HTMLReport.spectrum(
            title: "Request latency and schedule lag percentile spectrum",
            series: metrics(r).filter { !$0.2.isEmpty })
        return out + "</section>\n"
    }

    /// latency.hlog's intervals of `latency` and of `scheduleLag`, in order (second k of the run, or of every shard
    /// added).
    /// Read from the run's spool one interval at a time: only the seconds' summaries are held.
    static func seconds(_ r: PushResults) throws -> (latency: [HTMLReport.Second], lag: [HTMLReport.Second]) {
        var latency: [HTMLReport.Second] = [], lag: [HTMLReport.Second] = []
        try r.forEachInterval { i in
            guard i.tag == "latency" || i.tag == "scheduleLag" else { return }
            // The spool's summary, made when the second closed; a merged folder's intervals are decoded here.
            let summary = i.summary ?? (try? LatencyHistogram(decoding: i.compressed)).map(LatencySummary.init)
            let second = HTMLReport.Second(start: i.startSeconds, length: i.lengthSeconds, summary: summary)
            if i.tag == "latency" { latency.append(second) } else { lag.append(second) }
        }
        return (latency, lag)
    }

    static func overTime(_ r: PushResults) throws -> String {
        let (latency, lag) = try seconds(r)
        var out = "<section>\n<h2>Over time</h2>\n<p class=\"note\">From latency.hlog, one interval per second of the "
        out += "run (second k of every shard added in a merged folder): answers per second = latency values in the "
        out += "interval ÷ its length, by the second they were answered in; a bar of several intervals shows the "
        out += "latencies of its interval with the highest p99 (never averaged). Grey: the drain after the schedule."
        out += "</p>\n"
        out += HTMLReport.rateOverTime(latency, scheduledEnd: r.scheduleSeconds, rateLabel: "answers per second")
        out += HTMLReport.percentilesOverTime(
            latency, scheduledEnd: r.scheduleSeconds, metric: "latency", title: "Request latency over time")
        out += HTMLReport.percentilesOverTime(
            lag, scheduledEnd: r.scheduleSeconds, metric: "scheduleLag", title: "Schedule lag over time")
        return out + "</section>\n"
    }

    static func answers(_ r: PushResults) -> String {
        var out = "<section>\n<h2>Answers</h2>\n"
        let statuses = r.byStatus.sorted { $0.key < $1.key }.map { s, n in
            ("\(s)", n, s == 200 ? "#009E73" : s == 429 || s >= 500 ? "#D55E00" : "#E69F00")
        }
        var outcomes = statuses
        for (kind, n) in r.failures.sorted(by: { $0.key < $1.key }) {
            outcomes.append(("failed · \(kind)", n, "#7b3294"))
        }
        if r.unansweredAtEnd > 0 { outcomes.append(("unanswered at the end", r.unansweredAtEnd, "#8a929e")) }
        out += HTMLReport.bars(
            title: "Requests by status, failure and end", unit: "requests", rows: outcomes, whole: r.sent)
        let reasons = r.byReason.sorted { $0.key < $1.key }.map { ($0.key, $0.value, "#E69F00") }
        out += HTMLReport.bars(title: "Answers by reason", unit: "answers", rows: reasons, whole: r.answered)
        return out + "</section>\n"
    }

    static func connections(_ r: PushResults) -> String {
        var out = "<section>\n<h2>Connections</h2>\n<dl class=\"meta\">\n"
        let rows: [(String, String)] = [
            ("target", "<code>\(e(r.target))</code>"),
            ("connections", "\(r.connections)" + (r.streams > 0 ? " × at most \(r.streams) streams each" : "")),
            ("authentication", r.authenticated ? "ES256 (\(r.tokensIssued) provider tokens issued)" : "none"),
            ("schedule", r.shard.map { "shard \(e($0)): the events whose index is K modulo N" }
                ?? (r.shards > 1 ? "merged from \(r.shards) shards" : "whole")),
            ("reconnects", "\(Units.grouped(r.reconnects)) (connections opened in place of ones that ended or "
                + "drained; \(Units.grouped(r.connectionsDrained)) drained — a GOAWAY, their stream ids' end —, "
                + "\(Units.grouped(r.drainedForStreamIds)) of them for their stream ids, "
                + "\(Units.grouped(r.reconnectBackoffs)) attempts after a backoff)"),
            ("retries", "\(Units.grouped(r.retries)) requests sent again (never processed by the server)"),
            ("scenario events", "\(Units.grouped(r.events)): \(Units.grouped(r.tokenPushes)) token pushes, "
                + "\(Units.grouped(r.broadcasts)) broadcasts"),
        ]
        for (k, v) in rows { out += "<dt>\(k)</dt><dd>\(v)</dd>\n" }
        out += "</dl>\n<table>\n<thead><tr><th>how connections ended</th><th class=\"n\">count</th></tr></thead>\n"
        out += "<tbody>\n"
        if r.connectionEnds.isEmpty { out += "<tr><td>none recorded</td><td class=\"n\">0</td></tr>\n" }
        for (reason, n) in r.connectionEnds.sorted(by: { $0.key < $1.key }) {
            out += "<tr><td>\(e(reason))</td><td class=\"n\">\(Units.grouped(n))</td></tr>\n"
        }
        return out + "</tbody>\n</table>\n</section>\n"
    }

    static func percentileTable(_ r: PushResults) -> String {
        var out = "<section>\n<h2>Percentiles</h2>\n<table class=\"percentiles\">\n<thead><tr><th>metric</th>"
        for h in ["count", "mean", "p50", "p90", "p99", "p99.9", "p99.99", "max"] { out += "<th class=\"n\">\(h)</th>" }
        out += "</tr></thead>\n<tbody>\n"
        for (name, color, h) in metrics(r) {
            let l = LatencySummary(h)
            out += "<tr><td><i class=\"swatch\" style=\"background:\(color)\"></i>\(name)</td>"
            out += "<td class=\"n\">\(Units.grouped(Int(l.count)))</td>"
            if l.count > 0 {
                let mean = UInt64(l.mean.isFinite ? max(l.mean.rounded(), 0) : 0)
                for v in [mean, l.p50, l.p90, l.p99, l.p999, l.p9999, l.max] {
                    out += "<td class=\"n\">\(Units.duration(v))</td>"
                }
            } else {
                out += String(repeating: "<td class=\"n muted\">–</td>", count: 7)
            }
            out += "</tr>\n"
        }
        out += "</tbody>\n</table>\n<p class=\"note\">" + metricNote + " The same numbers as summary.md; full "
        out += "distributions in latency.hgrm, answered-latency.hgrm, schedule-lag.hgrm, dispatch-lag.hgrm and "
        out += "stream-wait.hgrm, per second in latency.hlog.</p>\n</section>\n"
        return out
    }
}
