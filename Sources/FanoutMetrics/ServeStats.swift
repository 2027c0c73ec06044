import FanoutCore

/// What `fanout serve` counts: every request's answer and the correctness findings a backend team wants, with
/// examples. The latency histograms are not here: each sample is recorded once, into its loop's
/// `IntervalRecorder`, and the run's totals are the sum of the log's intervals (`ServeMeasurements`).
public struct ServeStats: Sendable {
    public var requests = 0
    /// Answers by status, and failures by reason.
    public var byStatus: [Int: Int] {
        var all = otherStatuses
        if ok > 0 { all[200, default: 0] += ok }
        return all
    }
    private var otherStatuses: [Int: Int] = [:]
    public var byReason: [APNsReason: Int] = [:]
    /// Accepted token pushes, broadcasts, and pushes of another push type (answered, reaching no activity).
    public var acceptedPushes = 0
    public var acceptedBroadcasts = 0
    public var acceptedOtherPushTypes = 0
    public var channelRequests = 0
    /// `fanout serve --shard K/N`: token pushes to a device of another shard (answered 400 BadDeviceToken).
    public var notThisShard = 0
    /// Channel API bounds hit: creates refused by the 10,000-per-app limit or the API bundle cap (both
    /// answered `CannotCreateChannelConfig`), and `all-channels` answers cut to the listed-channel cap.
    public struct ChannelRefusals: Sendable, Equatable {
        public var perApp = 0
        public var bundles = 0
        public var listsCut = 0
        public init(perApp: Int = 0, bundles: Int = 0, listsCut: Int = 0) {
            self.perApp = perApp
            self.bundles = bundles
            self.listsCut = listsCut
        }
    }
    public var channelRefusals = ChannelRefusals()
    public enum Finding: Int, CaseIterable, Sendable {
        case rotatedToken, unknownToken, wrongTopic, staleTimestamp, afterEnd, rejectedPayload, budget, limitExceeded
        case derSignature, broadcastRefusedElsewhere

        public var about: String {
            switch self {
            case .rotatedToken: "pushes to tokens that were rotated away (410 Unregistered)"
            case .unknownToken: "pushes to tokens never issued (400 BadDeviceToken)"
            case .wrongTopic: "pushes to a token of another app (400 DeviceTokenNotForTopic)"
            case .staleTimestamp: "stale or duplicate timestamps (reordered or retried; ignored by the device)"
            case .afterEnd: "updates after the activity ended (ignored by the device)"
            case .rejectedPayload: "payloads or headers APNs would reject"
            case .budget: "priority-10 budget overruns (throttled)"
            case .limitExceeded: "push-to-start refused by the device's limits"
            case .derSignature: "provider tokens signed in DER, not the JWS R‖S form APNs documents (accepted here)"
            case .broadcastRefusedElsewhere:
                "broadcasts answered 200 by one worker and refused by another (not fanned out there; a fanout bug)"
            }
        }
    }

    /// A value per finding, indexed by the case (a finding can be noted on every request: no hashing).
    public struct PerFinding<Value: Sendable>: Sendable {
        package var values: [Value]
        package init(_ initial: Value) { values = Array(repeating: initial, count: Finding.allCases.count) }
        public subscript(finding: Finding) -> Value? { values[finding.rawValue] }
    }
    public package(set) var findings = PerFinding(0)
    public package(set) var examples = PerFinding([String]())
    public static let examplesPerFinding = 5

    public init() {}

    package mutating func note(_ finding: Finding, _ example: @autoclosure () -> String) {
        let i = finding.rawValue
        findings.values[i] += 1
        if examples.values[i].count < ServeStats.examplesPerFinding { examples.values[i].append(example()) }
    }

    package mutating func answered(_ status: Int, _ reason: APNsReason?) {
        requests += 1
        if status == 200 {
            ok += 1  // the common answer, counted without hashing
        } else {
            otherStatuses[status, default: 0] += 1
        }
        if let reason { byReason[reason, default: 0] += 1 }
    }

    /// Answers read back from a run folder (summary.json's `requests.byStatus` and `byReason`), added.
    package mutating func addAnswers(byStatus: [Int: Int], byReason: [APNsReason: Int]) {
        for (status, n) in byStatus {
            if status == 200 { ok += n } else { otherStatuses[status, default: 0] += n }
        }
        for (reason, n) in byReason { self.byReason[reason, default: 0] += n }
    }

    /// 200 answers (folded into `byStatus` when read).
    private var ok = 0

    /// Adds another worker's counts.
    public static func += (a: inout ServeStats, b: ServeStats) {
        // Every plain count, one list, so that a count added to ServeStats is summed by naming it here once.
        let counts: [WritableKeyPath<ServeStats, Int>] = [
            \.requests, \.ok, \.acceptedPushes, \.acceptedBroadcasts, \.acceptedOtherPushTypes, \.channelRequests,
            \.notThisShard, \.channelRefusals.perApp, \.channelRefusals.bundles, \.channelRefusals.listsCut,
        ]
        for count in counts { a[keyPath: count] += b[keyPath: count] }
        a.otherStatuses.merge(b.otherStatuses, uniquingKeysWith: +)
        a.byReason.merge(b.byReason, uniquingKeysWith: +)
        for i in a.findings.values.indices {
            a.findings.values[i] += b.findings.values[i]
            let room = ServeStats.examplesPerFinding - a.examples.values[i].count
            a.examples.values[i] += b.examples.values[i].prefix(room)
        }
    }

    /// requests = Σ answers by status, and failures = Σ reasons.
    public var identitiesHold: Bool {
        requests == byStatus.values.reduce(0, +)
            && byReason.values.reduce(0, +) == byStatus.filter { $0.key >= 400 }.values.reduce(0, +)
    }
}
