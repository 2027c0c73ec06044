/// Encodes a Live Activity push payload `{"aps":{...}}` (DOMAIN §2) into a reused byte buffer.
///
/// Keys are always written in one order (timestamp, event, content-state, stale-date,
/// dismissal-date, relevance-score, alert, attributes-type, attributes, input-push-token,
/// input-push-channel); strings are escaped (quotes, backslash, control characters as `\u00XX`,
/// UTF-8 passed through); integers for timestamps and dates; doubles in text that reads back to
/// the same value. Content comes as a content record (see `ContentSchema`), so encoding allocates
/// nothing once the buffer has grown.
public struct PayloadEncoder {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 4096) {
        bytes.reserveCapacity(capacity)
    }

    /// The alert of a start (required) or an update/end (optional).
    public struct Alert: Sendable {
        public var title: String
        public var body: String
        public var sound: String?

        public init(title: String, body: String, sound: String? = nil) {
            self.title = title
            self.body = body
            self.sound = sound
        }
    }

    /// The push-to-start part of a `start` payload.
    public struct Start {
        public var attributesType: String
        /// Static attributes, as a record of `attributesSchema`.
        public var attributes: UnsafeRawBufferPointer
        public var attributesSchema: ContentSchema
        /// Ask for the new activity's update token (`"input-push-token": 1`).
        public var inputPushToken: Bool
        /// Or subscribe the new activity to a broadcast channel.
        public var inputPushChannel: String?

        public init(
            attributesType: String, attributes: UnsafeRawBufferPointer, attributesSchema: ContentSchema,
            inputPushToken: Bool = true, inputPushChannel: String? = nil
        ) {
            self.attributesType = attributesType
            self.attributes = attributes
            self.attributesSchema = attributesSchema
            self.inputPushToken = inputPushToken
            self.inputPushChannel = inputPushChannel
        }
    }

    /// Encodes one payload, replacing the buffer's contents; returns its byte count.
    /// `content` is a record of `schema` (nil: no `content-state`, allowed on `end` only).
    @discardableResult
    public mutating func encode(
        event: PushEvent, timestamp: Int64, content: UnsafeRawBufferPointer?, schema: ContentSchema,
        staleDate: Int64? = nil, dismissalDate: Int64? = nil, relevanceScore: Double? = nil,
        alert: Alert? = nil, start: Start? = nil
    ) -> Int {
        bytes.removeAll(keepingCapacity: true)
        JSONWriter.append("{\"aps\":{\"timestamp\":", to: &bytes)
        JSONWriter.appendInt(timestamp, to: &bytes)
        switch event {
        case .start: JSONWriter.append(",\"event\":\"start\"", to: &bytes)
        case .update: JSONWriter.append(",\"event\":\"update\"", to: &bytes)
        case .end: JSONWriter.append(",\"event\":\"end\"", to: &bytes)
        }
        if let content {
            JSONWriter.append(",\"content-state\":", to: &bytes)
            schema.appendJSON(record: content, style: .compact, to: &bytes)
        }
        if let staleDate {
            JSONWriter.append(",\"stale-date\":", to: &bytes)
            JSONWriter.appendInt(staleDate, to: &bytes)
        }
        if let dismissalDate {
            JSONWriter.append(",\"dismissal-date\":", to: &bytes)
            JSONWriter.appendInt(dismissalDate, to: &bytes)
        }
        if let relevanceScore {
            JSONWriter.append(",\"relevance-score\":", to: &bytes)
            JSONWriter.appendDouble(relevanceScore, to: &bytes)
        }
        if let alert {
            JSONWriter.append(",\"alert\":{\"title\":", to: &bytes)
            JSONWriter.appendString(alert.title, to: &bytes)
            JSONWriter.append(",\"body\":", to: &bytes)
            JSONWriter.appendString(alert.body, to: &bytes)
            if let sound = alert.sound {
                JSONWriter.append(",\"sound\":", to: &bytes)
                JSONWriter.appendString(sound, to: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
        if let start {
            JSONWriter.append(",\"attributes-type\":", to: &bytes)
            JSONWriter.appendString(start.attributesType, to: &bytes)
            JSONWriter.append(",\"attributes\":", to: &bytes)
            start.attributesSchema.appendJSON(record: start.attributes, style: .compact, to: &bytes)
            if start.inputPushToken { JSONWriter.append(",\"input-push-token\":1", to: &bytes) }
            if let channel = start.inputPushChannel {
                JSONWriter.append(",\"input-push-channel\":", to: &bytes)
                JSONWriter.appendString(channel, to: &bytes)
            }
        }
        JSONWriter.append("}}", to: &bytes)
        return bytes.count
    }

    /// Runs `body` with the encoded payload.
    @inline(__always)
    public func withPayload<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }
}
