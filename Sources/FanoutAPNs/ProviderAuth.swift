import FanoutCore
import Foundation

/// A provider's public key as ``ProviderAuth`` needs it: whether `signature` (raw R‖S or DER) signs `message`.
/// FanoutServe makes one of FanoutWire's `ES256Key` (OpenSSL stays in the wire target).
public struct ProviderKey: Sendable {
    public let verify: @Sendable (_ message: UnsafeRawBufferPointer, _ signature: [UInt8]) -> Bool

    public init(verify: @escaping @Sendable (_ message: UnsafeRawBufferPointer, _ signature: [UInt8]) -> Bool) {
        self.verify = verify
    }
}

/// Provider authentication tokens (docs/INGEST.md §4): ES256 JWTs with `kid`, `iss` (the team) and `iat`,
/// verified once per connection and token, as APNs does; the last rejected token of a connection is
/// remembered too, so a client that repeats a bad token costs a byte comparison per request, not a parse
/// and an ECDSA verification.
public final class ProviderAuth: Sendable {
    public let team: String
    public let keys: [String: ProviderKey]
    /// A token older than this is expired (APNs: one hour).
    public static let maxAgeSeconds: Int64 = 3600
    /// A connection may change its token at most once in this long (APNs: 20 minutes).
    public static let minRefreshSeconds: Int64 = 20 * 60
    /// An `iat` later than now by more than this is refused (InvalidProviderToken, as APNs refuses a token
    /// issued in the future); the allowance is for clocks that differ a little.
    public static let maxFutureSkewSeconds: Int64 = 60

    public init(team: String, keys: [String: ProviderKey]) {
        self.team = team
        self.keys = keys
    }

    /// What a connection has shown so far.
    public final class ConnectionState {
        /// The accepted token, its claims and when it was accepted.
        var token: [UInt8]?
        var iat: Int64 = 0
        var firstKeyId: String?
        var acceptedAtSeconds: Int64 = 0
        var everValid = false
        /// The last token refused on this connection and what its parse and verification found (the claims
        /// of a token signed correctly but refused for its age, its key id or the refresh rate, which are
        /// judged again at each request; or the reason it can never pass).
        var rejected: [UInt8]?
        var rejectedVerdict: Result<Claims, APNsReason> = .failure(.invalidProviderToken)
        /// Tokens parsed and verified on this connection (each costs base64, JSON and ECDSA).
        public internal(set) var verifications = 0
        /// The requests this connection's listener serves (`--manage-listen` splits channel management off).
        public var serves = ServeListener.Role.all
        public init() {}
    }

    /// What `check` saw besides its verdict.
    public struct Notes {
        /// The connection's first valid token (the stream limit is raised).
        public var becameValid = false
        /// A token was accepted with a DER signature, not the JWS R‖S form APNs documents (a finding).
        public var derSignature = false
        /// The key id of the token accepted.
        public var keyId: String?
        public init() {}
    }

    /// The verdict on a request's `authorization` header for a connection at `nowSeconds` (UNIX); nil when it
    /// may proceed. `becameValid` is set on the connection's first valid token (the stream limit is raised).
    public func check(
        authorization: [UInt8]?, state: ConnectionState, nowSeconds: Int64, becameValid: inout Bool
    ) -> APNsReason? {
        var notes = Notes()
        defer { if notes.becameValid { becameValid = true } }
        return check(authorization: authorization?[...], state: state, nowSeconds: nowSeconds, notes: &notes)
    }

    /// `check` with everything it noticed in `notes`. A request that repeats its connection's accepted or
    /// last refused token costs a byte comparison and allocates nothing.
    public func check(
        authorization: ArraySlice<UInt8>?, state: ConnectionState, nowSeconds: Int64, notes: inout Notes
    ) -> APNsReason? {
        guard let authorization, authorization.count > 7, ProviderAuth.isBearer(authorization) else {
            return .missingProviderToken
        }
        let token = authorization.dropFirst(7)
        if let current = state.token, current.elementsEqual(token) {
            return ProviderAuth.age(nowSeconds, state.iat) > ProviderAuth.maxAgeSeconds ? .expiredProviderToken : nil
        }
        // A token refused before: judged from what its verification found, without parsing it again.
        let parsed: Result<Claims, APNsReason>
        if let rejected = state.rejected, rejected.elementsEqual(token) {
            parsed = state.rejectedVerdict
        } else {
            state.verifications += 1
            parsed = verify(token)
        }
        let claims: Claims
        switch parsed {
        case .failure(let reason):
            return refuse(token, parsed, reason, state)
        case .success(let found):
            if let reason = judge(found, state, nowSeconds) { return refuse(token, parsed, reason, state) }
            claims = found
        }
        notes.becameValid = !state.everValid
        notes.derSignature = claims.derSignature
        notes.keyId = claims.keyId
        state.token = Array(token)
        state.iat = claims.iat
        state.firstKeyId = state.firstKeyId ?? claims.keyId
        state.acceptedAtSeconds = nowSeconds
        state.everValid = true
        if let rejected = state.rejected, rejected.elementsEqual(token) { state.rejected = nil }
        return nil
    }

    /// Remembers a refused token with what its verification found (unless it is the one remembered).
    private func refuse(
        _ token: ArraySlice<UInt8>, _ parsed: Result<Claims, APNsReason>, _ reason: APNsReason, _ state: ConnectionState
    ) -> APNsReason {
        if !(state.rejected?.elementsEqual(token) ?? false) {
            state.rejected = Array(token)
            state.rejectedVerdict = parsed
        }
        return reason
    }

    /// The rules on a correctly signed token that depend on the time and on the connection.
    private func judge(_ claims: Claims, _ state: ConnectionState, _ nowSeconds: Int64) -> APNsReason? {
        let age = ProviderAuth.age(nowSeconds, claims.iat)
        if age < -ProviderAuth.maxFutureSkewSeconds { return .invalidProviderToken }
        if let first = state.firstKeyId, first != claims.keyId { return .unrelatedKeyIdInToken }
        if age > ProviderAuth.maxAgeSeconds { return .expiredProviderToken }
        if state.everValid
            && ProviderAuth.age(nowSeconds, state.acceptedAtSeconds) < ProviderAuth.minRefreshSeconds
        {
            return .tooManyProviderTokenUpdates
        }
        return nil
    }

    /// `now − iat` in seconds, clamped to the Int64 range: an `iat` at either end of the range (a client's
    /// bug, or a probe) gives a huge age or a huge future, never an overflow.
    static func age(_ nowSeconds: Int64, _ iat: Int64) -> Int64 {
        let (difference, overflow) = nowSeconds.subtractingReportingOverflow(iat)
        guard overflow else { return difference }
        return iat > nowSeconds ? .min : .max
    }

    /// `bearer ` in any case.
    static func isBearer(_ header: ArraySlice<UInt8>) -> Bool {
        let bearer: StaticString = "bearer "
        for (i, byte) in header.prefix(7).enumerated() {
            let expected = bearer.utf8Start[i]
            // Letters in either case; the space exactly.
            guard byte == expected || (expected != 0x20 && byte | 0x20 == expected) else { return false }
        }
        return true
    }

    struct Claims {
        var keyId: String
        var iat: Int64
        /// The signature was DER, not raw R‖S.
        var derSignature: Bool
    }

    /// The length of a JWS ES256 signature: R and S, 32 bytes each (RFC 7518 §3.4).
    static let rawSignatureBytes = 64

    /// Parses and verifies a JWT: header `alg` ES256 and a known `kid`, claims `iss` = the team and `iat` (a
    /// number or a numeric string, within ±10^15 s), an ES256 signature by that key.
    ///
    /// The signature may be raw R‖S (the JWS form Apple documents) or DER. DER is accepted because clients
    /// that sign with a platform's ECDSA call and forget the conversion exist, and whether APNs refuses them
    /// is not documented; refusing would fail a backend that may work against Apple. So it passes, and the
    /// server notes it as the finding `derSignature` (`Notes.derSignature`), telling the backend its tokens
    /// are not in the documented form.
    func verify(_ token: ArraySlice<UInt8>) -> Result<Claims, APNsReason> {
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
            claims["iss"] as? String == team,
            let iat = ProviderAuth.iat(claims["iat"])
        else { return .failure(.invalidProviderToken) }
        let signed = token.prefix(parts[0].count + 1 + parts[1].count)
        let ok = Array(signed).withUnsafeBytes { key.verify($0, signature) }
        let der = signature.count != ProviderAuth.rawSignatureBytes
        return ok ? .success(Claims(keyId: keyId, iat: iat, derSignature: der)) : .failure(.invalidProviderToken)
    }

    /// The largest `iat` magnitude read (about 31 million years): anything beyond is no time a clock gives.
    static let maxIatMagnitude: Int64 = 1_000_000_000_000_000

    /// `iat` as JSON gives it (an integer, an integral double or a numeric string), range-checked before any
    /// arithmetic: nil when it is not a whole number of seconds within ±`maxIatMagnitude`.
    static func iat(_ value: Any?) -> Int64? {
        let seconds: Int64
        if let s = value as? String {
            guard let n = Int64(s) else { return nil }
            seconds = n
        } else if let n = value as? Int {
            seconds = Int64(n)
        } else if let d = value as? Double, d.isFinite, d.rounded() == d, abs(d) <= Double(maxIatMagnitude) {
            seconds = Int64(d)
        } else {
            return nil
        }
        return seconds.magnitude <= maxIatMagnitude.magnitude ? seconds : nil
    }
}
