import FanoutCore
import FanoutTrace

/// The short stdout summary of a replay.
enum ReplaySummary {
    static func text(replay: TraceReplay, path: String, elapsed: Duration, dumpPath: String?) -> String {
        let a = replay.pipeline!.accounting
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        let rate = seconds > 0 ? Double(replay.lineCount) / seconds : 0
        func list<T>(_ cases: [T], _ count: (T) -> Int, _ name: (T) -> String) -> String {
            let parts = cases.filter { count($0) > 0 }.map { "\(name($0)) \(count($0))" }
            return parts.isEmpty ? "none" : parts.joined(separator: ", ")
        }
        var lines: [String] = []
        lines.append("trace       \(path): \(replay.lineCount) lines")
        lines.append(
            "pushes      \(a.pushes) = rejected \(a.rejectedTotal) + unroutable \(a.unroutableTotal) + routed \(a.routed)"
        )
        lines.append("rejected    " + list(RejectReason.allCases, { a[$0] }, { $0.name }))
        lines.append("unroutable  " + list(UnroutableReason.allCases, { a[$0] }, { $0.name }))
        lines.append("deliveries  \(a.deliveries): " + list(Outcome.allCases, { a[$0] }, { $0.name }))
        lines.append("requests    \(a.requests) (refused by a limit: \(a.requestsLimitExceeded))")
        lines.append(
            "activities  \(replay.pipeline!.store.activityCount) on \(replay.pipeline!.store.deviceCount) devices")
        lines.append(
            "identities  "
                + (a.identitiesHold
                    ? "hold (pushes = rejected + unroutable + routed; deliveries = sum of outcomes)" : "BROKEN"))
        lines.append("replay      \(String(format: "%.3f", seconds)) s, \(Int(rate.rounded())) lines/s")
        if let dumpPath, dumpPath != "-" { lines.append("dump        \(dumpPath)") }
        return lines.joined(separator: "\n")
    }
}
