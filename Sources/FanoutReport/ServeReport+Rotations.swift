import FanoutMetrics

/// Rotations while serving (`faults.rotationWhileServing`, docs/INGEST.md §5) in serve's folder: summary.json's
/// `events.rotations` and `events.sentToUnregistered`, a paragraph of summary.md's *Events* and of report.html's.
/// Nothing is written for a scenario whose tokens do not rotate while serving (its folder is as before).
extension ServeReport {
    static func addRotations(_ r: ServeEventsReport, to out: inout [String: Any]) {
        guard let c = r.rotations else { return }
        out["sentToUnregistered"] = c.sentToUnregistered
        out["rotations"] = [
            "scheduled": c.scheduled, "rotated": c.rotated, "retired": c.retired, "graceSeconds": c.graceSeconds,
            "pushedInGrace": c.pushedInGrace, "answeredUnregistered": c.answeredUnregistered,
            "sentToUnregistered": c.sentToUnregistered,
            "registration": [
                "registered": c.registered, "failed": c.registrationFailed,
                "unregisteredAtShutdown": c.unregisteredAtShutdown, "requests": c.registrationRequests,
                "byStatus": byStatus(c.registrationByStatus),
                "timeouts": c.registrationTimeouts, "errors": c.registrationErrors,
            ] as [String: Any],
            "identity": "scheduled = registration.registered + registration.failed + "
                + "registration.unregisteredAtShutdown, scheduled ≥ rotated ≥ retired",
            "identityHolds": c.addsUp,
        ] as [String: Any]
        addIdentity("rotationsHold", holds: c.addsUp, to: &out)
    }

    /// One sentence: the rotations, what the backend did with the old tokens, the new tokens' registrations.
    static func rotationsLine(_ r: ServeEventsReport) -> String {
        guard let c = r.rotations else { return "" }
        return "Token rotations while serving: \(c.scheduled) drawn, \(c.rotated) rotated by the end, \(c.retired) old "
            + "tokens retired after their " + JSONTextWriter.number(c.graceSeconds) + " s grace (\(c.pushedInGrace) "
            + "pushes to an old token within it, delivered); \(c.answeredUnregistered) answered 410 Unregistered, "
            + "then \(c.sentToUnregistered) pushes sent to unregistered tokens (sentToUnregistered: a backend that "
            + "does not prune them). New tokens registered: \(c.registered), failed \(c.registrationFailed), not "
            + "registered when serving stopped \(c.unregisteredAtShutdown) (scheduled = registered + failed + not "
            + "registered: " + (c.addsUp ? "holds" : "BROKEN") + ")."
    }

    static func rotationsMarkdown(_ r: ServeEventsReport) -> String {
        r.rotations == nil ? "" : rotationsLine(r) + "\n\n"
    }
}
