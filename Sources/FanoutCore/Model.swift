/// Why APNs rejects a push before it reaches any device (DOMAIN §3.2). Declared in the order the
/// checks run: the first failing check wins.
public enum RejectReason: Int, CaseIterable, Sendable {
    case payloadTooLarge, payloadEmpty, invalidPushType, topicDisallowed, badTopic, badPriority
    case badCollapseId, badMessageId, badExpirationDate, badRequestPayload

    /// APNs's `reason` string.
    public var name: String {
        switch self {
        case .payloadTooLarge: "PayloadTooLarge"
        case .payloadEmpty: "PayloadEmpty"
        case .invalidPushType: "InvalidPushType"
        case .topicDisallowed: "TopicDisallowed"
        case .badTopic: "BadTopic"
        case .badPriority: "BadPriority"
        case .badCollapseId: "BadCollapseId"
        case .badMessageId: "BadMessageId"
        case .badExpirationDate: "BadExpirationDate"
        case .badRequestPayload: "BadRequestPayload"
        }
    }

    /// APNs's HTTP status.
    public var status: Int { self == .payloadTooLarge ? 413 : 400 }
}

/// Why a valid push addresses nothing (DOMAIN §3.3).
public enum UnroutableReason: Int, CaseIterable, Sendable {
    case badDeviceToken, unregistered, channelNotRegistered

    public var name: String {
        switch self {
        case .badDeviceToken: "BadDeviceToken"
        case .unregistered: "Unregistered"
        case .channelNotRegistered: "ChannelNotRegistered"
        }
    }

    public var status: Int { self == .unregistered ? 410 : 400 }
}

/// What happened to a routed push at one recipient (DOMAIN §6), in the report order.
public enum Outcome: Int, CaseIterable, Sendable {
    case applied, ignoredEnded, ignoredStaleTimestamp, throttled, decodeFailed, limitExceeded, expired, coalesced

    public var name: String {
        switch self {
        case .applied: "applied"
        case .ignoredEnded: "ignoredEnded"
        case .ignoredStaleTimestamp: "ignoredStaleTimestamp"
        case .throttled: "throttled"
        case .decodeFailed: "decodeFailed"
        case .limitExceeded: "limitExceeded"
        case .expired: "expired"
        case .coalesced: "coalesced"
        }
    }
}

/// Lifecycle of an activity (DOMAIN §1, §4).
public enum ActivityState: UInt8, Sendable {
    case active, stale, ended, dismissed

    public var name: String {
        switch self {
        case .active: "active"
        case .stale: "stale"
        case .ended: "ended"
        case .dismissed: "dismissed"
        }
    }

    /// Counts against the per-app and per-device limits and may hold a Dynamic Island slot.
    public var isLive: Bool { self == .active || self == .stale }
}

public enum PushEvent: UInt8, Sendable {
    case start, update, end
}

/// The verdict of validate and route for one push (DOMAIN §6).
public enum PushVerdict: Equatable, Sendable {
    case rejected(RejectReason)
    case unroutable(UnroutableReason)
    case routed(recipients: Int)
}

/// Counters of every verdict and outcome. Every push gets one verdict and every delivery one
/// outcome, so the identities of DOMAIN §6 hold by construction; `identitiesHold` checks them.
public struct Accounting: Equatable, Sendable {
    public var pushes: Int = 0
    public var rejected = [Int](repeating: 0, count: RejectReason.allCases.count)
    public var unroutable = [Int](repeating: 0, count: UnroutableReason.allCases.count)
    public var routed: Int = 0
    public var deliveries: Int = 0
    public var outcomes = [Int](repeating: 0, count: Outcome.allCases.count)
    /// `request` operations (an app starting an activity in the foreground) and those refused.
    public var requests: Int = 0
    public var requestsLimitExceeded: Int = 0

    public init() {}

    public var rejectedTotal: Int { rejected.reduce(0, +) }
    public var unroutableTotal: Int { unroutable.reduce(0, +) }
    public var outcomesTotal: Int { outcomes.reduce(0, +) }

    public subscript(_ outcome: Outcome) -> Int { outcomes[outcome.rawValue] }
    public subscript(_ reason: RejectReason) -> Int { rejected[reason.rawValue] }
    public subscript(_ reason: UnroutableReason) -> Int { unroutable[reason.rawValue] }

    /// pushes = rejected + unroutable + routed, and deliveries = Σ outcomes.
    public var identitiesHold: Bool {
        pushes == rejectedTotal + unroutableTotal + routed && deliveries == outcomesTotal
    }

    /// Adds another shard's or worker's counts.
    public static func += (a: inout Accounting, b: Accounting) {
        a.pushes += b.pushes
        a.routed += b.routed
        a.deliveries += b.deliveries
        a.requests += b.requests
        a.requestsLimitExceeded += b.requestsLimitExceeded
        for i in a.rejected.indices { a.rejected[i] += b.rejected[i] }
        for i in a.unroutable.indices { a.unroutable[i] += b.unroutable[i] }
        for i in a.outcomes.indices { a.outcomes[i] += b.outcomes[i] }
    }
}

/// Parameters DOMAIN marks [model]: limits and the priority-10 budget.
public struct DeviceRules: Sendable, Equatable {
    public var perAppLimit: Int
    public var perDeviceLimit: Int
    /// Counted priority-10 pushes per activity per sliding hour; nil = unlimited.
    public var budgetPerHour: Int?

    public init(perAppLimit: Int = 5, perDeviceLimit: Int = 10, budgetPerHour: Int? = nil) {
        self.perAppLimit = perAppLimit
        self.perDeviceLimit = perDeviceLimit
        self.budgetPerHour = budgetPerHour
    }
}

/// Time constants of DOMAIN §4, in milliseconds.
public enum Lifetime {
    public static let systemEndMillis: Int64 = 8 * 3_600_000
    public static let dismissAfterEndMillis: Int64 = 4 * 3_600_000
    public static let budgetWindowMillis: Int64 = 3_600_000
}

/// Exact instant handling for dates given in (possibly non-integral) UNIX seconds.
public enum Instant {
    /// The first integer millisecond `m` with `m / 1000 >= seconds`, computed exactly (no rounding),
    /// so that `nowMillis >= ceilMillis(s)` ⇔ `nowMillis / 1000 >= s`. Saturates at the Int64 range.
    public static func ceilMillis(seconds: Double) -> Int64 {
        precondition(seconds.isFinite)
        if seconds == seconds.rounded(.towardZero) {
            if seconds >= 9.2e15 { return Int64.max }
            if seconds <= -9.2e15 { return Int64.min }
            return Int64(seconds) * 1000
        }
        // Non-integral: |seconds| < 2^52 so seconds = mantissa × 2^-k with k in 1...1074.
        if abs(seconds) >= 9.2e15 { return seconds > 0 ? Int64.max : Int64.min }
        let exponent = seconds.exponent  // seconds = ±1.f × 2^exponent
        let significand = Int64(seconds.significandBitPattern | (1 << 52))  // 53 bits
        let shift = 52 - Int(exponent)  // seconds = significand × 2^-shift, shift ≥ 1
        let sign: Int64 = seconds < 0 ? -1 : 1
        if shift >= 63 + 10 {
            // |seconds| < 2^-10: 1000·seconds lies strictly within (-1, 1).
            return sign > 0 ? 1 : 0
        }
        // 1000 × significand fits in 63 bits (2^53 × 1000 < 2^63).
        let numerator = significand * 1000
        if shift >= 63 { return sign > 0 ? 1 : 0 }
        let quotient = numerator >> Int64(shift)
        let exact = (quotient << Int64(shift)) == numerator
        if sign > 0 { return exact ? quotient : quotient + 1 }
        return -quotient  // ceil of a negative value truncates toward zero
    }

    /// Milliseconds of an integral UNIX-seconds date, saturating.
    @inline(__always)
    public static func millis(seconds: Int64) -> Int64 {
        let (m, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds > 0 ? Int64.max : Int64.min }
        return m
    }
}
