import FanoutAPNs
import ArgumentParser
import FanoutCore
import FanoutMetrics
import FanoutReport
import FanoutServe
import Foundation

extension Serve {
    /// The closing line, and the identities checked once the folder is written (a broken one: exit 1).
    func finish(
        services: [APNsService], results: ServeWorkers.Results, info: ServeResults.Info,
        registration: RegisterResults?, folder: String
    ) throws {
        var st = ServeStats()
        var accounting = Accounting()
        for service in services {
            st += service.stats
            accounting += service.pipeline.accounting
        }
        print(
            "fanout serve: \(st.requests) requests (\(st.acceptedPushes) pushes, \(st.acceptedBroadcasts) broadcasts "
                + "accepted), \(accounting.deliveries) deliveries, "
                + "\(results.connections[.accepted]) connections; "
                + (info.shard.map { "shard \($0): \(st.notThisShard) token pushes not this shard's; " } ?? "")
                + (results.trigger.map {
                    "trigger: \($0.sent) events sent, \($0.successes) answered 2xx, \($0.timeouts) timeouts, "
                        + "\($0.errors.values.reduce(0, +)) errors; "
                } ?? "")
                + "state.jsonl: \(info.state.rawValue); run folder \(folder)")
        if !results.connections.answersAccountedFor(requests: st.requests) {
            throw CommandFailure(
                "the wire identity is broken: \(st.requests) answers produced, "
                    + "\(results.connections[.responsesSubmitted]) submitted + "
                    + "\(results.connections[.answersDropped]) dropped")
        }
        if let e = info.events {
            var line =
                "fanout serve: events: \(e.correlated) correlated (\(e.delivered) delivered, \(e.duplicate) duplicate, "
                + "\(e.reordered) reordered, \(e.wrongKind + e.wrongContent) wrong kind or content), "
                + "\(e.uncorrelated) uncorrelated, \(e.missing) missing, "
                + "\(e.superseded) superseded (\(e.skipped) skipped: never pushed), \(e.staleAtEnd) stale at the "
                + "end; freshness p99 \(Units.duration(e.freshness.valueAtPercentile(99))) over every "
                + "expected pair"
            if let r = e.rotations {
                line += "; tokens rotated while serving: \(r.rotated) of \(r.scheduled) (\(r.registered) registered), "
                line += "\(r.sentToUnregistered) pushes sent to unregistered tokens"
            }
            if let a = e.appEvents {
                line += "; app events: \(a.applied) of \(a.scheduled) (\(a.told) told the backend), "
                line += "\(a.sentAfter) pushes sent after them"
            }
            print(line)
        }
        if !st.identitiesHold || !accounting.identitiesHold || info.events.map({ !$0.identitiesHold }) == true {
            throw CommandFailure("accounting identities are broken")
        }
        // The backend's failures are measurements (judged by the verdict); the harness losing count of them is not.
        if info.trigger.map({ !$0.identityHolds }) == true {
            throw CommandFailure("the trigger's identity is broken: sent ≠ answered + timeouts + errors + cancelled")
        }
        if info.trigger.map({ !$0.byURLAddsUp }) == true {
            throw CommandFailure(
                "the trigger's per-URL counts do not add up to its totals (summary.json trigger.byURL)")
        }
        if registration.map({ !$0.identityHolds }) == true {
            throw CommandFailure("registration's identity is broken: activities ≠ registered + failed + unregistered")
        }
        if registration.map({ !$0.byURLAddsUp }) == true {
            throw CommandFailure(
                "registration's per-URL counts do not add up to its totals (summary.json registration.byURL)")
        }
    }
}
