import Foundation

/// How the requests to a backend ended, for the reports: answers by HTTP status (2xx is success), the requests
/// that got no complete answer within the timeout, and the ones that failed (connection refused, TLS failure,
/// protocol error…) by libcurl's message. A request cancelled by a close is not here (its owner counts it).
public struct BackendCounts: Sendable, Equatable {
    public var byStatus: [Int: Int] = [:]
    public var timeouts = 0
    public var errors: [String: Int] = [:]

    public init() {}

    /// Requests that ended without a 2xx answer (a non-2xx answer, a timeout or an error).
    public var failures: Int { BackendFailures.count(byStatus: byStatus, timeouts: timeouts, errors: errors) }

    /// The failures in one line (``BackendFailures/text(byStatus:timeouts:errors:limit:)``).
    public var failureText: String { BackendFailures.text(byStatus: byStatus, timeouts: timeouts, errors: errors) }
}

/// Results that hold a ``BackendCounts`` (the trigger's and the registrar's): its counts by their own names.
public protocol BackendCounted {
    var counts: BackendCounts { get set }
}

extension BackendCounted {
    /// Answers by HTTP status (2xx is success).
    public var byStatus: [Int: Int] {
        get { counts.byStatus }
        set { counts.byStatus = newValue }
    }
    /// No complete answer within the timeout.
    public var timeouts: Int {
        get { counts.timeouts }
        set { counts.timeouts = newValue }
    }
    /// Connection refused, TLS failure, protocol error…: by libcurl's message.
    public var errors: [String: Int] {
        get { counts.errors }
        set { counts.errors = newValue }
    }
}

/// The requests to a backend that did not succeed, in one line for stderr: "250 answered 500, 12 timed out,
/// 3 Couldn't connect to server (Connection refused)" — every non-2xx status, the timeouts and each error (libcurl's
/// words), most frequent first, at most `limit` kinds (then "and N more kinds"); "" when there were none.
public enum BackendFailures {
    public static func count(byStatus: [Int: Int], timeouts: Int, errors: [String: Int]) -> Int {
        byStatus.filter { !(200..<300).contains($0.key) }.values.reduce(0, +) + timeouts + errors.values.reduce(0, +)
    }

    public static func text(byStatus: [Int: Int], timeouts: Int, errors: [String: Int], limit: Int = 4) -> String {
        var kinds: [(count: Int, text: String)] = []
        for (status, n) in byStatus where !(200..<300).contains(status) { kinds.append((n, "\(n) answered \(status)")) }
        if timeouts > 0 { kinds.append((timeouts, "\(timeouts) timed out")) }
        for (message, n) in errors { kinds.append((n, "\(n) \(message)")) }
        kinds.sort { $0.count != $1.count ? $0.count > $1.count : $0.text < $1.text }
        var text = kinds.prefix(limit).map(\.text).joined(separator: ", ")
        if kinds.count > limit { text += " and \(kinds.count - limit) more kinds (summary.md)" }
        return text
    }
}

/// What the trigger did and measured (summary.json `trigger`, summary.md, trigger-response.hgrm and
/// trigger-schedule-lag.hgrm). Every event sent ends in exactly one of: an answer (by status), a timeout, an
/// error (by libcurl's message), or cancelled by the shutdown.
public struct TriggerResults: BackendCounted, Sendable {
    /// The URL, or the comma-separated URLs of several instances (`--trigger A,B`), as given.
    public var url = ""
    /// How the events were spread over several URLs (one URL: every event to it).
    public var spread = BackendSpread.hash
    /// Each URL's share, in the order given (one row with one URL; empty in results built without a sender).
    public var byURL: [BackendURLResults] = []
    /// `--trigger-concurrency`: requests in flight at most, to each URL.
    public var concurrency = 0
    /// Events POSTed.
    public var sent = 0
    /// Answers by HTTP status (2xx is success); no complete answer within `--trigger-timeout`; connection
    /// refused, TLS failure, protocol error…: by libcurl's message.
    public var counts = BackendCounts()
    /// In flight when serving stopped (the request was cancelled).
    public var cancelledAtShutdown = 0
    /// Due before serving stopped but still waiting for a free slot then (never sent).
    public var unsentAtShutdown = 0
    /// Events that found every slot busy at their intended time and waited (their wait is in `scheduleLagNanos`).
    public var waitedForSlot = 0
    /// The most requests in flight at once (at most `concurrency` × the URLs: the bound is per URL).
    public var peakInFlight = 0
    /// Every event of the schedule was sent and answered (or timed out, or failed) before serving stopped.
    public var completed = false
    /// Answered events, from their intended time to the answer's end (open loop: a wait for a slot or a late
    /// timer counts; coordinated omission is accounted for).
    public var responseNanos = LatencyHistogram()
    /// Every event sent, from its intended time to the moment its request left (libcurl about to send it on its
    /// connection; a connection's own setup left out): fanout's lateness, a wait for a free slot included. An event
    /// whose request never left (no connection to the backend, cancelled first) is recorded to its handoff to the
    /// client and counted in `neverLeft`.
    public var scheduleLagNanos = LatencyHistogram()
    public var neverLeft = 0
    /// `--trigger-max-lag`: the schedule lag p99 above which fanout, not the backend, held the events up (the run
    /// is not judged then).
    public var maxScheduleLagNanos = TriggerResults.defaultMaxScheduleLagNanos
    public static let defaultMaxScheduleLagNanos: UInt64 = 100_000_000
    /// The events the backend never accepted, by (source, timestamp), and why, in fanout's words: the judge names
    /// them as the reason of their followers' missing pairs (fanout's side first, before "never pushed").
    public var eventFailures: [TriggerEventFailure] = []

    public init() {}

    public var answered: Int { byStatus.values.reduce(0, +) }
    public var successes: Int { byStatus.filter { (200..<300).contains($0.key) }.values.reduce(0, +) }
    /// sent = answered + timeouts + errors + cancelled at shutdown.
    public var identityHolds: Bool {
        sent == answered + timeouts + errors.values.reduce(0, +) + cancelledAtShutdown
    }

    /// Events that ended without a 2xx answer (a non-2xx answer, a timeout or an error; not the cancelled).
    public var failures: Int { counts.failures }

    /// The stderr line after serving when some event failed (nil when none did): how many succeeded, and each
    /// failure by its status or libcurl's words.
    public var failureLine: String? {
        guard failures > 0 else { return nil }
        return "fanout serve: trigger \(url): \(successes) of \(sent) events answered 2xx"
            + (cancelledAtShutdown > 0 ? ", \(cancelledAtShutdown) cancelled at shutdown" : "")
            + "; failures: " + counts.failureText
            + (byURL.count > 1 ? "; by URL: " + BackendURLResults.failureText(byURL) : "")
    }
}

/// What registration did (summary.json `registration`, summary.md): every activity ends registered (a 2xx),
/// failed (every attempt refused, timed out or errored), or unregistered at the deadline.
public struct RegisterResults: BackendCounted, Sendable {
    /// The URL, or the comma-separated URLs of several instances (`--register A,B`), as given.
    public var url = ""
    /// Each URL's share of the requests (line k's first attempt to URL k mod N, each retry to the next URL), in the
    /// order given.
    public var byURL: [BackendURLResults] = []
    public var activities = 0
    public var registered = 0
    public var failed = 0
    /// Not registered when the deadline came (waiting, in flight or not started yet).
    public var unregisteredAtDeadline = 0
    /// Requests sent (first attempts and retries) and retries among them.
    public var requests = 0
    public var retries = 0
    /// Per line of population.jsonl (an activity, in the order of the file): registered (a 2xx) or not. The judge
    /// names "activity not registered" as the reason of a missing pair of an activity not registered.
    public var registeredLines: [Bool] = []
    /// Lines posted while serving (kickoff's registrations): each registered one's key (its loop << 32 | its number
    /// there) → when its 2xx came (`EventLoop.hrtimeNanos`).
    public var registeredAtNanos: [UInt64: UInt64] = [:]
    /// Every attempt's answer by status, and the attempts that got none.
    public var counts = BackendCounts()
    public var elapsedSeconds = 0.0
    /// SIGINT or SIGTERM ended registration (what was not registered counts as unregistered at the deadline).
    public var interrupted = false
    /// Each request, from when it was due (its rate slot or its backoff) to its end.
    public var responseNanos = LatencyHistogram()

    public init() {}

    /// activities = registered + failed + unregistered at the deadline.
    public var identityHolds: Bool { activities == registered + failed + unregisteredAtDeadline }

    /// The stderr line when registration has ended: the counts, and every failed attempt by its status or
    /// libcurl's words (an unreachable backend is named there, in one line).
    public var line: String {
        var text = "fanout serve: registered \(registered) of \(activities) activities (\(failed) failed, "
            + "\(unregisteredAtDeadline) unregistered at the deadline, \(retries) retries) "
            + String(format: "in %.2f s", elapsedSeconds)
        if counts.failures > 0 {
            text += "; failed attempts: " + counts.failureText
            if byURL.count > 1 { text += "; by URL: " + BackendURLResults.failureText(byURL) }
        }
        if interrupted { text += "; interrupted: serving ends at once" }
        return text
    }
}

/// The requests telling the backend of what changed while serving, one change each (a rotated token's registration,
/// an app event; sent as registration sends): answered 2xx (`done`), failed (every attempt), not done when serving
/// stopped; the requests (every attempt), their answers by status, timeouts and errors.
public struct BackendTelling: Sendable, Equatable {
    public var done = 0
    public var failed = 0
    public var pendingAtShutdown = 0
    public var requests = 0
    public var counts = BackendCounts()

    public init() {}

    /// `scheduled` changes told through `results` (nil: nothing sent, every one still pending at shutdown).
    public init(_ results: RegisterResults?, scheduled: Int) {
        guard let g = results else {
            pendingAtShutdown = scheduled
            return
        }
        done = g.registered
        failed = g.failed
        pendingAtShutdown = g.unregisteredAtDeadline
        requests = g.requests
        counts = g.counts
    }

    /// Every one of `scheduled` changes told, failed, or still pending at shutdown.
    public func addsUp(scheduled: Int) -> Bool { scheduled == done + failed + pendingAtShutdown }
}

/// An event of the trigger that did not end in a 2xx answer: its source, its `timestamp` and why (`trigger answered
/// 503`, `trigger timed out`, `trigger failed (…)`, `trigger cancelled at shutdown`, `trigger not sent (fanout behind
/// or shut down)`).
public struct TriggerEventFailure: Sendable, Equatable {
    public var source: Int32
    public var timestamp: Int64
    public var reason: String

    public init(source: Int32, timestamp: Int64, reason: String) {
        self.source = source
        self.timestamp = timestamp
        self.reason = reason
    }

    public static let notSent = "trigger not sent (fanout behind or shut down)"
    public static let cancelled = "trigger cancelled at shutdown"
    public static let timedOut = "trigger timed out"
    public static func answered(_ status: Int) -> String { "trigger answered \(status)" }
    public static func failed(_ message: String) -> String { "trigger failed (\(message))" }
}
