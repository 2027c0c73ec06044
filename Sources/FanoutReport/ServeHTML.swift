import FanoutCore
import FanoutMetrics

/// `report.html` of `fanout serve`: one self-contained page (inline CSS and SVG, no script, nothing loaded):
/// the endpoint, the answers, percentile spectra of the latencies and the stages, requests and p99 over time,
/// the devices' outcomes, connections, and the findings for the backend.
public enum ServeHTML {
    public struct SecondRow: Sendable {
        public var index: Int
        public var requests: Int
        public var serviceP50: UInt64
        public var serviceP99: UInt64
        public var deliveryP99: UInt64
        /// With `--expect-events`: deliveries correlated with an event in that second, and their endToEnd p99.
        public var endToEndCount = 0
        public var endToEndP99: UInt64 = 0
    }

    static func e(_ s: String) -> String { HTMLText.escape(s) }

    static func micros(_ n: UInt64) -> String { Units.duration(n) }

    public static func render(
        _ info: ServeReport.Info, _ s: ServeStats, _ latency: LatencyRecorder, _ a: Accounting, _ c: ConnectionStats,
        _ bytes: (read: Int, written: Int), _ elapsed: Double, seconds: [SecondRow]
    ) -> String {
        let title = "fanout serve: \(info.scenario)"
        var out = HTMLPage.start(title: title)
        out += """
            <header><h1>\(e(title))</h1>
            <p>\(e(info.listen + (info.manageListen.map { ", channel management on \($0)" } ?? ""))) · \(e(info.transport)) · auth \(e(info.auth)) · \(info.workers) event loop\(info.workers == 1 ? "" : "s") · started \(e(info.startedAt)) · served \(String(format: "%.1f", elapsed)) s · seed \(info.seed) · git \(e(info.gitRevision))</p>
            <p>\(Units.grouped(s.requests)) requests (\(Units.grouped(s.acceptedPushes)) pushes and \(Units.grouped(s.acceptedBroadcasts)) broadcasts accepted), \(Units.grouped(a.deliveries)) deliveries, \(Units.grouped(c[.accepted])) connections, \(Units.grouped(bytes.read)) bytes in, \(Units.grouped(bytes.written)) bytes out. Identities: requests \(s.identitiesHold ? "hold" : "BROKEN"), devices \(a.identitiesHold ? "hold" : "BROKEN").</p>
            </header>

            """
        out += backendVerdict(info, latency, seconds)
        out += "<section>\n<h2>Latency</h2>\n"
        out += HTMLReport.spectrum(
            title: "Request and delivery latency percentile spectrum",
            series: [
                ("service", "#E69F00", latency[serve: .service]), ("delivery", "#D55E00", latency[serve: .delivery]),
                ("fanout", "#56B4E9", latency[serve: .fanout]),
            ])
        out += HTMLReport.spectrum(
            title: "Stage percentile spectrum (accepted pushes)",
            series: [("validate", "#0072B2", latency[serve: .validate]), ("route", "#009E73", latency[serve: .route])])
        out += "<p>service: \(ServeMetric.service.about); delivery: \(ServeMetric.delivery.about); "
        out += "fanout: \(ServeMetric.fanout.about).</p>\n</section>\n"
        if let r = info.events { out += events(r, latency) }
        out += overTime(seconds)
        out += trigger(info)
        out += registration(info)
        out += "<section>\n<h2>Answers</h2>\n"
        let statuses = s.byStatus.sorted { $0.key < $1.key }
        out += table(["status", "count"], statuses.map { ["\($0.key)", Units.grouped($0.value)] })
        if !s.byReason.isEmpty {
            let reasons = s.byReason.sorted { $0.key.rawValue < $1.key.rawValue }
            out += table(
                ["reason", "status", "count"],
                reasons.map { [$0.key.rawValue, "\($0.key.status)", Units.grouped($0.value)] })
        }
        out += "</section>\n<section>\n<h2>Devices</h2>\n"
        out += table(["outcome", "count"], Outcome.allCases.map { [$0.name, Units.grouped(a[$0])] })
        out += "</section>\n<section>\n<h2>Findings for the backend</h2>\n<ul>\n"
        let findings = ServeReport.listedFindings(s)
        for (about, n, examples) in findings {
            out += "<li><b>\(e(about))</b>: \(Units.grouped(n))<ul>"
            out += examples.map { "<li><code>\(e($0))</code></li>" }.joined() + "</ul></li>\n"
        }
        if findings.isEmpty { out += "<li>None.</li>\n" }
        out += "</ul>\n</section>\n"
        out += faults(info, c.faults)
        out += "<section>\n<h2>Connections</h2>\n"
        let ends = c.endReasons.sorted { $0.key < $1.key }
        out += table(["how they ended", "count"], ends.map { [$0.key, Units.grouped($0.value)] })
        out += "<p>peak \(c[.peakOpen]) open (summed over loops), \(c[.tlsConnections]) over TLS, "
        out += "\(c[.streamsReset]) streams reset.</p>\n"
        out += "<p>\(e(ServeReport.boundsHit(c)))</p>\n"
        out += "<p>\(e(ServeReport.wireIdentity(s, c, broken: "BROKEN")))</p>\n"
        if info.manageListen != nil { out += "<p>\(e(ServeReport.misplaced(c)))</p>\n" }
        out += "</section>\n"
        out += HTMLPage.end(maker: "fanout serve")
        return out
    }

    /// What `--latency` and `--faults` injected, and which refused pushes came back (only when either was given).
    static func faults(_ info: ServeReport.Info, _ f: FaultCounts) -> String {
        guard info.latency != nil || info.faults != nil else { return "" }
        var out = "<section>\n<h2>Faults injected</h2>\n<p>--latency \(e(info.latency ?? "none")), --faults "
        out += "\(e(info.faults ?? "none")), seed \(info.seed); \(Units.grouped(f[.held])) answers held (at most "
        out += "\(Units.grouped(f[.heldPeak])) at once, \(Units.grouped(f[.heldOverflow])) over the bound).</p>\n"
        out += "<table>\n<tr><th>fault</th><th>injected</th><th>came back</th><th>never did</th></tr>\n"
        let r = f.retries
        for (kind, n) in f.injected {
            let k = RetryCounts.kinds.firstIndex(of: kind)
            let back = k.map { Units.grouped(r.retried[$0]) } ?? ""
            let never = k.map { Units.grouped(r.neverRetried[$0]) } ?? ""
            out += "<tr><td>\(kind)</td><td>\(Units.grouped(n))</td><td>\(back)</td><td>\(never)</td></tr>\n"
        }
        out += "</table>\n"
        if !r.delayNanos.isEmpty {
            let v = r.delayNanos.values(atPercentiles: [50, 99])
            out += "<p>Refusal → retry: p50 \(micros(v[0])), p99 \(micros(v[1])), max \(micros(r.delayNanos.max)); "
            out += "\(Units.grouped(r.untracked)) refused pushes untracked.</p>\n"
        }
        return out + "</section>\n"
    }

    /// Requests per second as bars, service p99 per second as a line (its own scale, right).
    static func overTime(_ rows: [SecondRow]) -> String {
        var out = "<section>\n<h2>Over time</h2>\n"
        guard !rows.isEmpty else { return out + "<p class=\"empty\">No second was recorded.</p>\n</section>\n" }
        let frame = ChartFrame(height: 260, left: 70, rightMargin: 70, top: 14, bottomMargin: 40)
        let maxRequests = Double(max(rows.map(\.requests).max() ?? 1, 1))
        let maxP99 = Double(max(rows.map(\.serviceP99).max() ?? 1, 1))
        let step = (frame.right - frame.left) / Double(rows.count)
        var svg = "<svg viewBox=\"0 0 \(Int(frame.width)) \(Int(frame.height))\" width=\"100%\" role=\"img\">"
        svg += "<title>Requests per second and service p99 per second</title>"
        svg += "<rect x=\"\(frame.left)\" y=\"\(frame.top)\" width=\"\(frame.right - frame.left)\" "
        svg += "height=\"\(frame.bottom - frame.top)\" fill=\"#fbfbfc\"/>"
        var line = ""
        for (i, r) in rows.enumerated() {
            let h = (frame.bottom - frame.top) * Double(r.requests) / maxRequests
            let x = frame.left + Double(i) * step
            svg += String(format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#9ecae1\">", x,
                frame.bottom - h, max(step - 1, 0.5), h)
            svg += "<title>second \(r.index): \(r.requests) requests, service p99 \(micros(r.serviceP99))</title></rect>"
            let y = frame.bottom - (frame.bottom - frame.top) * Double(r.serviceP99) / maxP99
            line += String(format: "%@%.1f,%.1f", line.isEmpty ? "" : " ", x + step / 2, y)
        }
        svg += "<polyline points=\"\(line)\" fill=\"none\" stroke=\"#D55E00\" stroke-width=\"2\"/>"
        // With --expect-events: endToEnd p99 per second (the seconds with deliveries), on its own scale.
        let maxEndToEnd = Double(rows.map(\.endToEndP99).max() ?? 0)
        if maxEndToEnd > 0 {
            var points = ""
            for (i, r) in rows.enumerated() where r.endToEndCount > 0 {
                let y = frame.bottom - (frame.bottom - frame.top) * Double(r.endToEndP99) / maxEndToEnd
                points += String(
                    format: "%@%.1f,%.1f", points.isEmpty ? "" : " ", frame.left + Double(i) * step + step / 2, y)
            }
            svg += "<polyline points=\"\(points)\" fill=\"none\" stroke=\"#CC79A7\" stroke-width=\"2\" "
            svg += "stroke-dasharray=\"6 3\"/>"
            svg += "<text x=\"\(frame.right + 6)\" y=\"\(frame.top + 26)\" font-size=\"12\" fill=\"#CC79A7\">"
            svg += "\(micros(UInt64(maxEndToEnd)))</text>"
        }
        svg += "<text x=\"\(frame.left - 6)\" y=\"\(frame.top + 10)\" text-anchor=\"end\" font-size=\"12\">"
        svg += "\(Units.grouped(Int(maxRequests)))/s</text>"
        svg += "<text x=\"\(frame.right + 6)\" y=\"\(frame.top + 10)\" font-size=\"12\" fill=\"#D55E00\">"
        svg += "\(micros(UInt64(maxP99)))</text>"
        svg += "<text x=\"\((frame.left + frame.right) / 2)\" y=\"\(frame.height - 10)\" text-anchor=\"middle\" "
        svg += "font-size=\"13\">seconds 0–\(rows.count - 1): requests answered (bars), service p99 (line)"
        svg += "\(maxEndToEnd > 0 ? ", endToEnd p99 (dashed)" : "")</text>"
        svg += "</svg>"
        out += "<figure>\n\(svg)\n</figure>\n</section>\n"
        return out
    }

    /// The *Events* section (`--expect-events` only): the counts with their identities, endToEnd and the fan-out
    /// completion spectra, examples.
    static func events(_ r: ServeEventsReport, _ latency: LatencyRecorder) -> String {
        var out = "<section>\n<h2>Events (--expect-events)</h2>\n<table>\n<tr><th>count</th><th>value</th></tr>\n"
        let rows: [(String, Int)] = [
            ("events (due)", r.dueEvents), ("correlated deliveries", r.correlated), ("delivered", r.delivered),
            ("wrong kind", r.wrongKind), ("wrong content", r.wrongContent),
            ("duplicate", r.duplicate), ("reordered", r.reordered), ("not applied", r.notApplied),
            ("uncorrelated", r.uncorrelated), ("expected (event, follower)", r.expected), ("superseded", r.superseded),
            ("missing", r.missing), ("skipped (superseded, never pushed)", r.skipped),
            ("stale at the end", r.staleAtEnd), ("complete events", r.completeEvents),
        ]
        for (name, n) in rows { out += "<tr><td>\(e(name))</td><td>\(Units.grouped(n))</td></tr>\n" }
        out += "</table>\n<p>expected = delivered + wrong + superseded + missing: "
        out += "\(r.pairsAddUp ? "holds" : "BROKEN"); correlated = delivered + wrong + duplicate + reordered + not "
        out += "applied: \(r.deliveriesAddUp ? "holds" : "BROKEN") (wrong: of the wrong kind or content)."
        out += "</p>\n"
        if r.rotations != nil { out += "<p>" + e(ServeReport.rotationsLine(r)) + "</p>\n" }
        if r.appEvents != nil { out += "<p>" + e(ServeReport.appEventsLine(r)) + "</p>\n" }
        out += kickoff(r)
        if r.missing > 0 {
            out += "<table>\n<tr><th>missing, by reason</th><th>count</th><th>example</th></tr>\n"
            for (reason, n) in ServeReport.sortedReasons(r) {
                let example = r.missingReasonExamples[reason]?.first.map { "<code>\(e($0))</code>" } ?? ""
                out += "<tr><td>\(e(reason))</td><td>\(Units.grouped(n))</td><td>\(example)</td></tr>\n"
            }
            out += "</table>\n<p>missing = Σ by reason: \(r.reasonsAddUp ? "holds" : "BROKEN").</p>\n"
        }
        let f = r.refusals
        if f.pushes + f.broadcasts > 0 {
            out += "<p>Refused by --faults and never resent: \(f.pushes) token pushes, \(f.broadcasts) broadcasts "
            out += "(\(f.unmatched) carrying no follower's event); \(f.pairs) (event, follower) pairs = \(f.missing) "
            out += "missing + \(f.superseded) superseded + \(f.delivered) delivered + \(f.notDue) not due: "
            out += (f.addsUp ? "holds" : "BROKEN") + ".</p>\n"
        }
        out += HTMLReport.spectrum(
            title: "End-to-end and fan-out completion percentile spectrum",
            series: [
                ("endToEnd", "#CC79A7", latency[serve: .endToEnd]),
                ("freshness", "#D55E00", r.freshness),
                ("fanoutCompletion", "#56B4E9", r.completion[.fanoutCompletion]),
            ])
        out += "<p>endToEnd: \(e(ServeMetric.endToEnd.about)) (delivered pairs only); freshness: every expected "
        out += "(event, follower) pair until the follower showed it or a newer event, \(r.freshnessCensored) missing "
        out += "or still shown wrong censored at the horizon; fanoutCompletion: every due event until its last follower showed it or a "
        out += "newer event, \(r.completionCensored) censored.</p>\n"
        for (title, list) in r.exampleLists where !list.isEmpty {
            out += "<p>\(e(title)):</p>\n<ul>\n"
            for x in list { out += "<li><code>\(e(x))</code></li>\n" }
            out += "</ul>\n"
        }
        return out + "</section>\n"
    }
}
