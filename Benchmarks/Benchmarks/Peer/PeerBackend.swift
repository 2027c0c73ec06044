import BenchFixtures
import Foundation

// The same four stages as FanoutCore, written the way a typical Swift backend would write them:
// Codable models and a reused `JSONEncoder`/`JSONDecoder`, `JSONSerialization` for the generic
// payload checks APNs makes, `[String: String]` headers, dictionaries keyed by token and id, class
// instances per activity. Same inputs (content, tokens, headers, payload bytes) and the same rules:
// APNs's header and payload checks in DOMAIN §3.2's order, token routing (§3.3), and apply's
// ended → stale timestamp → budget → decode order (§3.4), stale and relevance fields, relevance
// order per device (§5), outcome counts (§6).

/// A push payload as the backend models it (ActivityKit's keys).
struct LiveActivityPayload<ContentState: Codable>: Codable {
    struct APS: Codable {
        var timestamp: Int
        var event: String
        var contentState: ContentState?
        var staleDate: Int?
        var dismissalDate: Int?
        var relevanceScore: Double?

        enum CodingKeys: String, CodingKey {
            case timestamp, event
            case contentState = "content-state"
            case staleDate = "stale-date"
            case dismissalDate = "dismissal-date"
            case relevanceScore = "relevance-score"
        }
    }

    var aps: APS
}

/// What APNs rejects (DOMAIN §3.2), in check order.
enum PeerRejection: String, Error {
    case payloadTooLarge = "PayloadTooLarge", payloadEmpty = "PayloadEmpty", invalidPushType = "InvalidPushType"
    case topicDisallowed = "TopicDisallowed", badTopic = "BadTopic", badPriority = "BadPriority"
    case badCollapseId = "BadCollapseId", badMessageId = "BadMessageId", badExpirationDate = "BadExpirationDate"
    case badRequestPayload = "BadRequestPayload"
}

enum PeerOutcome: String {
    case applied, ignoredEnded, ignoredStaleTimestamp, throttled, decodeFailed
}

/// Why a valid push addresses nothing (DOMAIN §3.3).
enum PeerUnroutable: String, Error {
    case badDeviceToken = "BadDeviceToken", unregistered = "Unregistered"
}

enum PeerVerdict: Equatable {
    case rejected(PeerRejection)
    case unroutable(PeerUnroutable)
    case delivered(PeerOutcome)
}

/// The fields of an accepted push that routing and the device need.
struct ValidatedPush {
    var event: String
    var timestamp: Int
    var priority: Int
}

final class PeerActivity {
    let id: String
    let deviceId: String
    let bundle: String
    var token: String
    var content: MatchContent
    var timestamp: Int?
    var staleDate: Int?
    var relevance: Double
    let startMillis: Int64
    var endMillis: Int64
    var dismissMillis: Int64
    var outcomes: [PeerOutcome: Int] = [:]

    init(id: String, deviceId: String, bundle: String, token: String, content: MatchContent, relevance: Double,
         startMillis: Int64) {
        self.id = id
        self.deviceId = deviceId
        self.bundle = bundle
        self.token = token
        self.content = content
        self.relevance = relevance
        self.startMillis = startMillis
        endMillis = startMillis + 8 * 3_600_000
        dismissMillis = endMillis + 4 * 3_600_000
    }

    /// Active or stale: not ended, not dismissed (DOMAIN §4).
    func isLive(at nowMillis: Int64) -> Bool {
        nowMillis < endMillis && nowMillis < dismissMillis
    }
}

final class PeerBackend {
    static let topicSuffix = ".push-type.liveactivity"
    static let events: Set<String> = ["start", "update", "end"]

    let encoder = JSONEncoder()
    let decoder = JSONDecoder()
    var activities: [String: PeerActivity] = [:]
    var activityIdByToken: [String: String] = [:]
    /// Activity ids of each device in relevance order (DOMAIN §5).
    var deviceOrder: [String: [String]] = [:]
    var outcomeCounts: [PeerOutcome: Int] = [:]
    var budgetPerHour: Int?

    // MARK: Population

    func request(id: String, deviceId: String, bundle: String, token: String, content: MatchContent,
                 relevance: Double, nowMillis: Int64) {
        let activity = PeerActivity(
            id: id, deviceId: deviceId, bundle: bundle, token: token, content: content, relevance: relevance,
            startMillis: nowMillis)
        activities[id] = activity
        activityIdByToken[token] = id
        deviceOrder[deviceId, default: []].append(id)
        sortDevice(deviceId)
    }

    // MARK: encode

    func encode(_ content: MatchContent, timestamp: Int, staleDate: Int?, relevanceScore: Double?) throws -> Data {
        let payload = LiveActivityPayload(aps: .init(
            timestamp: timestamp, event: "update", contentState: content, staleDate: staleDate,
            relevanceScore: relevanceScore))
        return try encoder.encode(payload)
    }

    // MARK: validate (APNs)

    func validate(headers: [String: String], payload: Data, isChannel: Bool, bundle: String?)
        -> Result<ValidatedPush, PeerRejection>
    {
        if payload.count > (isChannel ? 5120 : 4096) { return .failure(.payloadTooLarge) }
        if payload.isEmpty { return .failure(.payloadEmpty) }
        guard headers["apns-push-type"] == "liveactivity" else { return .failure(.invalidPushType) }
        guard let topic = headers["apns-topic"], topic.hasSuffix(Self.topicSuffix) else {
            return .failure(.topicDisallowed)
        }
        if let bundle, topic.dropLast(Self.topicSuffix.count) != bundle { return .failure(.badTopic) }
        guard let priority = headers["apns-priority"].flatMap({ Int($0) }),
            priority == 5 || priority == 10 || (priority == 1 && isChannel)
        else { return .failure(.badPriority) }
        if let collapseId = headers["apns-collapse-id"], collapseId.utf8.count > 64 {
            return .failure(.badCollapseId)
        }
        if let apnsId = headers["apns-id"], UUID(uuidString: apnsId) == nil { return .failure(.badMessageId) }
        guard let expiration = headers["apns-expiration"].flatMap({ Int($0) }), expiration >= 0,
            !isChannel || expiration == 0
        else { return .failure(.badExpirationDate) }
        guard let root = try? JSONSerialization.jsonObject(with: payload) as? [String: Any],
            let aps = root["aps"] as? [String: Any],
            let event = aps["event"] as? String, Self.events.contains(event),
            let timestamp = aps["timestamp"] as? Int, !(aps["timestamp"] is Bool),
            event != "start"
        else { return .failure(.badRequestPayload) }
        return .success(ValidatedPush(event: event, timestamp: timestamp, priority: priority))
    }

    // MARK: route

    func route(token: String) -> Result<PeerActivity, PeerUnroutable> {
        guard !token.isEmpty, token.utf8.count % 2 == 0, token.allSatisfy(\.isHexDigit) else {
            return .failure(.badDeviceToken)
        }
        guard let id = activityIdByToken[token], let activity = activities[id] else {
            return .failure(.unregistered)
        }
        return .success(activity)
    }

    // MARK: apply (the device)

    func apply(_ push: ValidatedPush, payload: Data, to activity: PeerActivity, nowMillis: Int64) -> PeerOutcome {
        let outcome = applyOutcome(push, payload: payload, to: activity, nowMillis: nowMillis)
        outcomeCounts[outcome, default: 0] += 1
        activity.outcomes[outcome, default: 0] += 1
        return outcome
    }

    private func applyOutcome(_ push: ValidatedPush, payload: Data, to activity: PeerActivity, nowMillis: Int64)
        -> PeerOutcome
    {
        guard activity.isLive(at: nowMillis) else { return .ignoredEnded }
        if let last = activity.timestamp, push.timestamp <= last { return .ignoredStaleTimestamp }
        if push.priority == 10, let budget = budgetPerHour, budget <= 0 { return .throttled }
        guard let decoded = try? decoder.decode(LiveActivityPayload<MatchContent>.self, from: payload) else {
            return .decodeFailed
        }
        let aps = decoded.aps
        guard aps.contentState != nil || push.event == "end" else { return .decodeFailed }
        activity.timestamp = push.timestamp
        if let content = aps.contentState {
            activity.content = content
            activity.staleDate = aps.staleDate
            let relevance = aps.relevanceScore ?? 0
            if relevance != activity.relevance {
                activity.relevance = relevance
                sortDevice(activity.deviceId)
            }
        }
        if push.event == "end" {
            activity.endMillis = nowMillis
            let latest = nowMillis + 4 * 3_600_000
            var dismissal = latest
            if let date = aps.dismissalDate {
                dismissal = Int64(date) * 1000 <= nowMillis ? nowMillis : min(Int64(date) * 1000, latest)
            }
            activity.dismissMillis = min(activity.dismissMillis, dismissal)
        }
        return .applied
    }

    /// Relevance first, then start time, then id (DOMAIN §5).
    private func sortDevice(_ deviceId: String) {
        deviceOrder[deviceId]?.sort { a, b in
            let x = activities[a]!
            let y = activities[b]!
            if x.relevance != y.relevance { return x.relevance > y.relevance }
            if x.startMillis != y.startMillis { return x.startMillis < y.startMillis }
            return x.id < y.id
        }
    }

    // MARK: The whole path

    func push(token: String, headers: [String: String], payload: Data, nowMillis: Int64) -> PeerVerdict {
        // The target is looked up first: its app is what the BadTopic check compares the topic with.
        let routed = route(token: token)
        let bundle = try? routed.get().bundle
        let push: ValidatedPush
        switch validate(headers: headers, payload: payload, isChannel: false, bundle: bundle) {
        case .failure(let reason): return .rejected(reason)
        case .success(let accepted): push = accepted
        }
        switch routed {
        case .failure(let reason): return .unroutable(reason)
        case .success(let activity):
            return .delivered(apply(push, payload: payload, to: activity, nowMillis: nowMillis))
        }
    }
}
