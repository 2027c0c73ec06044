/// A push header value as a provider sent it. A trace carries any JSON value; the checks decide.
public enum HeaderValue {
    case null
    /// UTF-8 bytes; valid only during the call that receives them.
    case string(UnsafeRawBufferPointer)
    /// An integral number in Int64 range (`10`, `10.0`).
    case integer(Int64)
    /// Anything else: a non-integral number, a bool, an object, an array.
    case other
}

/// How a push is addressed (DOMAIN §3.3).
public enum TargetKind: UInt8, Sendable {
    /// An activity's update token.
    case token
    /// A broadcast channel.
    case channel
    /// An app's push-to-start token on a device.
    case startToken

    /// The payload limit in bytes: 4096 for token pushes, 5120 for broadcasts (DOMAIN §2).
    public var payloadLimit: Int { self == .channel ? 5120 : 4096 }
}

/// The APNs request headers of a push (DOMAIN §2).
public struct PushHeaders {
    public var pushType: HeaderValue
    public var topic: HeaderValue
    public var priority: HeaderValue
    public var expiration: HeaderValue
    public var collapseId: HeaderValue
    public var apnsId: HeaderValue

    public init(
        pushType: HeaderValue, topic: HeaderValue, priority: HeaderValue, expiration: HeaderValue,
        collapseId: HeaderValue = .null, apnsId: HeaderValue = .null
    ) {
        self.pushType = pushType
        self.topic = topic
        self.priority = priority
        self.expiration = expiration
        self.collapseId = collapseId
        self.apnsId = apnsId
    }
}

/// How a push's headers reach validation: as the request carried them (the validator judges DOMAIN §2's header
/// rows), or judged already by the caller in APNs's order (fanout serve's request check: rows 6–14 and topic ≡
/// bundle), with the priority they gave; then only the payload is judged here.
public enum PushHeaderInput {
    case headers(PushHeaders)
    case judged(priority: Int64)
}

/// Where the members of `aps` are on the validator's tape (-1 = absent).
public struct ApsFields: Sendable {
    public var event: PushEvent = .update
    public var timestamp: Int64 = 0
    public var priority: Int64 = 10
    public var contentState: Int32 = -1
    public var staleDate: Int32 = -1
    public var dismissalDate: Int32 = -1
    public var relevanceScore: Int32 = -1
    public var alert: Int32 = -1
    public var attributesType: Int32 = -1
    public var attributes: Int32 = -1
    public var inputPushChannel: Int32 = -1
    /// Judged in one pass (`PayloadOnePass`): the validator's tape was not written and the indices above are
    /// unset; a decode scans the payload again for them.
    var tapeless = false

    public init() {}
}

/// What APNs would reject (DOMAIN §3.2, TRACE rules 4–7), judged in one scan of the payload.
/// The first failing check wins, in `RejectReason`'s order. Allocates nothing in steady state.
public struct PayloadValidator {
    /// The scanned payload: its entries, read with the payload's bytes (`tape.reading(payload)`) by whoever
    /// holds them (the tape keeps no pointer to them).
    public var tape = JSONTape()
    /// The members of `aps` of the last accepted payload.
    public private(set) var aps = ApsFields()

    public static let topicSuffix: StaticString = ".push-type.liveactivity"

    public init() {}

    /// Judges a push. `targetBundle` is the bundle id of the app the target resolves to (an issued
    /// update token → its activity's app; a start token → its app; a channel → the app of its first
    /// subscriber), or nil when the target does not resolve; BadTopic is checked only then.
    public mutating func validate(
        headers: PushHeaders, payload: UnsafeRawBufferPointer, target: TargetKind,
        targetBundle: UnsafeRawBufferPointer?
    ) -> RejectReason? {
        let matches = targetBundle.map { PayloadValidator.topicNames($0, headers.topic) }
        return validate(headers: headers, payload: payload, target: target, topicMatchesTarget: matches)
    }

    /// True when `topic` is a string whose bundle part (before `.push-type.liveactivity`) is `bundle`.
    @inline(__always)
    static func topicNames(_ bundle: UnsafeRawBufferPointer, _ topic: HeaderValue) -> Bool {
        guard case .string(let topic) = topic, hasTopicSuffix(topic) else { return false }
        // Equal lengths, then whole words (`memoryEqual`), not a byte-by-byte ordering.
        let length = topic.count - PayloadValidator.topicSuffix.utf8CodeUnitCount
        guard length == bundle.count else { return false }
        return length == 0 || memoryEqual(topic.baseAddress!, bundle.baseAddress!, length)
    }

    /// `validate(headers:payload:target:targetBundle:)` with the BadTopic comparison done by the
    /// caller: `topicMatchesTarget` is nil when the target does not resolve.
    @inline(__always)
    mutating func validate(
        headers: PushHeaders, payload: UnsafeRawBufferPointer, target: TargetKind, topicMatchesTarget: Bool?
    ) -> RejectReason? {
        var priority: Int64 = 0
        if let reason = PayloadValidator.judgeHeaders(
            headers, payloadCount: payload.count, target: target, topicMatchesTarget: topicMatchesTarget,
            priority: &priority)
        {
            return reason
        }
        guard validatePayload(payload, target: target) else { return .badRequestPayload }
        aps.priority = priority
        return nil
    }

    /// DOMAIN §2's header rows and the payload's size, in `RejectReason`'s order; the priority when they pass.
    @inline(__always)
    static func judgeHeaders(
        _ headers: PushHeaders, payloadCount: Int, target: TargetKind, topicMatchesTarget: Bool?,
        priority judged: inout Int64
    ) -> RejectReason? {
        if payloadCount > target.payloadLimit { return .payloadTooLarge }
        if payloadCount == 0 { return .payloadEmpty }
        guard case .string(let pushType) = headers.pushType, PayloadValidator.equals(pushType, "liveactivity") else {
            return .invalidPushType
        }
        guard case .string(let topic) = headers.topic, PayloadValidator.hasTopicSuffix(topic) else {
            return .topicDisallowed
        }
        if topicMatchesTarget == false { return .badTopic }
        guard case .integer(let priority) = headers.priority,
            priority == 5 || priority == 10 || (priority == 1 && target == .channel)
        else { return .badPriority }
        switch headers.collapseId {
        case .null: break
        case .string(let id) where id.count <= 64: break
        default: return .badCollapseId
        }
        switch headers.apnsId {
        case .null: break
        case .string(let id) where PayloadValidator.isCanonicalUUID(id): break
        default: return .badMessageId
        }
        guard case .integer(let expiration) = headers.expiration, expiration >= 0,
            target != .channel || expiration == 0
        else { return .badExpirationDate }
        judged = priority
        return nil
    }

    /// Accepts a payload that `PayloadOnePass` judged: `aps` holds its event, timestamp and priority, marked
    /// `tapeless`; the tape is emptied (it holds no scan of this payload, so it cannot be read with it).
    @inline(__always)
    mutating func acceptOnePass(event: PushEvent, timestamp: Int64, priority: Int64) {
        tape.forget()
        var fields = ApsFields()
        fields.event = event
        fields.timestamp = timestamp
        fields.priority = priority
        fields.tapeless = true
        aps = fields
    }

    /// The payload alone, for headers judged by the caller (``PushHeaderInput/judged(priority:)``): strict JSON,
    /// `aps`, event and timestamp; the size was judged with the headers.
    @inline(__always)
    public mutating func validateJudged(
        priority: Int64, payload: UnsafeRawBufferPointer, target: TargetKind
    ) -> RejectReason? {
        guard validatePayload(payload, target: target) else { return .badRequestPayload }
        aps.priority = priority
        return nil
    }

    /// Strict JSON, `aps` an object, a known `event` that fits the target, an integral `timestamp`.
    @inline(__always)
    private mutating func validatePayload(_ payload: UnsafeRawBufferPointer, target: TargetKind) -> Bool {
        guard tape.scan(payload) == nil else { return false }
        let tape = self.tape.reading(payload)
        guard tape[0].kind == .object else { return false }
        let apsIndex = tape.member(0, "aps")
        guard apsIndex >= 0, tape[apsIndex].kind == .object else { return false }
        var fields = ApsFields()
        var event = -1
        var timestamp = -1
        // One walk over `aps`; later duplicates overwrite earlier ones (the last one wins).
        let end = Int(tape[apsIndex].next)
        var key = apsIndex + 1
        while key < end {
            let value = Int32(key + 1)
            let e = tape[key]
            switch Int(e.end - e.start) {
            case 5 where tape.stringEquals(key, "event"): event = key + 1
            case 5 where tape.stringEquals(key, "alert"): fields.alert = value
            case 9 where tape.stringEquals(key, "timestamp"): timestamp = key + 1
            case 10 where tape.stringEquals(key, "stale-date"): fields.staleDate = value
            case 10 where tape.stringEquals(key, "attributes"): fields.attributes = value
            case 13 where tape.stringEquals(key, "content-state"): fields.contentState = value
            case 14 where tape.stringEquals(key, "dismissal-date"): fields.dismissalDate = value
            case 15 where tape.stringEquals(key, "relevance-score"): fields.relevanceScore = value
            case 15 where tape.stringEquals(key, "attributes-type"): fields.attributesType = value
            case 18 where tape.stringEquals(key, "input-push-channel"): fields.inputPushChannel = value
            default:
                if e.flag { PayloadValidator.matchEscapedKey(tape, key, &fields, &event, &timestamp) }
            }
            key = Int(tape[key + 1].next)
        }
        guard event >= 0, tape[event].kind == .string else { return false }
        if tape.stringEquals(event, "update") {
            fields.event = .update
        } else if tape.stringEquals(event, "end") {
            fields.event = .end
        } else if tape.stringEquals(event, "start") {
            fields.event = .start
        } else {
            return false
        }
        guard timestamp >= 0, let ts = tape.int64(timestamp) else { return false }
        fields.timestamp = ts
        guard (fields.event == .start) == (target == .startToken) else { return false }
        aps = fields
        return true
    }

    /// A key written with escapes (`"ev\u0065nt"`) names the same member as the plain one.
    private static func matchEscapedKey(
        _ tape: JSONDocument, _ key: Int, _ fields: inout ApsFields, _ event: inout Int, _ timestamp: inout Int
    ) {
        let value = Int32(key + 1)
        if tape.stringEquals(key, "event") {
            event = key + 1
        } else if tape.stringEquals(key, "timestamp") {
            timestamp = key + 1
        } else if tape.stringEquals(key, "alert") {
            fields.alert = value
        } else if tape.stringEquals(key, "stale-date") {
            fields.staleDate = value
        } else if tape.stringEquals(key, "attributes") {
            fields.attributes = value
        } else if tape.stringEquals(key, "content-state") {
            fields.contentState = value
        } else if tape.stringEquals(key, "dismissal-date") {
            fields.dismissalDate = value
        } else if tape.stringEquals(key, "relevance-score") {
            fields.relevanceScore = value
        } else if tape.stringEquals(key, "attributes-type") {
            fields.attributesType = value
        } else if tape.stringEquals(key, "input-push-channel") {
            fields.inputPushChannel = value
        }
    }

    @inline(__always)
    static func equals(_ bytes: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
        bytes.count == literal.utf8CodeUnitCount
            && (bytes.count == 0 || memoryEqual(bytes.baseAddress!, literal.utf8Start, bytes.count))
    }

    /// Ends in `.push-type.liveactivity`; the bundle part is compared by the BadTopic check.
    @inline(__always)
    static func hasTopicSuffix(_ topic: UnsafeRawBufferPointer) -> Bool {
        let n = topicSuffix.utf8CodeUnitCount
        guard topic.count >= n else { return false }
        return memoryEqual(topic.baseAddress! + (topic.count - n), topicSuffix.utf8Start, n)
    }

    /// 8-4-4-4-12 hex digits, either case (a payload's `apns-id`, and `fanout serve`'s `apns-id` and
    /// `apns-request-id` headers). Every byte is judged and the verdicts OR-ed, with one branch at the end: a
    /// client's distinct ids (digits and letters at random) made an early-exit form mispredict every few bytes
    /// (perf of `fanout serve` under `fanout push`: 4% of its CPU, against 1.7% for one id repeated).
    public static func isCanonicalUUID(_ id: UnsafeRawBufferPointer) -> Bool {
        guard id.count == 36 else { return false }
        let p = id.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let dash = UInt8(ascii: "-")
        var bad = (p[8] ^ dash) | (p[13] ^ dash) | (p[18] ^ dash) | (p[23] ^ dash)
        @inline(__always) func notHex(_ c: UInt8) -> UInt8 {
            // A digit: c - '0' < 10; a letter a-f or A-F: (c | 0x20) - 'a' < 6 (0x20 folds the case).
            let digit: UInt8 = (c &- 0x30) < 10 ? 1 : 0
            let letter: UInt8 = ((c | 0x20) &- 0x61) < 6 ? 1 : 0
            return (digit | letter) ^ 1
        }
        for i in 0..<8 { bad |= notHex(p[i]) }
        for i in 9..<13 { bad |= notHex(p[i]) }
        for i in 14..<18 { bad |= notHex(p[i]) }
        for i in 19..<23 { bad |= notHex(p[i]) }
        for i in 24..<36 { bad |= notHex(p[i]) }
        return bad == 0
    }

    /// A device token is well-formed when non-empty, of even length and hex (TRACE rule 8).
    public static func isWellFormedToken(_ token: UnsafeRawBufferPointer) -> Bool {
        guard token.count > 0, token.count % 2 == 0 else { return false }
        for byte in token where JSONTape.hexDigit(byte) == nil { return false }
        return true
    }
}
