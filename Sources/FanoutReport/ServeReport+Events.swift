import FanoutMetrics
import Foundation

extension ServeEventsReport {
    /// The judge's examples as summary.md and report.html list them, each list under its title, in this order.
    var exampleLists: [(title: String, examples: [String])] {
        [
            ("uncorrelated", uncorrelatedExamples), ("missing", missingExamples), ("stale at the end", staleExamples),
            ("skipped", skippedExamples), ("wrong kind or content", wrongExamples),
        ]
    }
}

/// The *events* part of `fanout serve`'s run folder (`--expect-events` only; without it nothing here is written and
/// the endToEnd metric is left out): summary.json's `events`, summary.md's *Events* section, events-judged.jsonl.
extension ServeReport {
    /// The latency metrics the report shows: endToEnd only when events were expected.
    static func metrics(_ info: Info) -> [ServeMetric] {
        info.events == nil ? ServeMetric.allCases.filter { $0 != .endToEnd } : ServeMetric.allCases
    }

    static func eventsJSON(_ r: ServeEventsReport, _ latency: LatencyRecorder) -> [String: Any] {
        var bySize: [String: Any] = [:]
        for m in Metric.completionMetrics { bySize[m.name] = percentiles(r.completion[m]) }
        var out: [String: Any] = [
            "events": r.events, "dueEvents": r.dueEvents, "sharedTimestamps": r.sharedTimestamps,
            "t0Nanos": r.t0Nanos, "horizonNanos": r.horizonNanos, "settleSeconds": Double(r.settleNanos) / 1e9,
            "correlated": r.correlated, "uncorrelated": r.uncorrelated, "delivered": r.delivered,
            "duplicate": r.duplicate, "reordered": r.reordered, "notApplied": r.notApplied, "early": r.early,
            "wrongContent": r.wrongContent, "wrongKind": r.wrongKind, "wrongShownAtEnd": r.wrongShownAtEnd,
            "reorderedByScenario": r.reorderedByScenario, "reorderedByBackend": r.reorderedByBackend,
            "expected": r.expected, "superseded": r.superseded, "missing": r.missing, "staleAtEnd": r.staleAtEnd,
            "skipped": r.skipped, "skippedUntracked": r.skippedUntracked, "freshnessCensored": r.freshnessCensored,
            "completionCensored": r.completionCensored,
            "completeEvents": r.completeEvents, "incompleteEvents": r.incompleteEvents,
            "eventsWithMissing": r.eventsWithMissing, "missingByReason": r.missingByReason,
            "refusedNotResent": [
                "pushes": r.refusals.pushes, "broadcasts": r.refusals.broadcasts, "unmatched": r.refusals.unmatched,
                "pairs": r.refusals.pairs, "missing": r.refusals.missing, "superseded": r.refusals.superseded,
                "delivered": r.refusals.delivered, "notDue": r.refusals.notDue,
            ],
            "identity": [
                "pairs": "expected = delivered + wrongKind + wrongContent + superseded + missing",
                "pairsHold": r.pairsAddUp,
                "deliveries": "correlated = delivered + wrongKind + wrongContent + duplicate + reordered + notApplied",
                "deliveriesHold": r.deliveriesAddUp, "perEventHolds": r.perEventAddsUp,
                "reasons": "missing = Σ missingByReason", "reasonsHold": r.reasonsAddUp,
                "refusals": "refusedNotResent.pairs = missing + superseded + delivered + notDue",
                "refusalsHold": r.refusals.addsUp,
                "freshness": "freshness.count = expected, censored = missing + wrongShownAtEnd, skipped ≤ superseded",
                "freshnessHolds": r.freshnessAddsUp, "holds": r.identitiesHold,
            ] as [String: Any],
            "endToEnd": percentiles(latency[serve: .endToEnd]),
            "freshness": percentiles(r.freshness),
            "fanoutCompletion": bySize,
            "examples": [
                "uncorrelated": r.uncorrelatedExamples, "missing": r.missingExamples, "staleAtEnd": r.staleExamples,
                "skipped": r.skippedExamples, "wrong": r.wrongExamples,
            ],
            "missingByReasonExamples": r.missingReasonExamples,
        ]
        addRotations(r, to: &out)
        addAppEvents(r, to: &out)
        addKickoff(r, to: &out)
        return out
    }

    /// Adds a section's identity (`rotationsHold`, `appEventsHold`) to the events object's `identity`, beside the
    /// judge's own.
    static func addIdentity(_ key: String, holds: Bool, to out: inout [String: Any]) {
        guard var identity = out["identity"] as? [String: Any] else { return }
        identity[key] = holds
        out["identity"] = identity
    }

    static func eventsMarkdown(_ r: ServeEventsReport, _ latency: LatencyRecorder) -> String {
        var md = "## Events (--expect-events)\n\n"
        md += "\(r.events) events in the scenario's schedule, \(r.dueEvents) due by the judge's horizon "
        md += "(t0 + \(micros(r.horizonNanos / 1000)) ms; --settle "
        md += String(format: "%g s)", Double(r.settleNanos) / 1e9)
        if r.sharedTimestamps > 0 { md += "; \(r.sharedTimestamps) left out (a timestamp shared within a source)" }
        md += ".\n\n"
        md += "Deliveries: \(r.correlated) correlated = \(r.delivered) delivered + \(r.wrongKind) wrong kind + "
        md += "\(r.wrongContent) wrong content + \(r.duplicate) duplicate + "
        md += "\(r.reordered) reordered + \(r.notApplied) not applied by the device: "
        md += r.deliveriesAddUp ? "holds" : "**BROKEN**"
        md += " (reordered: \(r.reorderedByScenario) the scenario's own out-of-order events, "
        md += "\(r.reorderedByBackend) the backend's)"
        md += "; \(r.uncorrelated) uncorrelated (applied, matching no event); \(r.early) applied before their "
        md += "intended time.\n\n"
        md += "Expected (event, follower) pairs: \(r.expected) = \(r.delivered) delivered + \(r.wrongKind) wrong kind + "
        md += "\(r.wrongContent) wrong content + \(r.superseded) superseded + \(r.missing) missing: "
        md += r.pairsAddUp ? "holds" : "**BROKEN**"
        md += "; per event: " + (r.perEventAddsUp ? "holds" : "**BROKEN**") + ". "
        md += "\(r.staleAtEnd) followers stale at the end (not on their source's last event); \(r.eventsWithMissing) "
        md += "events missing somewhere; \(r.completeEvents) events complete, \(r.incompleteEvents) not.\n\n"
        md += "Skipped: \(r.skipped) of the \(r.superseded) superseded pairs were never pushed before a newer event "
        md += "covered them (the backend dropped or coalesced them)"
        md += r.skippedUntracked > 0 ? " (\(r.skippedUntracked) of them past the tracker's bound).\n\n" : ".\n\n"
        if r.wrongKind + r.wrongContent > 0 {
            md += "Wrong: \(r.wrongKind) deliveries of the wrong kind (an end for an update, or the reverse) and "
            md += "\(r.wrongContent) whose content-state dropped or changed a field the trigger carried; "
            md += "\(r.wrongShownAtEnd) still shown at the end.\n\n"
        }
        md += rotationsMarkdown(r)
        md += appEventsMarkdown(r)
        md += kickoffMarkdown(r)
        md += missingReasonsMarkdown(r)
        var rows: [(String, LatencyHistogram)] = [
            ("endToEnd", latency[serve: .endToEnd]), ("freshness", r.freshness),
        ]
        for m in Metric.completionMetrics { rows.append((m.name, r.completion[m])) }
        md += MarkdownTable.percentiles("metric", rows, value: micros)
        md += "\nendToEnd: \(ServeMetric.endToEnd.about) (delivered pairs only). freshness: every expected (event, "
        md += "follower) pair, from the event's intended time until the follower showed it or a newer event of its "
        md += "source (a wrong delivery does not count as showing it); \(r.freshnessCensored) pairs missing or still "
        md += "shown wrong censored at the horizon. fanoutCompletion: every due event, "
        md += "its intended time → its last follower showing it or a newer event; \(r.completionCensored) events with "
        md += "a missing or wrong follower censored at the horizon (µs).\n\n"
        for (title, list) in r.exampleLists where !list.isEmpty {
            md += "- **\(title)**\n"
            for e in list { md += "  - `\(e)`\n" }
        }
        if r.exampleLists.contains(where: { !$0.examples.isEmpty }) { md += "\n" }
        return md
    }

    /// The missing pairs by reason, most first (ties by name), and what became of the refused, never resent pushes.
    static func missingReasonsMarkdown(_ r: ServeEventsReport) -> String {
        var md = ""
        if r.missing > 0 {
            md += "| missing (event, follower) pairs, by reason | count | example |\n|---|---:|---|\n"
            for (reason, n) in sortedReasons(r) {
                md += "| \(reason) | \(n) | \(r.missingReasonExamples[reason]?.first.map { "`\($0)`" } ?? "") |\n"
            }
            md += "\nmissing = Σ by reason: " + (r.reasonsAddUp ? "holds" : "**BROKEN**") + ".\n\n"
        }
        let f = r.refusals
        if f.pushes + f.broadcasts > 0 {
            md += "Refused by --faults and never resent: \(f.pushes) token pushes and \(f.broadcasts) broadcasts "
            md += "(\(f.unmatched) carrying no follower's event), \(f.pairs) (event, follower) pairs = \(f.missing) "
            md += "missing + \(f.superseded) superseded (a newer event reached the follower) + \(f.delivered) "
            md += "delivered (by a resend not matched) + \(f.notDue) not due: "
            md += (f.addsUp ? "holds" : "**BROKEN**") + ".\n\n"
        }
        return md
    }

    /// missingByReason, most first (ties by name).
    static func sortedReasons(_ r: ServeEventsReport) -> [(String, Int)] {
        r.missingByReason.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { ($0.key, $0.value) }
    }

    /// events-judged.jsonl: per event, how it ended (the counts of `ServeEventsReport.PerEvent`).
    static func eventsJudged(_ r: ServeEventsReport) -> String {
        let p = r.perEvent
        var out = ""
        for e in p.delivered.indices {
            out += "{\"event\": \(e), \"due\": \(p.due[e]), \"delivered\": \(p.delivered[e]), "
            out += "\"superseded\": \(p.superseded[e]), \"missing\": \(p.missing[e]), \"duplicate\": \(p.duplicate[e]), "
            out += "\"reordered\": \(p.reordered[e]), \"notApplied\": \(p.notApplied[e]), \"skipped\": \(p.skipped[e]), "
            out += "\"wrongKind\": \(p.wrongKind[e]), \"wrongContent\": \(p.wrongContent[e]), "
            if p.missing[e] > 0 {
                let reasons = p.missingReasons(e).sorted { $0.key < $1.key }
                out += "\"missingByReason\": {" + reasons.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", ")
                out += "}, "
            }
            out += "\"lastAppliedNanos\": \(p.lastApplyNanos[e] == 0 ? 0 : p.lastApplyNanos[e] &- r.t0Nanos)}\n"
        }
        return out
    }
}
