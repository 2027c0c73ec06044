import FanoutMetrics

/// Kickoff by push-to-start (`faults.kickoff`, docs/INGEST.md §5, *Kickoff*) in serve's folder: summary.json's
/// `events.kickoff`, `events.kickoffNotStarted` and `events.kickoffNotRegistered`, a paragraph and a table of
/// summary.md's *Events* and of report.html's. Nothing is written for a scenario without a kickoff.
extension ServeReport {
    static func addKickoff(_ r: ServeEventsReport, to out: inout [String: Any]) {
        guard let c = r.kickoff else { return }
        let object: [String: Any] = [
            "sources": c.sources, "activities": c.activities, "due": c.due, "started": c.started,
            "startedEarly": c.startedEarly, "notStarted": c.notStarted, "notStartedByReason": c.notStartedByReason,
            "notStartedExamples": c.notStartedExamples, "startBudget": c.startBudget,
            "budgetRefusals": c.budgetRefusals, "unexpectedStarts": c.unexpectedStarts, "followed": c.followed,
            "registration": telling(
                c.registration, done: "registered", pending: "unregisteredAtShutdown", sent: "sent"),
            "toLockScreen": percentiles(c.toLockScreen), "toRegistered": percentiles(c.toRegistered),
            "toFirstUpdate": percentiles(c.toFirstUpdate),
        ]
        let identity = "due + startedEarly = started + notStarted, notStarted = Σ notStartedByReason, started = "
            + "registration.registered + registration.failed + registration.unregisteredAtShutdown"
        addChanges(
            "kickoff", object, identity, holds: c.addsUp, sentPast: ("kickoffNotStarted", c.notStarted), to: &out)
        out["kickoffNotRegistered"] = c.registration.failed + c.registration.pendingAtShutdown
    }

    /// One sentence: the starts due, made and missed, the registrations, the budget.
    static func kickoffLine(_ r: ServeEventsReport) -> String {
        guard let c = r.kickoff else { return "" }
        var line = "Kickoff by push-to-start: \(c.sources) sources, \(c.activities) activities waiting for their "
        line += "start, \(c.due) due by the horizon; \(c.started) started (\(c.startedEarly) before their start "
        line += "was due), \(c.notStarted) not started (kickoffNotStarted); \(c.budgetRefusals) start pushes refused by a "
        line += "device's budget of \(c.startBudget), \(c.unexpectedStarts) naming no activity waiting to start. "
        line += "Registered by the app: \(c.registration.done), failed \(c.registration.failed), not registered when "
        line += "serving stopped \(c.registration.pendingAtShutdown) (kickoffNotRegistered: "
        line += "\(c.registration.failed + c.registration.pendingAtShutdown)); \(c.followed) got an update since. "
        line += "Identities: " + (c.addsUp ? "hold" : "BROKEN") + "."
        return line
    }

    /// The kickoff latency rows: from the start event's intended time to each step.
    static func kickoffRows(_ c: ServeEventsReport.Kickoff) -> [(String, LatencyHistogram)] {
        [
            ("on the Lock Screen", c.toLockScreen), ("registration answered 2xx", c.toRegistered),
            ("first update delivered", c.toFirstUpdate),
        ]
    }

    static let kickoffColumn = "kickoff latency (from the start intended)"

    static func kickoffMarkdown(_ r: ServeEventsReport) -> String {
        guard let c = r.kickoff else { return "" }
        var md = kickoffLine(r) + "\n\n"
        md += MarkdownTable.percentiles(kickoffColumn, kickoffRows(c), value: Units.duration) + "\n"
        md += MarkdownTable.counts("not started, by reason", "count", c.notStartedByReason)
        return md
    }
}

extension ServeHTML {
    /// report.html's kickoff paragraph and tables (nothing without a kickoff).
    static func kickoff(_ r: ServeEventsReport) -> String {
        guard let c = r.kickoff else { return "" }
        var out = "<h3>Kickoff by push-to-start</h3>\n<p>" + e(ServeReport.kickoffLine(r)) + "</p>\n<table>\n<tr>"
        for h in [ServeReport.kickoffColumn, "count", "p50", "p99", "max"] { out += "<th>\(e(h))</th>" }
        out += "</tr>\n"
        for (name, h) in ServeReport.kickoffRows(c) {
            let v = h.values(atPercentiles: [50, 99])
            let cells = h.isEmpty
                ? ["0", "–", "–", "–"]
                : [Units.grouped(Int(h.totalCount)), Units.duration(v[0]), Units.duration(v[1]), Units.duration(h.max)]
            out += "<tr><td>\(e(name))</td>" + cells.map { "<td>\(e($0))</td>" }.joined() + "</tr>\n"
        }
        out += "</table>\n"
        if !c.notStartedByReason.isEmpty {
            out += "<table>\n<tr><th>not started, by reason</th><th>count</th><th>example</th></tr>\n"
            for (reason, n) in c.notStartedByReason.sorted(by: { ($1.value, $0.key) < ($0.value, $1.key) }) {
                let example = c.notStartedExamples[reason]?.first.map { "<code>\(e($0))</code>" } ?? ""
                out += "<tr><td>\(e(reason))</td><td>\(Units.grouped(n))</td><td>\(example)</td></tr>\n"
            }
            out += "</table>\n"
        }
        return out
    }
}
