import FanoutCore

#if canImport(Glibc)
import Glibc
#endif

/// What a request asks for, once its method and path are known.
public enum APNsRoute: Equatable, Sendable {
    /// The token as a slice of the request's path (no copy per request).
    case push(token: ArraySlice<UInt8>)
    case broadcast(bundle: [UInt8])
    case createChannel(bundle: [UInt8])
    case readChannel(bundle: [UInt8])
    case deleteChannel(bundle: [UInt8])
    case listChannels(bundle: [UInt8])

    var isBroadcastOrChannel: Bool {
        if case .push = self { return false }
        return true
    }
}

/// The headers of a push or broadcast, checked (rows 4 and 6–15 of docs/INGEST.md §3) and parsed.
public struct CheckedHeaders: Sendable {
    /// `apns-push-type` lowercased (its bytes are only kept for another push type than `liveactivity`).
    public var pushType: [UInt8] = []
    public var isLiveActivity = false
    public var topic: ArraySlice<UInt8>?
    public var priority = 10
    public var expiration: Int64 = 0
    public var expirationGiven = false
    public var collapseId: [UInt8]?
    /// `apns-id` (token pushes) or `apns-request-id` (broadcast, channel): the request's, if valid.
    public var messageId: UniqueHeader?
    /// The decoded `apns-channel-id`.
    public var channelId: [UInt8]?
    public var channelIdText: String?
}

/// The checks of docs/INGEST.md §3 that need no device state, in its order. Pure functions of the request.
public enum RequestCheck {
    /// The push types APNs knows (`apns-push-type`).
    static let pushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]

    /// Rows 1–3: method and path (compared as bytes: no string is built per request).
    public static func route(method: [UInt8], path: [UInt8]) -> Result<APNsRoute, APNsReason> {
        var found = APNsRoute.push(token: [])
        if let reason = route(method: method, path: path, into: &found) { return .failure(reason) }
        return .success(found)
    }

    /// The same, for the service's path: the route written into `found`, the reason returned (nil: rows 1–3
    /// passed). No `Result` of the route is made and destroyed per request (the generic enum's value witness:
    /// ~90 instructions a request).
    static func route(method: [UInt8], path: [UInt8], into found: inout APNsRoute) -> APNsReason? {
        enum Method { case post, get, delete }
        let m: Method
        if bytesEqual(method, "POST") {
            m = .post
        } else if bytesEqual(method, "GET") {
            m = .get
        } else if bytesEqual(method, "DELETE") {
            m = .delete
        } else {
            return .methodNotAllowed
        }
        let device = 10  // "/3/device/"
        if path.withUnsafeBytes({ bytesEqual($0, "/3/device/", whole: false) }) {
            guard m == .post else { return .methodNotAllowed }
            guard path.count > device else { return .missingDeviceToken }
            found = .push(token: path[device...])
            return nil
        }
        if bytesEqual(path, "/3/device") { return m == .post ? .missingDeviceToken : .methodNotAllowed }
        let parts = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        func part(_ i: Int, _ text: StaticString) -> Bool { bytesEqual(parts[i], text) }
        // "/4/broadcasts/apps/<bundle>" → ["", "4", "broadcasts", "apps", bundle]
        if parts.count == 5, part(1, "4"), part(2, "broadcasts"), part(3, "apps"), !parts[4].isEmpty {
            guard m == .post else { return .methodNotAllowed }
            found = .broadcast(bundle: Array(parts[4]))
            return nil
        }
        // "/1/apps/<bundle>/channels" and "/1/apps/<bundle>/all-channels"
        if parts.count == 5, part(1, "1"), part(2, "apps"), !parts[3].isEmpty {
            let bundle = Array(parts[3])
            if part(4, "channels") {
                switch m {
                case .post: found = .createChannel(bundle: bundle)
                case .get: found = .readChannel(bundle: bundle)
                case .delete: found = .deleteChannel(bundle: bundle)
                }
                return nil
            }
            if part(4, "all-channels") {
                guard m == .get else { return .methodNotAllowed }
                found = .listChannels(bundle: bundle)
                return nil
            }
        }
        return .badPath
    }

    /// Row 4: a header sent twice (pairwise: a request has a handful of headers).
    public static func hasDuplicates(_ headers: [(name: [UInt8], value: [UInt8])]) -> Bool {
        HeaderList(headers).hasDuplicates
    }

    /// Rows 6–15 for a push or a broadcast (`body` is what was kept: at most the limit + 1 bytes).
    public static func headers(
        route: APNsRoute, headers: [(name: [UInt8], value: [UInt8])], bodyCount: Int
    ) -> Result<CheckedHeaders, APNsReason> {
        self.headers(route: route, headers: HeaderList(headers), bodyCount: bodyCount)
    }

    public static func headers(
        route: APNsRoute, headers: HeaderList, bodyCount: Int
    ) -> Result<CheckedHeaders, APNsReason> {
        let broadcast = route.isBroadcastOrChannel
        return self.headers(
            route: route, headers: headers, bodyCount: bodyCount, messageId: messageId(headers, broadcast: broadcast))
    }

    /// The same, with row 13's verdict already made (``messageId(_:broadcast:)``: the service makes it once, for
    /// the id it echoes on any error too); it is reported in its turn, after rows 6–12.
    public static func headers(
        route: APNsRoute, headers: HeaderList, bodyCount: Int, messageId: Result<UniqueHeader?, APNsReason>
    ) -> Result<CheckedHeaders, APNsReason> {
        var out = CheckedHeaders()
        if let reason = check(route: route, headers: headers, bodyCount: bodyCount, messageId: messageId, into: &out) {
            return .failure(reason)
        }
        return .success(out)
    }

    /// The same, for the service's path: the judged headers written into `out` (a fresh `CheckedHeaders`), the
    /// reason returned (nil: every row passed). No `Result` of the headers is made, copied or destroyed per request
    /// (that went through the generic enum's value witnesses: ~400 instructions and a dozen retains a request).
    public static func check(
        route: APNsRoute, headers: HeaderList, bodyCount: Int, messageId: Result<UniqueHeader?, APNsReason>,
        into out: inout CheckedHeaders
    ) -> APNsReason? {
        check(
            route: route, headers: headers, known: KnownHeaders(headers), bodyCount: bodyCount, messageId: messageId,
            into: &out)
    }

    /// The same, the headers APNs reads found by `known` (made once per request, ``RequestInput/known``).
    static func check(
        route: APNsRoute, headers: HeaderList, known: KnownHeaders, bodyCount: Int,
        messageId: Result<UniqueHeader?, APNsReason>, into out: inout CheckedHeaders
    ) -> APNsReason? {
        let broadcast: Bool
        switch route {
        case .push: broadcast = false
        case .broadcast: broadcast = true
        default: preconditionFailure("headers() is for pushes and broadcasts")
        }
        func value(_ name: KnownHeaders.Name) -> ArraySlice<UInt8>? { known.value(name, in: headers) }
        // 6, 7
        if bodyCount == 0 { return .payloadEmpty }
        if bodyCount > (broadcast ? 5120 : 4096) { return .payloadTooLarge }
        // 8
        guard let pushType = value(.apnsPushType) else {
            return broadcast ? .missingPushType : .invalidPushType
        }
        out.isLiveActivity = pushType.count == 12 && pushType.withUnsafeBytes { p in
            let expected: StaticString = "liveactivity"
            for i in 0..<12 where (p[i] | 0x20) != expected.utf8Start[i] { return false }
            return true
        }
        if !out.isLiveActivity {
            let lower = pushType.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
            out.pushType = lower
            if broadcast || !pushTypes.contains(String(decoding: lower, as: UTF8.self)) { return .invalidPushType }
        }
        // 9, 10
        if !broadcast {
            guard let topic = value(.apnsTopic), !topic.isEmpty else { return .missingTopic }
            out.topic = topic
            let suffix = 23  // ".push-type.liveactivity"
            if out.isLiveActivity
                && !(topic.count > suffix
                    && topic.withUnsafeBytes { bytesEqual($0, ".push-type.liveactivity", at: topic.count - suffix) })
            {
                return .topicDisallowed
            }
        }
        // 11
        if let priority = value(.apnsPriority) {
            let p = priority.count <= 2 ? parseNonNegative(priority) : nil
            guard let p, p == 5 || p == 10 || (broadcast && p == 1) else { return .badPriority }
            out.priority = Int(p)
        } else if broadcast {
            return .badPriority
        }
        // 12
        if let collapse = value(.apnsCollapseId) {
            guard collapse.count <= 64 else { return .badCollapseId }
            out.collapseId = Array(collapse)
        }
        // 13
        switch messageId {
        case .failure(let reason): return reason
        case .success(let id): out.messageId = id
        }
        // 14 (a channel's storage policy is checked once the channel is known)
        if let expiration = value(.apnsExpiration) {
            guard let e = parseNonNegative(expiration) else { return .badExpirationDate }
            out.expiration = e
            out.expirationGiven = true
        } else if broadcast {
            return .badExpirationDate
        }
        // 15
        switch route {
        case .push(let token):
            guard token.count % 2 == 0, allHexDigits(token) else { return .badDeviceToken }
        default:
            switch channelId(headers) {
            case .failure(let reason): return reason
            case .success(let (raw, text)):
                out.channelId = raw
                out.channelIdText = text
            }
        }
        return nil
    }

    /// Row 15 for broadcasts and channel requests: `apns-channel-id`, base64.
    public static func channelId(_ headers: [(name: [UInt8], value: [UInt8])]) -> Result<([UInt8], String), APNsReason> {
        channelId(HeaderList(headers))
    }

    public static func channelId(_ headers: HeaderList) -> Result<([UInt8], String), APNsReason> {
        guard let value = headers.value("apns-channel-id"), !value.isEmpty else {
            return .failure(.missingChannelId)
        }
        guard let raw = Base64.decode(value), !raw.isEmpty else { return .failure(.badChannelId) }
        return .success((raw, String(decoding: value, as: UTF8.self)))
    }

    /// Row 13: the request's own id, `apns-id` on a token push, `apns-request-id` on a broadcast or a channel
    /// request: absent (nil), a canonical UUID (copied, to be echoed) or `BadMessageId`. The one place that
    /// chooses the header.
    /// The one decision of which id a request's answer echoes: `apns-id` for a token push (`/3/…`, the only
    /// family under `/3/` being `/3/device/TOKEN`), `apns-request-id` for everything else (broadcasts, the channel
    /// API). Made from the path alone, so a request refused before its route is judged (a bad method or path, an
    /// injected fault) echoes the same header as one that passes.
    @inline(__always)
    public static func isTokenPushPath(_ path: [UInt8]) -> Bool {
        path.count >= 3 && path[0] == UInt8(ascii: "/") && path[1] == UInt8(ascii: "3") && path[2] == UInt8(ascii: "/")
    }

    public static func messageId(_ headers: HeaderList, broadcast: Bool) -> Result<UniqueHeader?, APNsReason> {
        messageId(headers, KnownHeaders(headers), broadcast: broadcast)
    }

    /// The same, the header found by `known`.
    static func messageId(
        _ headers: HeaderList, _ known: KnownHeaders, broadcast: Bool
    ) -> Result<UniqueHeader?, APNsReason> {
        let name: StaticString = broadcast ? "apns-request-id" : "apns-id"
        guard let value = known.value(broadcast ? .apnsRequestId : .apnsId, in: headers) else { return .success(nil) }
        guard isCanonicalUUID(value) else { return .failure(.badMessageId) }
        return .success(.copying(name, value))
    }

    static func isHexDigit(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
    }

    /// Whether every byte is a hex digit (either case), as `allSatisfy(isHexDigit)` has it: eight bytes at a time
    /// (a device token is 64 or more; byte by byte it cost ~500 instructions a request). Per byte of a word with no
    /// high bit set, `b + (0x80 - lo)` has its high bit set iff `b >= lo`, and `b + (0x7F - hi)` iff `b > hi`
    /// (no carry crosses into the next byte); letters are compared with the case bit set.
    static func allHexDigits(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.withUnsafeBytes { b in
            let ones: UInt64 = 0x0101_0101_0101_0101
            let high = 0x80 &* ones
            var i = 0
            while i + 8 <= b.count {
                let w = b.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                if w & high != 0 { return false }
                let digit = (w &+ 0x50 &* ones) & ~(w &+ 0x46 &* ones)  // 0x30...0x39
                let l = w | 0x20 &* ones
                let letter = (l &+ 0x1F &* ones) & ~(l &+ 0x19 &* ones)  // 0x61...0x66 (or 0x41...0x46)
                if (digit | letter) & high != high { return false }
                i += 8
            }
            while i < b.count {
                if !isHexDigit(b[i]) { return false }
                i += 1
            }
            return true
        }
    }

    /// 8-4-4-4-12 hex digits (either case): FanoutCore's check (``PayloadValidator/isCanonicalUUID(_:)``, the
    /// one rule for `fanout run` and `fanout serve`) on any collection of bytes.
    public static func isCanonicalUUID<C: Collection<UInt8>>(_ bytes: C) -> Bool {
        guard bytes.count == 36 else { return false }
        return bytes.withContiguousStorageIfAvailable { PayloadValidator.isCanonicalUUID(UnsafeRawBufferPointer($0)) }
            ?? Array(bytes).withUnsafeBytes { PayloadValidator.isCanonicalUUID($0) }
    }

    static func parseNonNegative<C: Collection<UInt8>>(_ bytes: C) -> Int64? {
        guard !bytes.isEmpty, bytes.count <= 18, bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return bytes.reduce(Int64(0)) { $0 * 10 + Int64($1 - 0x30) }
    }
}

/// Standard base64 (RFC 4648 §4, padding optional) and base64url (§5, for JWTs).
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        append(encoding: bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the encoding of `bytes` to `out` (no intermediate string).
    public static func append(encoding bytes: [UInt8], to out: inout [UInt8]) {
        var i = 0
        while i < bytes.count {
            let b0 = UInt32(bytes[i])
            let b1 = i + 1 < bytes.count ? UInt32(bytes[i + 1]) : 0
            let b2 = i + 2 < bytes.count ? UInt32(bytes[i + 2]) : 0
            let n = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(i + 1 < bytes.count ? alphabet[Int(n >> 6 & 63)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(n & 63)] : UInt8(ascii: "="))
            i += 3
        }
    }

    /// Decodes base64 (`url`: base64url); nil for anything else (a character outside the alphabet, a bad
    /// length, misplaced padding, non-zero trailing bits).
    public static func decode<C: Collection<UInt8>>(_ text: C, url: Bool = false) -> [UInt8]? {
        var values: [UInt8] = []
        values.reserveCapacity(text.count)
        var padding = 0
        for c in text {
            if c == UInt8(ascii: "=") {
                padding += 1
                continue
            }
            guard padding == 0 else { return nil }
            let v: UInt8
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = c - 65
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = c - 97 + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - 48 + 52
            case UInt8(ascii: "+") where !url: v = 62
            case UInt8(ascii: "/") where !url: v = 63
            case UInt8(ascii: "-") where url: v = 62
            case UInt8(ascii: "_") where url: v = 63
            default: return nil
            }
            values.append(v)
        }
        if padding > 2 || values.count % 4 == 1 { return nil }
        if padding > 0 && (values.count + padding) % 4 != 0 { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 3 / 4)
        var i = 0
        while i + 4 <= values.count {
            let n = UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12 | UInt32(values[i + 2]) << 6 | UInt32(values[i + 3])
            out.append(UInt8(n >> 16 & 0xFF))
            out.append(UInt8(n >> 8 & 0xFF))
            out.append(UInt8(n & 0xFF))
            i += 4
        }
        let rest = values.count - i
        if rest == 2 {
            guard values[i + 1] & 0x0F == 0 else { return nil }
            out.append(values[i] << 2 | values[i + 1] >> 4)
        } else if rest == 3 {
            guard values[i + 2] & 0x03 == 0 else { return nil }
            let n = UInt32(values[i]) << 10 | UInt32(values[i + 1]) << 4 | UInt32(values[i + 2]) >> 2
            out.append(UInt8(n >> 8 & 0xFF))
            out.append(UInt8(n & 0xFF))
        }
        return out
    }
}
