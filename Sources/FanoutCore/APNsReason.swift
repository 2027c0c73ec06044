/// Every answer of APNs's provider API that `fanout serve` gives (docs/INGEST.md §3): the `reason` string
/// and its HTTP status. Plain vocabulary beside `RejectReason` and `UnroutableReason` (which it answers for), so
/// that the serve report (FanoutReport) names answers without FanoutAPNs.
public enum APNsReason: String, CaseIterable, Sendable, Error {
    // 400
    case badCollapseId = "BadCollapseId"
    case badDeviceToken = "BadDeviceToken"
    case badExpirationDate = "BadExpirationDate"
    case badMessageId = "BadMessageId"
    case badPriority = "BadPriority"
    case badTopic = "BadTopic"
    case deviceTokenNotForTopic = "DeviceTokenNotForTopic"
    case duplicateHeaders = "DuplicateHeaders"
    case invalidPushType = "InvalidPushType"
    case missingDeviceToken = "MissingDeviceToken"
    case missingTopic = "MissingTopic"
    case payloadEmpty = "PayloadEmpty"
    case topicDisallowed = "TopicDisallowed"
    case missingChannelId = "MissingChannelId"
    case badChannelId = "BadChannelId"
    case channelNotRegistered = "ChannelNotRegistered"
    case missingPushType = "MissingPushType"
    case badRequestParams = "BadRequestParams"
    case badRequestPayload = "BadRequestPayload"
    case cannotCreateChannelConfig = "CannotCreateChannelConfig"
    // 403
    case expiredProviderToken = "ExpiredProviderToken"
    case invalidProviderToken = "InvalidProviderToken"
    case missingProviderToken = "MissingProviderToken"
    case unrelatedKeyIdInToken = "UnrelatedKeyIdInToken"
    // 404, 405
    case badPath = "BadPath"
    case methodNotAllowed = "MethodNotAllowed"
    // 410
    case unregistered = "Unregistered"
    // 413
    case payloadTooLarge = "PayloadTooLarge"
    // 429
    case tooManyProviderTokenUpdates = "TooManyProviderTokenUpdates"
    case tooManyRequests = "TooManyRequests"
    // 500, 503
    case internalServerError = "InternalServerError"
    case serviceUnavailable = "ServiceUnavailable"
    case shutdown = "Shutdown"

    public var status: Int {
        switch self {
        case .expiredProviderToken, .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken: 403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .unregistered: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        default: 400
        }
    }

    /// The pipeline's rejection (DOMAIN §3.2) as APNs's answer: a switch, so the compiler holds the mapping
    /// total (no force-unwrapped lookup by name on a request's path); tested against `name` over `allCases`.
    package init(_ reason: RejectReason) {
        switch reason {
        case .payloadTooLarge: self = .payloadTooLarge
        case .payloadEmpty: self = .payloadEmpty
        case .invalidPushType: self = .invalidPushType
        case .topicDisallowed: self = .topicDisallowed
        case .badTopic: self = .badTopic
        case .badPriority: self = .badPriority
        case .badCollapseId: self = .badCollapseId
        case .badMessageId: self = .badMessageId
        case .badExpirationDate: self = .badExpirationDate
        case .badRequestPayload: self = .badRequestPayload
        }
    }

    /// The router's verdict on a target it cannot reach (DOMAIN §3.3) as APNs's answer.
    package init(_ reason: UnroutableReason) {
        switch reason {
        case .badDeviceToken: self = .badDeviceToken
        case .unregistered: self = .unregistered
        case .channelNotRegistered: self = .channelNotRegistered
        }
    }
}
