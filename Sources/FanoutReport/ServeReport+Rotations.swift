import FanoutMetrics

/// Rotations while serving (`faults.rotationWhileServing`, docs/INGEST.md §5) in serve's folder: summary.json's
/// `events.rotations` and `events.sentToUnregistered`, a paragraph of summary.md's *Events* and of report.html's.
/// Nothing is written for a scenario whose tokens do not rotate while serving (its folder is as before).
extension ServeReport {
    static func addRotations(_ r: ServeEventsReport, to out: inout [String: Any]) {
        guard let c = r.rotations else { return }
        let object: [String: Any] = [
            "scheduled": c.scheduled, "rotated": c.rotated, "retired": c.retired, "graceSeconds": c.graceSeconds,
            "pushedInGrace": c.pushedInGrace, "answeredUnregistered": c.answeredUnregistered,
            "sentToUnregistered": c.sentToUnregistered,
            "registration": telling(
                c.registration, done: "registered", pending: "unregisteredAtShutdown", sent: "requests"),
        ]
        let identity = "scheduled = registration.registered + registration.failed + "
            + "registration.unregisteredAtShutdown, scheduled ≥ rotated ≥ retired"
        addChanges(
            "rotations", object, identity, holds: c.addsUp, sentPast: ("sentToUnregistered", c.sentToUnregistered),
            to: &out)
    }

    /// One sentence: the rotations, what the backend did with the old tokens, the new tokens' registrations.
    static func rotationsLine(_ r: ServeEventsReport) -> String {
        guard let c = r.rotations else { return "" }
        return "Token rotations while serving: \(c.scheduled) drawn, \(c.rotated) rotated by the end, \(c.retired) old "
            + "tokens retired after their " + JSONTextWriter.number(c.graceSeconds) + " s grace (\(c.pushedInGrace) "
            + "pushes to an old token within it, delivered); \(c.answeredUnregistered) answered 410 Unregistered, "
            + "then \(c.sentToUnregistered) pushes sent to unregistered tokens (sentToUnregistered: a backend that "
            + "does not prune them). New tokens registered: \(c.registered), failed \(c.registration.failed), not "
            + "registered when serving stopped \(c.unregisteredAtShutdown) (scheduled = registered + failed + not "
            + "registered: " + (c.addsUp ? "holds" : "BROKEN") + ")."
    }

    static func rotationsMarkdown(_ r: ServeEventsReport) -> String {
        r.rotations == nil ? "" : rotationsLine(r) + "\n\n"
    }

    /// `events`' object `key` for changes while serving (rotations, app events) with its `identity` and whether it
    /// holds, the pushes sent past the changes beside it, and the identity among the summary's (`<key>Hold`).
    static func addChanges(
        _ key: String, _ object: [String: Any], _ identity: String, holds: Bool, sentPast: (key: String, count: Int),
        to out: inout [String: Any]
    ) {
        out[sentPast.key] = sentPast.count
        out[key] = object.merging(["identity": identity, "identityHolds": holds]) { $1 }
        addIdentity(key + "Hold", holds: holds, to: &out)
    }

    /// summary.json's object of a ``BackendTelling`` (rotations' `registration`, app events' `requests`), its
    /// counts under the names given.
    static func telling(_ t: BackendTelling, done: String, pending: String, sent: String) -> [String: Any] {
        [
            done: t.done, "failed": t.failed, pending: t.pendingAtShutdown, sent: t.requests,
            "byStatus": byStatus(t.counts.byStatus), "timeouts": t.counts.timeouts, "errors": t.counts.errors,
        ]
    }
}
