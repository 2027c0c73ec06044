/// Where a push goes (DOMAIN §3.3, TRACE rules 8–9): update tokens to activities, push-to-start
/// tokens to (device, app), broadcast channels to their subscribers.
///
/// Tokens and channel ids are interned once; routing a push is a hash lookup on its bytes and
/// an index into flat arrays. A rotated-away token stays interned and maps to no activity, so it
/// routes as `Unregistered`.
public struct Router: Sendable {
    public static let none: Int32 = -1

    public var updateTokens = ByteInterner()
    /// Activity of each update token, or `none` once rotated away.
    public private(set) var tokenActivity: [Int32] = []

    public var startTokens = ByteInterner()
    /// (device, app) holding each start token, or `none` once replaced.
    public private(set) var startTokenDevice: [Int32] = []
    public private(set) var startTokenApp: [Int32] = []
    /// Current start token of each (device, app).
    private var startTokenOf: [Int64: Int32] = [:]

    public var channels = ByteInterner()
    /// App of the activity that first joined each channel (its topic's bundle).
    public private(set) var channelApp: [Int32] = []
    /// Subscribers of each channel, in activity-id order.
    public private(set) var subscribers: [[Int32]] = []

    public init() {}

    /// Reserves room for `tokens` more update tokens of `bytes` bytes in all.
    public mutating func reserveUpdateTokens(_ tokens: Int, bytes: Int) {
        updateTokens.reserveCapacity(keys: tokens, bytes: bytes / 2 + tokens)
        tokenActivity.reserveCapacity(tokenActivity.count + tokens)
    }

    /// Where a push's target resolves to, looked up once and shared by validate and route.
    public enum Resolution: Equatable, Sendable {
        case activity(Int32)
        case startToken(device: Int32, app: Int32)
        case channel(Int32)
        case malformedToken
        case unknownToken
        case unknownChannel

        /// The verdict of route for a target that does not resolve.
        public var unroutable: UnroutableReason? {
            switch self {
            case .malformedToken: .badDeviceToken
            case .unknownToken: .unregistered
            case .unknownChannel: .channelNotRegistered
            default: nil
            }
        }
    }

    /// Tokens are interned compactly: a canonical token (lowercase hex, even length) as its bytes
    /// behind tag 0, anything else as its text behind tag 1. The mapping is one-to-one, so matching
    /// stays by the exact string ("AA01" and "aa01" are different tokens) at half the memory.
    @inline(__always)
    static func withTokenKey<R>(_ token: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let n = token.count
        var canonical = n > 0 && n % 2 == 0
        if canonical {
            for byte in token {
                let digit = byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
                let lower = byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f")
                if !(digit || lower) {
                    canonical = false
                    break
                }
            }
        }
        let keyCount = canonical ? 1 + n / 2 : 1 + n
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: keyCount) { key in
            if canonical {
                key[0] = 0
                var i = 0
                while i < n {
                    key[1 + i / 2] = JSONTape.hexDigit(token[i])! << 4 | JSONTape.hexDigit(token[i + 1])!
                    i += 2
                }
            } else {
                key[0] = 1
                for i in 0..<n { key[1 + i] = token[i] }
            }
            return body(UnsafeRawBufferPointer(key))
        }
    }

    @inline(__always)
    public func resolve(_ kind: TargetKind, _ target: UnsafeRawBufferPointer) -> Resolution {
        switch kind {
        case .token:
            let t = Router.lookupToken(target, in: updateTokens)
            if t == Router.malformed { return .malformedToken }
            guard t >= 0 else { return .unknownToken }
            let activity = tokenActivity[Int(t)]
            guard activity != Router.none else { return .unknownToken }
            return .activity(activity)
        case .startToken:
            let t = Router.lookupToken(target, in: startTokens)
            if t == Router.malformed { return .malformedToken }
            guard t >= 0, startTokenDevice[Int(t)] != Router.none else { return .unknownToken }
            return .startToken(device: startTokenDevice[Int(t)], app: startTokenApp[Int(t)])
        case .channel:
            guard let c = channels.lookup(target) else { return .unknownChannel }
            return .channel(c)
        }
    }

    /// `resolve` through an inout access. A caller holding the router in a class property uses this
    /// to read it in place: a plain read copies the struct (a retain and release of every array).
    @inline(__always)
    mutating func resolveInPlace(_ kind: TargetKind, _ target: UnsafeRawBufferPointer) -> Resolution {
        resolve(kind, target)
    }

    private static let malformed: Int32 = -2

    /// The id of a token in `interner`: `malformed` when it is not well-formed (TRACE rule 8), -1 when
    /// it was never interned. One pass classifies the bytes and builds the key of `withTokenKey`
    /// (same bytes) on the stack.
    @inline(__always)
    static func lookupToken(_ token: UnsafeRawBufferPointer, in interner: borrowing ByteInterner) -> Int32 {
        let n = token.count
        guard n > 0, n % 2 == 0, let p = token.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            return malformed
        }
        // Canonical (digits and lowercase hex): 1 + n/2 key bytes; otherwise 1 + n.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1 + n) { key in
            let k = key.baseAddress!
            let table = Router.hexTable.utf8Start
            var seen: UInt8 = 0
            var i = 0
            // Eight characters a word while they are all digits and lowercase a-f (the canonical form): four key
            // bytes per word. Anything else (uppercase, not hex, fewer than 8 left) goes on byte by byte below.
            let high: UInt64 = 0x8080_8080_8080_8080
            let ones: UInt64 = 0x0101_0101_0101_0101
            while i &+ 8 <= n {
                let w = UInt64(littleEndian: UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self))
                if w & high != 0 { break }
                // Per byte (all below 0x80): the high bit of `(x | 0x80) - m` is set exactly when x ≥ m.
                @inline(__always) func atLeast(_ m: UInt8) -> UInt64 { ((w | high) &- ones &* UInt64(m)) & high }
                let digit = atLeast(0x30) & ~atLeast(0x3A)
                let lower = atLeast(0x61) & ~atLeast(0x67)
                if digit | lower != high { break }
                let v = (w & 0x0F0F_0F0F_0F0F_0F0F) &+ (lower >> 7) &* 9  // each byte's digit value
                // Pairs: the first character is the high nibble; then the four bytes packed together.
                let c = (v & 0x00FF_00FF_00FF_00FF) << 4 | (v >> 8) & 0x00FF_00FF_00FF_00FF
                let d = (c | c >> 8) & 0x0000_FFFF_0000_FFFF
                let e = UInt32(truncatingIfNeeded: d | d >> 16)
                UnsafeMutableRawPointer(k + (1 &+ i >> 1)).storeBytes(of: e.littleEndian, as: UInt32.self)
                i &+= 8
            }
            while i < n {
                let hi = table[Int(p[i])]
                let lo = table[Int(p[i &+ 1])]
                seen |= hi | lo
                k[1 &+ i >> 1] = (hi & 0xF) << 4 | (lo & 0xF)
                i &+= 2
            }
            if seen & 0x20 != 0 { return malformed }
            if seen & 0x10 == 0 {
                k[0] = 0
                return interner.lookup(UnsafeRawBufferPointer(start: k, count: 1 &+ n >> 1)) ?? -1
            }
            k[0] = 1
            UnsafeMutableRawPointer(k + 1).copyMemory(from: p, byteCount: n)
            return interner.lookup(UnsafeRawBufferPointer(start: k, count: 1 &+ n)) ?? -1
        }
    }

    /// Per byte: the hex digit value of `0-9` and `a-f`; `0x10 | value` for `A-F` (well-formed, not
    /// canonical); `0x20` for anything else. A constant in the binary: no lazy initialization.
    @inline(__always)
    static var hexTable: StaticString {
        """
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{0}\u{1}\u{2}\u{3}\u{4}\u{5}\u{6}\u{7}\u{8}\u{9}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{1A}\u{1B}\u{1C}\u{1D}\u{1E}\u{1F}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{A}\u{B}\u{C}\u{D}\u{E}\u{F}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\
        \u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}\u{20}
        """
    }

    // MARK: Update tokens

    /// The activity the token currently routes to, if any.
    public func activity(holding token: UnsafeRawBufferPointer) -> Int32? {
        guard let t = Router.withTokenKey(token, { updateTokens.lookup($0) }), tokenActivity[Int(t)] != Router.none
        else { return nil }
        return tokenActivity[Int(t)]
    }

    /// Points `token` at `activity` and returns its id; the activity's previous token (if any)
    /// stops routing at once. A rotated-away token and one never issued route alike (Unregistered),
    /// so the previous token is forgotten: a new token of the same length takes over its id and its
    /// bytes, and the tokens kept follow the activities, not the number of rotations.
    @discardableResult
    public mutating func assignUpdateToken(
        _ token: UnsafeRawBufferPointer, to activity: Int32, previous: Int32
    ) -> Int32 {
        if previous != Router.none, tokenActivity[Int(previous)] == activity,
            Router.withTokenKey(token, { updateTokens.replace(previous, with: $0) })
        {
            return previous
        }
        if previous != Router.none { tokenActivity[Int(previous)] = Router.none }
        let (t, inserted) = Router.withTokenKey(token) { updateTokens.intern($0) }
        if inserted { tokenActivity.append(activity) } else { tokenActivity[Int(t)] = activity }
        return t
    }

    // MARK: Push-to-start tokens

    /// The (device, app) currently holding a start token, if any.
    public func holder(ofStartToken token: UnsafeRawBufferPointer) -> (device: Int32, app: Int32)? {
        guard let t = Router.withTokenKey(token, { startTokens.lookup($0) }), startTokenDevice[Int(t)] != Router.none
        else { return nil }
        return (startTokenDevice[Int(t)], startTokenApp[Int(t)])
    }

    /// Gives (device, app) a new start token; the previous one routes as Unregistered from now on.
    public mutating func setStartToken(_ token: UnsafeRawBufferPointer, device: Int32, app: Int32) {
        let key = Int64(device) << 32 | Int64(app)
        let (t, inserted) = Router.withTokenKey(token) { startTokens.intern($0) }
        if let old = startTokenOf[key], old != t {
            startTokenDevice[Int(old)] = Router.none
            startTokenApp[Int(old)] = Router.none
        }
        if inserted {
            startTokenDevice.append(device)
            startTokenApp.append(app)
        } else {
            startTokenDevice[Int(t)] = device
            startTokenApp[Int(t)] = app
        }
        startTokenOf[key] = t
    }

    // MARK: Channels

    /// Registers the channel (if new, for `app`) and returns its id: a new channel may take over the id of
    /// one removed earlier (`removeChannel`), so the channels kept follow those live, not those ever made.
    public mutating func registerChannel(_ id: UnsafeRawBufferPointer, app: Int32) -> Int32 {
        let (c, inserted) = channels.intern(id)
        if inserted {
            if Int(c) < channelApp.count {
                channelApp[Int(c)] = app
                subscribers[Int(c)] = []
            } else {
                channelApp.append(app)
                subscribers.append([])
            }
        }
        return c
    }

    /// Removes channel `c`: its id bytes no longer resolve, its subscriber list is emptied (its memory
    /// released) and `c` goes to the next channel registered. Returns the subscribers it had, whose own
    /// record of the channel the caller clears (`Pipeline.removeChannel` does). Nothing if `c` is not live.
    public mutating func removeChannel(_ c: Int32) -> [Int32] {
        guard channels.remove(c) else { return [] }
        channelApp[Int(c)] = Router.none
        defer { subscribers[Int(c)] = [] }
        return subscribers[Int(c)]
    }

    /// Channels registered and not removed.
    public var liveChannelCount: Int { channels.liveCount }

    /// Subscriptions held by all channels (removed ones hold none).
    public var subscriptionCount: Int { subscribers.reduce(0) { $0 + $1.count } }

    /// Reserves room for `count` more subscribers of a registered channel.
    public mutating func reserveSubscribers(channel id: UnsafeRawBufferPointer, count: Int) {
        guard let c = channels.lookup(id) else { return }
        subscribers[Int(c)].reserveCapacity(subscribers[Int(c)].count + count)
    }

    /// Adds `activity` to the channel's subscribers, keeping activity-id order.
    mutating func addSubscriber(_ activity: Int32, channel c: Int32, store: borrowing ActivityStore) {
        let index = store.activityIds.withBytes(activity) { id in
            var low = 0
            var high = subscribers[Int(c)].count
            while low < high {
                let mid = (low + high) / 2
                let before = store.activityIds.withBytes(subscribers[Int(c)][mid]) { compareBytes($0, id) < 0 }
                if before { low = mid + 1 } else { high = mid }
            }
            return low
        }
        subscribers[Int(c)].insert(activity, at: index)
    }

    mutating func removeSubscriber(_ activity: Int32, channel c: Int32) {
        if let index = subscribers[Int(c)].firstIndex(of: activity) { subscribers[Int(c)].remove(at: index) }
    }
}
