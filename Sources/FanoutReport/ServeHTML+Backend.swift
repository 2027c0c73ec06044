import FanoutMetrics

/// report.html's view of the user's backend (`--trigger`, `--register`, `--expect-events`): what it delivered and
/// what it did not, the trigger and the registration.
extension ServeHTML {
    /// The verdict at the top: missing and stale deliveries, endToEnd and whether it grew during the run, the
    /// events the backend accepted and the activities it registered. Each sentence from a count of this run.
    static func backendVerdict(_ info: ServeReport.Info, _ latency: LatencyRecorder, _ rows: [SecondRow]) -> String {
        guard info.events != nil || info.trigger != nil || info.registration != nil else { return "" }
        let verdict = ServeReport.verdict(info, latency)
        var lines: [String] = [
            (verdict.status == .passed ? "<b>Verdict: " : "<b class=\"bad\">Verdict: ") + e(verdict.line) + "</b>"
        ]
        if let r = info.events {
            if r.missing == 0 {
                lines.append("<b>No expected delivery missing</b>: all \(Units.grouped(r.expected)) (event, follower) "
                    + "pairs due were delivered (\(Units.grouped(r.delivered))) or superseded by a newer event "
                    + "(\(Units.grouped(r.superseded))).")
            } else {
                let share = Double(r.missing) / Double(max(r.expected, 1)) * 100
                lines.append("<b class=\"bad\">\(Units.grouped(r.missing)) of \(Units.grouped(r.expected)) expected "
                    + "deliveries missing</b> (" + String(format: "%.2f%%", share) + ", in \(Units.grouped(r.eventsWithMissing)) "
                    + "events): due at least --settle (\(e(String(format: "%g", Double(r.settleNanos) / 1e9))) s) before "
                    + "shutdown, "
                    + "never received by their followers.")
            }
            if r.staleAtEnd > 0 {
                lines.append("<b class=\"bad\">\(Units.grouped(r.staleAtEnd)) followers stale at the end</b>: not on "
                    + "their source's last due event when the run ended.")
            }
            let bad = [("uncorrelated", r.uncorrelated), ("duplicate", r.duplicate)].filter { $0.1 > 0 }
            if !bad.isEmpty {
                lines.append(bad.map { "\(Units.grouped($0.1)) \($0.0)" }.joined(separator: ", ")
                    + " deliveries (see Events).")
            }
            let h = latency[serve: .endToEnd]
            if !h.isEmpty {
                let v = h.values(atPercentiles: [50, 99])
                lines.append("<b>endToEnd</b> (event's intended time → applied on the device, through the backend): "
                    + "p50 \(micros(v[0])), p99 \(micros(v[1])), max \(micros(h.max)) over "
                    + "\(Units.grouped(Int(h.totalCount))) deliveries.")
            }
            if let growth = endToEndGrowth(rows) { lines.append(growth) }
        }
        if let t = info.trigger {
            let errors = t.errors.values.reduce(0, +)
            let refused = t.answered - t.successes
            var parts: [String] = []
            for (n, what) in [
                (refused, "answered other than 2xx"), (t.timeouts, "timed out"), (errors, "failed"),
                (t.unsentAtShutdown, "due but unsent at shutdown"),
            ] where n > 0 {
                parts.append("\(Units.grouped(n)) \(what)")
            }
            // A request still in flight at shutdown was cancelled: not a refusal, said as it is.
            let inFlight = t.cancelledAtShutdown > 0 ? "\(Units.grouped(t.cancelledAtShutdown)) still in flight at shutdown; " : ""
            let lag = "the trigger's schedule lag p99 \(micros(t.scheduleLagNanos.values(atPercentiles: [99])[0]))"
                + (t.waitedForSlot > 0
                    ? ", \(Units.grouped(t.waitedForSlot)) events waited for a free slot (answers slower than the rate)"
                    : "")
            lines.append(
                (parts.isEmpty
                    ? "The backend accepted every event it answered: \(Units.grouped(t.successes)) of "
                        + "\(Units.grouped(t.sent)) triggers answered 2xx; "
                    : "<b class=\"bad\">The backend accepted \(Units.grouped(t.successes)) of \(Units.grouped(t.sent)) "
                        + "events</b> (" + parts.joined(separator: ", ") + byURLText(t.byURL) + "); ") + inFlight + lag
                    + ".")
        }
        if let g = info.registration {
            lines.append(g.registered == g.activities
                ? "Every activity registered (\(Units.grouped(g.activities)))."
                : "<b class=\"bad\">\(Units.grouped(g.activities - g.registered)) of \(Units.grouped(g.activities)) "
                    + "activities not registered</b> (\(Units.grouped(g.failed)) failed, "
                    + "\(Units.grouped(g.unregisteredAtDeadline)) at the deadline).")
        }
        return "<section>\n<h2>Through your backend</h2>\n<ul>\n"
            + lines.map { "<li>\($0)</li>\n" }.joined() + "</ul>\n</section>\n"
    }

    /// Several instances with failures: "; by URL: http://a/t none; http://b/t 38 answered 500" ("" otherwise).
    static func byURLText(_ rows: [BackendURLResults]) -> String {
        guard rows.count > 1, rows.contains(where: { $0.failures > 0 }) else { return "" }
        return e("; by URL: " + BackendURLResults.failureText(rows))
    }

    /// When the backend falls behind, endToEnd grows while the run goes on: the median of the per-second endToEnd
    /// p99 in the first third of the seconds with deliveries against the last third. nil: too few seconds.
    static func endToEndGrowth(_ rows: [SecondRow]) -> String? {
        let measured = rows.filter { $0.endToEndCount > 0 }
        guard measured.count >= 6 else { return nil }
        let third = measured.count / 3
        func median(_ part: ArraySlice<SecondRow>) -> UInt64 {
            let v = part.map(\.endToEndP99).sorted()
            return v[v.count / 2]
        }
        let first = median(measured.prefix(third))
        let last = median(measured.suffix(third))
        let text = "the median of each second's endToEnd p99 was \(micros(first)) in the first third of the run and "
            + "\(micros(last)) in the last"
        if last > 2 * first && last > 10_000_000 {
            return "<b class=\"bad\">endToEnd grew during the run</b>: \(text): a backlog growing (the backend, or "
                + "this machine, behind the rate) or the scenario's own rate rising (see Over time)."
        }
        return "endToEnd held steady: \(text)."
    }

    /// The *Trigger* section (`--trigger`): counts, answers, errors, the response and schedule-lag spectra.
    static func trigger(_ info: ServeReport.Info) -> String {
        guard let t = info.trigger else { return "" }
        var out = "<section>\n<h2>Trigger</h2>\n<p>POST \(e(t.url)), at most \(t.concurrency) in flight"
        out += ServeReport.peakInFlight(t)
        out += ": \(Units.grouped(t.sent)) events sent, \(Units.grouped(t.successes)) answered 2xx, "
        out += "\(Units.grouped(t.timeouts)) timed out, \(Units.grouped(t.errors.values.reduce(0, +))) failed, "
        out += "\(Units.grouped(t.cancelledAtShutdown)) cancelled at shutdown, \(Units.grouped(t.unsentAtShutdown)) "
        out += "due but unsent at shutdown, \(Units.grouped(t.waitedForSlot)) waited for a free slot. sent = answered "
        out += "+ timeouts + errors + cancelled: \(t.identityHolds ? "holds" : "BROKEN").</p>\n"
        out += backendTables(
            t.counts, t.byURL, addsUp: t.byURLAddsUp, cancelled: "cancelled at shutdown", unsent: "unsent at shutdown")
        out += HTMLReport.spectrum(
            title: "Trigger percentile spectrum (from each event's intended time)",
            series: [("response", "#0072B2", t.responseNanos), ("scheduleLag", "#E69F00", t.scheduleLagNanos)])
        out += "<p>response: intended time → the backend's answer (answered requests); scheduleLag: intended time → "
        out += "the request leaving (fanout's lag, or a wait for a free slot; a connection's setup left out).</p>\n"
        return out + "</section>\n"
    }

    /// The *Registration* section (`--register`).
    static func registration(_ info: ServeReport.Info) -> String {
        guard let g = info.registration else { return "" }
        var out = "<section>\n<h2>Registration</h2>\n<p>POST \(e(g.url)) before serving started, "
        out += String(format: "%.2f s", g.elapsedSeconds) + ": \(Units.grouped(g.registered)) of "
        out += "\(Units.grouped(g.activities)) activities registered, \(Units.grouped(g.failed)) failed after every "
        out += "attempt, \(Units.grouped(g.unregisteredAtDeadline)) unregistered at the deadline; "
        out += "\(Units.grouped(g.requests)) requests (\(Units.grouped(g.retries)) retries), "
        out += "\(Units.grouped(g.timeouts)) timeouts. activities = registered + failed + unregistered: "
        out += "\(g.identityHolds ? "holds" : "BROKEN").</p>\n"
        out += backendTables(
            g.counts, g.byURL, addsUp: g.byURLAddsUp, cancelled: "cancelled at the deadline",
            unsent: "unsent at the deadline")
        return out + "</section>\n"
    }

    /// A backend sender's tables (the trigger's, the registration's): its answers by status, its errors, and its
    /// per-URL table when it had several URLs.
    static func backendTables(
        _ counts: BackendCounts, _ byURL: [BackendURLResults], addsUp: Bool, cancelled: String, unsent: String
    ) -> String {
        countTable("answer", counts.byStatus.sorted { $0.key < $1.key }.map { (String($0.key), $0.value) })
            + countTable("error", counts.errors.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
            + byURLTable(byURL, addsUp: addsUp, cancelled: cancelled, unsent: unsent)
    }

    static func countTable(_ name: String, _ rows: [(String, Int)]) -> String {
        guard !rows.isEmpty else { return "" }
        return table([name, "count"], rows.map { [$0.0, Units.grouped($0.1)] })
    }

    /// A table of `header`'s cells, then a row per `rows`' cells, every cell escaped (no rows: the header alone).
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        "<table>\n<tr>" + header.map { "<th>\(e($0))</th>" }.joined() + "</tr>\n"
            + rows.map { "<tr>" + $0.map { "<td>\(e($0))</td>" }.joined() + "</tr>\n" }.joined() + "</table>\n"
    }
}
