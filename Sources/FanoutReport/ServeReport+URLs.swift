import FanoutMetrics

/// Several instances of the backend (`--trigger A,B`, `--register A,B`): each URL's counts in summary.json
/// (`trigger.byURL`, `registration.byURL`, one row per URL, one row with one URL), summary.md and report.html (a
/// table when there are several URLs), and the identity that they add up to the totals (`byURLAddsUp`).
extension ServeReport {
    /// summary.json's `byURL` rows.
    static func byURLJSON(_ rows: [BackendURLResults], cancelled: String, unsent: String) -> [[String: Any]] {
        rows.map { r in
            [
                "url": r.url, "sent": r.sent, "byStatus": byStatus(r.byStatus), "successes": r.successes,
                "failures": r.failures,
                "timeouts": r.timeouts, "errors": r.errors, cancelled: r.cancelled, unsent: r.unsent,
                "waitedForSlot": r.waitedForSlot, "peakInFlight": r.peakInFlight, "neverLeft": r.neverLeft,
                "response": percentiles(r.responseNanos), "scheduleLag": percentiles(r.scheduleLagNanos),
                "identityHolds": r.identityHolds,
            ]
        }
    }

    /// The per-URL table's header and rows (summary.md and report.html): the counts, then the answered requests'
    /// response p50 and p99 and the schedule lag p99, in milliseconds.
    static func byURLRows(_ rows: [BackendURLResults], cancelled: String, unsent: String) -> [[String]] {
        let header = [
            "URL", "sent", "2xx", "failed", "timeouts", "errors", cancelled, unsent, "waited for a slot",
            "never left", "response p50 ms", "response p99 ms", "schedule lag p99 ms",
        ]
        func ms(_ nanos: UInt64) -> String { String(format: "%.1f", Double(nanos) / 1e6) }
        return [header] + rows.map { r in
            let response = r.responseNanos.values(atPercentiles: [50, 99])
            return [
                r.url, String(r.sent), String(r.successes), String(r.failures), String(r.timeouts),
                String(r.errors.values.reduce(0, +)), String(r.cancelled), String(r.unsent), String(r.waitedForSlot),
                String(r.neverLeft), ms(response[0]), ms(response[1]),
                ms(r.scheduleLagNanos.valueAtPercentile(99)),
            ]
        }
    }

    /// summary.md's *By URL* table and its identity line (only with several URLs).
    static func byURLMarkdown(_ rows: [BackendURLResults], addsUp: Bool, cancelled: String, unsent: String) -> String {
        guard rows.count > 1 else { return "" }
        let table = byURLRows(rows, cancelled: cancelled, unsent: unsent)
        var md = "By URL (each request counted where it was sent and where it ended; failed = non-2xx + timeouts + "
        md += "errors):\n\n"
        md += "| " + table[0].joined(separator: " | ") + " |\n"
        md += "|---" + String(repeating: "|---:", count: table[0].count - 1) + "|\n"
        for row in table.dropFirst() { md += "| " + row.joined(separator: " | ") + " |\n" }
        md += "\nThe per-URL counts add up to the totals: " + (addsUp ? "holds.\n\n" : "**BROKEN**.\n\n")
        return md
    }
}

extension ServeHTML {
    /// report.html's per-URL table and its identity (only with several URLs).
    static func byURLTable(_ rows: [BackendURLResults], addsUp: Bool, cancelled: String, unsent: String) -> String {
        guard rows.count > 1 else { return "" }
        let table = ServeReport.byURLRows(rows, cancelled: cancelled, unsent: unsent)
        var out = "<table>\n<tr>" + table[0].map { "<th>\(e($0))</th>" }.joined() + "</tr>\n"
        for row in table.dropFirst() { out += "<tr>" + row.map { "<td>\(e($0))</td>" }.joined() + "</tr>\n" }
        out += "</table>\n<p>The per-URL counts add up to the totals: \(addsUp ? "holds" : "BROKEN").</p>\n"
        return out
    }
}
