/// Encodes a Live Activity push payload `{"aps":{...}}` (DOMAIN §2) into a reused byte buffer.
///
/// Keys are always written in one order (timestamp, event, content-state, stale-date,
/// dismissal-date, relevance-score, alert, attributes-type, attributes, input-push-token,
/// input-push-channel); strings are escaped (quotes, backslash, control characters as `\u00XX`,
/// UTF-8 passed through); integers for timestamps and dates; doubles in text that reads back to
/// the same value. Content comes as a content record (see `ContentSchema`), so encoding allocates
/// nothing once the buffer has grown.
public struct PayloadEncoder {
    /// The payload, reused from one `encode` to the next (see `ByteBuffer`). Read by `withPayload`, which is
    /// inlinable so that each caller's closure is specialized (no generic thunk per payload).
    @usableFromInline private(set) var buffer: ByteBuffer

    /// A copy of the last payload encoded (this allocates; `withPayload` does not).
    public var bytes: [UInt8] { Array(buffer.bytes) }

    public init(capacity: Int = 4096) {
        buffer = ByteBuffer(capacity: capacity)
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
        buffer.removeAll()
        // Room for everything up to the alert at once (`fixedBytes`: the literals, three integers and a double; the
        // content's worst case), then writes with no capacity check. The alert and start parts check their own.
        buffer.reserve(PayloadEncoder.fixedBytes &+ (content.map { schema.compactJSONBytes(record: $0) } ?? 0))
        buffer.appendReserved("{\"aps\":{\"timestamp\":")
        buffer.appendJSONIntReserved(timestamp)
        switch event {
        case .start: buffer.appendReserved(",\"event\":\"start\"")
        case .update: buffer.appendReserved(",\"event\":\"update\"")
        case .end: buffer.appendReserved(",\"event\":\"end\"")
        }
        if let content {
            buffer.appendReserved(",\"content-state\":")
            schema.appendCompactJSONReserved(record: content, to: &buffer)
        }
        if let staleDate {
            buffer.appendReserved(",\"stale-date\":")
            buffer.appendJSONIntReserved(staleDate)
        }
        if let dismissalDate {
            buffer.appendReserved(",\"dismissal-date\":")
            buffer.appendJSONIntReserved(dismissalDate)
        }
        if let relevanceScore {
            buffer.appendReserved(",\"relevance-score\":")
            buffer.appendJSONDoubleReserved(relevanceScore)
        }
        if let alert {
            buffer.append(",\"alert\":{\"title\":")
            appendString(alert.title)
            buffer.append(",\"body\":")
            appendString(alert.body)
            if let sound = alert.sound {
                buffer.append(",\"sound\":")
                appendString(sound)
            }
            buffer.append(UInt8(ascii: "}"))
        }
        if let start {
            buffer.append(",\"attributes-type\":")
            appendString(start.attributesType)
            buffer.append(",\"attributes\":")
            start.attributesSchema.appendCompactJSON(record: start.attributes, to: &buffer)
            if start.inputPushToken { buffer.append(",\"input-push-token\":1") }
            if let channel = start.inputPushChannel {
                buffer.append(",\"input-push-channel\":")
                appendString(channel)
            }
        }
        buffer.append("}}")
        return buffer.count
    }

    /// The most bytes `encode` writes before the alert but for the content-state object: the literals (20 + 17 +
    /// 17 + 14 + 18 + 19 bytes), three integers (`ByteBuffer.jsonIntBytes`) and a double (`jsonDoubleBytes`).
    static var fixedBytes: Int { 105 &+ 3 &* ByteBuffer.jsonIntBytes &+ ByteBuffer.jsonDoubleBytes }

    /// Runs `body` with the encoded payload.
    @inlinable @inline(__always)
    public func withPayload<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withExtendedLifetime(buffer) { try body(buffer.bytes) }
    }

    /// The byte count of the last payload.
    public var count: Int { buffer.count }

    private mutating func appendString(_ string: String) {
        var copy = string
        copy.withUTF8 { buffer.appendJSONString(UnsafeRawBufferPointer($0)) }
    }
}
