internal import COpenSSL

/// A P-256 private key that signs ES256 (ECDSA over SHA-256), read from a PEM private key such as Apple's `.p8`.
/// Signatures come out in the JWS form, R‖S (64 bytes), not OpenSSL's DER.
public final class ES256Signer: @unchecked Sendable {
    // Immutable after init; each signature makes its own EVP_MD_CTX.
    private let key: OpaquePointer

    public init(pem: [UInt8], name: String) throws(TLSError) {
        let loaded: OpaquePointer? = pem.withUnsafeBytes { bytes in
            guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let loaded else { throw TLSError("\(name): not a PEM private key") }
        guard EVP_PKEY_get_base_id(loaded) == EVP_PKEY_EC, EVP_PKEY_get_bits(loaded) == 256 else {
            EVP_PKEY_free(loaded)
            throw TLSError("\(name): not a P-256 (ES256) key")
        }
        key = loaded
    }

    deinit { EVP_PKEY_free(key) }

    /// The signature of `message`: R‖S, each 32 bytes big-endian, left-padded.
    public func sign(_ message: [UInt8]) throws(TLSError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw TLSError("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else {
            throw TLSError("EVP_DigestSignInit")
        }
        var length = 0
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(context, nil, &length, $0.baseAddress, $0.count) }) == 1
        else { throw TLSError("EVP_DigestSign (length)") }
        var der = [UInt8](repeating: 0, count: length)
        let signed = der.withUnsafeMutableBufferPointer { out in
            message.withUnsafeBufferPointer {
                EVP_DigestSign(context, out.baseAddress, &length, $0.baseAddress, $0.count)
            }
        }
        guard signed == 1 else { throw TLSError("EVP_DigestSign") }
        // DER (SEQUENCE { INTEGER r, INTEGER s }) to R‖S.
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var p: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &p, length)
        }
        guard let parsed else { throw TLSError("d2i_ECDSA_SIG") }
        defer { ECDSA_SIG_free(parsed) }
        var raw = [UInt8](repeating: 0, count: 64)
        let ok = raw.withUnsafeMutableBufferPointer { out in
            BN_bn2binpad(ECDSA_SIG_get0_r(parsed), out.baseAddress, 32) == 32
                && BN_bn2binpad(ECDSA_SIG_get0_s(parsed), out.baseAddress! + 32, 32) == 32
        }
        guard ok else { throw TLSError("BN_bn2binpad") }
        return raw
    }
}

/// APNs provider authentication tokens: a JWT with header `{"alg":"ES256","kid":KEYID}` and claims
/// `{"iss":TEAM,"iat":SECONDS}`, signed ES256, sent as `authorization: bearer TOKEN`. APNs refuses a token older
/// than 60 minutes (ExpiredProviderToken) and a connection changing its token more often than every 20
/// (TooManyProviderTokenUpdates), so one token is kept and replaced every ``refreshSeconds`` (20–59 minutes).
public final class ProviderToken {
    public let keyId: String
    public let team: String
    public let refreshSeconds: Int64
    private let signer: ES256Signer
    /// The current `authorization` header value and its `iat`.
    public private(set) var header: [UInt8] = []
    public private(set) var issuedAt: Int64 = .min
    /// Tokens signed so far.
    public private(set) var tokensIssued = 0

    /// The bounds APNs sets on a token's life: not refreshed sooner than 20 minutes, never older than 60.
    public static let minRefreshSeconds: Int64 = 20 * 60
    public static let maxRefreshSeconds: Int64 = 59 * 60

    public init(keyId: String, team: String, signer: ES256Signer, refreshSeconds: Int64 = 50 * 60) {
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
    public func authorization(nowSeconds: Int64) throws(TLSError) -> [UInt8] {
        if header.isEmpty || nowSeconds - issuedAt >= refreshSeconds {
            let token = try ProviderToken.sign(keyId: keyId, team: team, iat: nowSeconds, signer: signer)
            header = Array("bearer ".utf8) + token
            issuedAt = nowSeconds
            tokensIssued += 1
        }
        return header
    }

    /// A compact JWS: base64url(header) . base64url(claims) . base64url(R‖S).
    public static func sign(keyId: String, team: String, iat: Int64, signer: ES256Signer) throws(TLSError) -> [UInt8] {
        let head = base64url(Array("{\"alg\":\"ES256\",\"kid\":\"\(keyId)\"}".utf8))
        let claims = base64url(Array("{\"iss\":\"\(team)\",\"iat\":\(iat)}".utf8))
        let input = head + [UInt8(ascii: ".")] + claims
        let signature = try signer.sign(input)
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
