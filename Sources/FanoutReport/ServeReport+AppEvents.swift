import FanoutMetrics

/// App events while serving (`faults.appEvents`, docs/INGEST.md §5) in serve's folder: summary.json's
/// `events.appEvents` and `events.sentAfterAppEvent`, a paragraph of summary.md's *Events* and of report.html's.
/// Nothing is written for a scenario without app events (its folder is as before).
extension ServeReport {
    static func addAppEvents(_ r: ServeEventsReport, to out: inout [String: Any]) {
        guard let c = r.appEvents else { return }
        let object: [String: Any] = [
            "scheduled": c.scheduled, "applied": c.applied, "appliedByKind": c.appliedByKind,
            "graceSeconds": c.graceSeconds, "notExpected": c.notExpected, "pushedInGrace": c.pushedInGrace,
            "sentAfterAppEvent": c.sentAfter, "sentAfterAppEventByKind": c.sentAfterByKind,
            "requests": telling(c.telling, done: "told", pending: "untoldAtShutdown", sent: "sent"),
        ]
        let identity = "scheduled = requests.told + requests.failed + requests.untoldAtShutdown, scheduled ≥ applied "
            + "= Σ appliedByKind, sentAfterAppEvent = Σ sentAfterAppEventByKind"
        addChanges(
            "appEvents", object, identity, holds: c.addsUp, sentPast: ("sentAfterAppEvent", c.sentAfter), to: &out)
    }

    /// One sentence: the app events, the pairs no longer expected, the pushes sent after them, the requests.
    static func appEventsLine(_ r: ServeEventsReport) -> String {
        guard let c = r.appEvents else { return "" }
        func kinds(_ d: [String: Int]) -> String {
            if d.isEmpty { return "" }
            return " (" + d.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")"
        }
        var line = "App events while serving: \(c.scheduled) drawn, \(c.applied) applied by the end"
        line += kinds(c.appliedByKind) + "; \(c.notExpected) (event, follower) pairs not expected any more (app "
        line += "event); \(c.pushedInGrace) pushes to their activities within the "
        line += JSONTextWriter.number(c.graceSeconds) + " s grace, then \(c.sentAfter) sent after the app event"
        line += kinds(c.sentAfterByKind) + " (sentAfterAppEvent: a backend that ignores app events). Told the "
        line += "backend: \(c.told), failed \(c.failed), not told when serving stopped \(c.untoldAtShutdown) "
        line += "(scheduled = told + failed + not told: " + (c.addsUp ? "holds" : "BROKEN") + ")."
        return line
    }

    static func appEventsMarkdown(_ r: ServeEventsReport) -> String {
        r.appEvents == nil ? "" : appEventsLine(r) + "\n\n"
    }
}
