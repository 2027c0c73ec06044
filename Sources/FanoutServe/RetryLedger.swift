import FanoutAPNs
import FanoutCore
import FanoutMetrics

/// `--faults`' retry tracking (docs/INGEST.md §3, *Retries*) shared by every loop of one serve: a push refused on one
/// loop may come back on another (another connection, with `--workers` above 1), so one ``RetryTracker`` under a
/// lock, as ``FaultAttempts`` is. Touched only while faults that refuse are configured (`APNsServer.drawsFaults`):
/// one lock a request then, none otherwise.
final class RetryLedger: @unchecked Sendable {
    // @unchecked: `tracker` is touched only under `lock`.
    private let lock = Lock()
    private var tracker: RetryTracker

    init(capacity: Int = RetryTracker.defaultCapacity) {
        tracker = RetryTracker(capacity: capacity)
    }

    /// A token push or a broadcast arrived: did it come back after a refusal? Is it refused now (`kind`, an index of
    /// `RetryCounts.kinds`, nil when it is not)? Other requests are not tracked.
    func track(_ r: RequestInput, refusedAs kind: Int?, nowNanos: UInt64) {
        let prefix = "/3/device/".utf8
        if r.path.count > prefix.count, r.path.starts(with: prefix) {
            let token = r.path[prefix.count...]
            lock.withLock {
                let keys = tracker.keys(r, token: token)
                if let keys { tracker.arrived(keys, nowNanos: nowNanos) }
                if let kind { tracker.refused(keys, kind: kind, nowNanos: nowNanos, token: token, body: r.body) }
            }
        } else if r.path.starts(with: "/4/broadcasts/".utf8) {
            lock.withLock {
                let identity = tracker.broadcastKey(r)
                if let identity { tracker.broadcastArrived(identity.key) }
                if let kind { tracker.broadcastRefused(identity, kind: kind, nowNanos: nowNanos) }
            }
        }
    }

    /// Every loop's counts, the refused pushes still waiting counted as never retried (read once the loops stop).
    var final: RetryCounts { lock.withLock { tracker.final } }
}
