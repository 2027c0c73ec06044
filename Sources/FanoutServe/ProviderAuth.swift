import FanoutWire
import Foundation

/// Provider authentication tokens (docs/INGEST.md §4): ES256 JWTs with `kid`, `iss` (the team) and `iat`,
/// verified once per connection and token, as APNs does.
public final class ProviderAuth: Sendable {
    public let team: String
    public let keys: [String: ES256Key]
    /// A token older than this is expired (APNs: one hour).
    public static let maxAgeSeconds: Int64 = 3600
    /// A connection may change its token at most once in this long (APNs: 20 minutes).
    public static let minRefreshSeconds: Int64 = 20 * 60

    public init(team: String, keys: [String: ES256Key]) {
        self.team = team
        self.keys = keys
    }

    /// What a connection has shown so far.
    public final class ConnectionState {
        var token: [UInt8]?
        var tokenValid = false
        var iat: Int64 = 0
        var firstKeyId: String?
        var acceptedAtSeconds: Int64 = 0
        var everValid = false
        public init() {}
    }

    /// The verdict on a request's `authorization` header for a connection at `nowSeconds` (UNIX); nil when it
    /// may proceed. `becameValid` is set on the connection's first valid token (the stream limit is raised).
    public func check(
        authorization: [UInt8]?, state: ConnectionState, nowSeconds: Int64, becameValid: inout Bool
    ) -> APNsReason? {
        guard let authorization else { return .missingProviderToken }
        let text = String(decoding: authorization, as: UTF8.self)
        guard text.count > 7, text.prefix(7).lowercased() == "bearer " else { return .missingProviderToken }
        let token = Array(text.dropFirst(7).utf8)
        if let current = state.token, current == token {
            guard state.tokenValid else { return .invalidProviderToken }
            return nowSeconds - state.iat > ProviderAuth.maxAgeSeconds ? .expiredProviderToken : nil
        }
        // A new token on this connection.
        let parsed = verify(token)
        guard case .success(let claims) = parsed else {
            if case .failure(let reason) = parsed { return reason }
            return .invalidProviderToken
        }
        if let first = state.firstKeyId, first != claims.keyId { return .unrelatedKeyIdInToken }
        if nowSeconds - claims.iat > ProviderAuth.maxAgeSeconds { return .expiredProviderToken }
        if state.everValid && nowSeconds - state.acceptedAtSeconds < ProviderAuth.minRefreshSeconds {
            return .tooManyProviderTokenUpdates
        }
        becameValid = !state.everValid
        state.token = token
        state.tokenValid = true
        state.iat = claims.iat
        state.firstKeyId = state.firstKeyId ?? claims.keyId
        state.acceptedAtSeconds = nowSeconds
        state.everValid = true
        return nil
    }

    struct Claims {
        var keyId: String
        var iat: Int64
    }

    /// Parses and verifies a JWT: header `alg` ES256 and a known `kid`, claims `iss` = the team and `iat` (a
    /// number or a numeric string), an ES256 signature (raw R‖S or DER) by that key.
    func verify(_ token: [UInt8]) -> Result<Claims, APNsReason> {
        let parts = token.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64.decode(parts[0], url: true),
            let claimBytes = Base64.decode(parts[1], url: true),
            let signature = Base64.decode(parts[2], url: true),
            let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: Data(claimBytes)) as? [String: Any],
            header["alg"] as? String == "ES256",
            let keyId = header["kid"] as? String,
            let key = keys[keyId],
            claims["iss"] as? String == team
        else { return .failure(.invalidProviderToken) }
        let iat: Int64
        if let n = claims["iat"] as? Int {
            iat = Int64(n)
        } else if let d = claims["iat"] as? Double, d.isFinite, d.rounded() == d, abs(d) < 1e15 {
            iat = Int64(d)
        } else if let s = claims["iat"] as? String, let n = Int64(s) {
            iat = n
        } else {
            return .failure(.invalidProviderToken)
        }
        let signed = token.prefix(parts[0].count + 1 + parts[1].count)
        let ok = Array(signed).withUnsafeBytes { key.verify(message: $0, signature: signature) }
        return ok ? .success(Claims(keyId: keyId, iat: iat)) : .failure(.invalidProviderToken)
    }
}
