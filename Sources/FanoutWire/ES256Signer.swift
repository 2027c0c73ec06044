internal import COpenSSL

/// A P-256 private key that signs ES256 (ECDSA over SHA-256), read from a PEM private key such as Apple's `.p8`.
/// Signatures come out in the JWS form, R‖S (64 bytes), not OpenSSL's DER.
public final class ES256Signer: @unchecked Sendable {
    // Immutable after init; each signature makes its own EVP_MD_CTX.
    private let owner: P256Key

    public init(pem: [UInt8], name: String) throws(TLSError) {
        owner = try P256Key(pem: pem, name: name, publicToo: false)
    }

    /// The signature of `message`: R‖S, each 32 bytes big-endian, left-padded.
    public func sign(_ message: [UInt8]) throws(TLSError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw TLSError("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, owner.key) == 1 else {
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
