import FanoutCore

/// APNs provider authentication tokens: a JWT with header `{"alg":"ES256","kid":KEYID}` and claims
/// `{"iss":TEAM,"iat":SECONDS}`, signed ES256, sent as `authorization: bearer TOKEN`. APNs refuses a token older
/// than 60 minutes (ExpiredProviderToken) and a connection changing its token more often than every 20
/// (TooManyProviderTokenUpdates), so one token is kept and replaced every ``refreshSeconds`` (20–59 minutes).
public final class ProviderToken {
    public let keyId: String
    public let team: String
    public let refreshSeconds: Int64
    /// ES256 over the JWT's signing input, R‖S (FanoutWire's `ES256Signer.sign`): the one piece that needs OpenSSL.
    private let signer: ([UInt8]) throws -> [UInt8]
    /// The current `authorization` header value and its `iat`.
    public private(set) var header: [UInt8] = []
    public private(set) var issuedAt: Int64 = .min
    /// Tokens signed so far.
    public private(set) var tokensIssued = 0

    /// The bounds APNs sets on a token's life: not refreshed sooner than 20 minutes, never older than 60.
    public static let minRefreshSeconds: Int64 = 20 * 60
    public static let maxRefreshSeconds: Int64 = 59 * 60

    public init(
        keyId: String, team: String, signer: @escaping ([UInt8]) throws -> [UInt8], refreshSeconds: Int64 = 50 * 60) {
        precondition(
            refreshSeconds >= ProviderToken.minRefreshSeconds && refreshSeconds <= ProviderToken.maxRefreshSeconds,
            "a provider token is refreshed every 20 to 59 minutes")
        self.keyId = keyId
        self.team = team
        self.signer = signer
        self.refreshSeconds = refreshSeconds
    }

    /// The `authorization` value to send at `nowSeconds` (UNIX time): the current token, or a new one once the
    /// current one is ``refreshSeconds`` old.
    public func authorization(nowSeconds: Int64) throws -> [UInt8] {
        if header.isEmpty || nowSeconds - issuedAt >= refreshSeconds {
            let token = try ProviderToken.sign(keyId: keyId, team: team, iat: nowSeconds, signer: signer)
            header = Array("bearer ".utf8) + token
            issuedAt = nowSeconds
            tokensIssued += 1
        }
        return header
    }

    /// A compact JWS: base64url(header) . base64url(claims) . base64url(R‖S).
    public static func sign(
        keyId: String, team: String, iat: Int64, signer: ([UInt8]) throws -> [UInt8]
    ) throws -> [UInt8] {
        let head = base64url(Array("{\"alg\":\"ES256\",\"kid\":\"\(keyId)\"}".utf8))
        let claims = base64url(Array("{\"iss\":\"\(team)\",\"iat\":\(iat)}".utf8))
        let input = head + [UInt8(ascii: ".")] + claims
        let signature = try signer(input)
        return input + [UInt8(ascii: ".")] + base64url(signature)
    }

    /// Base64 with the URL alphabet and no padding (RFC 7515 §2).
    public static func base64url(_ bytes: [UInt8]) -> [UInt8] {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)],
                alphabet[Int(n & 63)]]
            i += 3
        }
        let left = bytes.count - i
        if left == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)]]
        } else if left == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)]]
        }
        return out
    }
}
