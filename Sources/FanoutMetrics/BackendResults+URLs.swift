/// How the requests to a backend are spread over its instances (`--trigger A,B`, `--register A,B`): by a hash of
/// the event's source, so that one source's events always go to the same instance and leave it in their order, or
/// round robin, each instance in turn (docs/BACKEND.md, *Several instances*). Either is a function of the schedule
/// alone, never of timing: a run repeats.
public enum BackendSpread: String, Sendable, CaseIterable {
    /// FNV-1a of the source's id (the body's `source`) modulo the number of URLs: a source's events keep their order.
    case hash
    /// The k-th request to URL k mod N (for registration: line k of population.jsonl, its retries to the next URLs).
    case roundRobin = "round-robin"
}

/// One URL's share of the trigger's or the registration's requests (`--trigger A,B`: summary.json `trigger.byURL`),
/// counted where the request is sent and where it ends, beside the totals: the per-URL counts add up to them
/// (``TriggerResults/byURLAddsUp``, ``RegisterResults/byURLAddsUp``). Every request sent to the URL ends in exactly
/// one of: an answer (by status), a timeout, an error (by libcurl's message), or cancelled (at shutdown, at the
/// registration's deadline).
public struct BackendURLResults: BackendCounted, Sendable, Equatable {
    public var url: String
    /// Requests started.
    public var sent = 0
    /// Answers by status, timeouts, errors by libcurl's words.
    public var counts = BackendCounts()
    /// In flight when sending stopped (serving's shutdown, the registration's deadline).
    public var cancelled = 0
    /// Due but still waiting for a free slot of this URL when sending stopped (never sent).
    public var unsent = 0
    /// Requests that found every slot of this URL busy when due (`--trigger-concurrency` is per URL).
    public var waitedForSlot = 0
    /// The most requests in flight to this URL at once.
    public var peakInFlight = 0
    /// Requests that never left (no connection, cancelled first).
    public var neverLeft = 0
    /// Answered requests (any status), from their intended (due) instant to the answer.
    public var responseNanos = LatencyHistogram()
    /// Every request, from its intended instant to the moment it left (or its handoff, for one that never left).
    public var scheduleLagNanos = LatencyHistogram()

    public init(url: String) { self.url = url }

    public var answered: Int { byStatus.values.reduce(0, +) }
    public var successes: Int { byStatus.filter { (200..<300).contains($0.key) }.values.reduce(0, +) }
    /// Requests that ended without a 2xx answer (a non-2xx answer, a timeout or an error; not the cancelled).
    public var failures: Int { counts.failures }
    /// sent = answered + timeouts + errors + cancelled.
    public var identityHolds: Bool { sent == answered + timeouts + errors.values.reduce(0, +) + cancelled }

    /// The rows' counts added up (the histograms too).
    public static func total(_ rows: [BackendURLResults]) -> BackendURLResults {
        var t = BackendURLResults(url: rows.map(\.url).joined(separator: ","))
        for r in rows {
            t.sent += r.sent
            for (k, n) in r.byStatus { t.counts.byStatus[k, default: 0] += n }
            t.counts.timeouts += r.timeouts
            for (k, n) in r.errors { t.counts.errors[k, default: 0] += n }
            t.cancelled += r.cancelled
            t.unsent += r.unsent
            t.waitedForSlot += r.waitedForSlot
            t.peakInFlight = max(t.peakInFlight, r.peakInFlight)
            t.neverLeft += r.neverLeft
            t.responseNanos.add(r.responseNanos)
            t.scheduleLagNanos.add(r.scheduleLagNanos)
        }
        return t
    }

    /// "http://a/t 25 answered 500; http://b/t none": each URL's failures in one line (``BackendFailures``).
    public static func failureText(_ rows: [BackendURLResults]) -> String {
        rows.map { "\($0.url) " + ($0.failures == 0 ? "none" : $0.counts.failureText) }.joined(separator: "; ")
    }
}

extension TriggerResults {
    /// The per-URL counts add up to the totals (each side counted on its own path): sent, answers by status,
    /// timeouts, errors, cancelled at shutdown, unsent at shutdown, waits for a slot, requests that never left, and
    /// the answered requests' response times. Holds trivially without per-URL rows.
    public var byURLAddsUp: Bool {
        guard !byURL.isEmpty else { return true }
        let t = BackendURLResults.total(byURL)
        return t.sent == sent && t.counts == counts && t.cancelled == cancelledAtShutdown
            && t.unsent == unsentAtShutdown && t.waitedForSlot == waitedForSlot && t.neverLeft == neverLeft
            && t.responseNanos.totalCount == responseNanos.totalCount
            && t.scheduleLagNanos.totalCount == scheduleLagNanos.totalCount && byURL.allSatisfy(\.identityHolds)
    }
}

extension RegisterResults {
    /// The per-URL counts add up to the totals: requests, answers by status, timeouts, errors; every URL's own
    /// identity holds; and what was cancelled or left waiting at the deadline is within the unregistered.
    public var byURLAddsUp: Bool {
        guard !byURL.isEmpty else { return true }
        let t = BackendURLResults.total(byURL)
        return t.sent == requests && t.counts == counts && t.cancelled + t.unsent <= unregisteredAtDeadline
            && byURL.allSatisfy(\.identityHolds)
    }
}
