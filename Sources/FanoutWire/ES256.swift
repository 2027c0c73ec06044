internal import COpenSSL

/// A P-256 key that checks ES256 signatures (ECDSA over SHA-256), for provider authentication tokens.
/// Reads a PEM public key, or a PEM private key (Apple's `.p8` is one) whose public half is used.
public final class ES256Key: @unchecked Sendable {
    // Immutable after init; OpenSSL 3 allows concurrent verification with one EVP_PKEY.
    private let owner: P256Key

    public init(pem: [UInt8], name: String) throws(TLSError) {
        owner = try P256Key(pem: pem, name: name, publicToo: true)
    }

    /// Whether `signature` — raw R‖S (64 bytes, the JWS form) or DER — signs `message` with this key. DER is
    /// not the form APNs documents: `ProviderAuth` accepts it and notes it as a finding (docs/INGEST.md §4).
    public func verify(message: UnsafeRawBufferPointer, signature: [UInt8]) -> Bool {
        var der = signature
        if signature.count == 64 {
            guard let converted = ES256Key.derFromRaw(signature) else { return false }
            der = converted
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, owner.key) == 1 else { return false }
        let status = der.withUnsafeBytes { sig in
            EVP_DigestVerify(
                context, sig.baseAddress?.assumingMemoryBound(to: UInt8.self), sig.count,
                message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count)
        }
        ERR_clear_error()
        return status == 1
    }

    private static func derFromRaw(_ raw: [UInt8]) -> [UInt8]? {
        guard let sig = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(sig) }
        let (r, s) = raw.withUnsafeBufferPointer { p in
            (BN_bin2bn(p.baseAddress, 32, nil), BN_bin2bn(p.baseAddress! + 32, 32, nil))
        }
        guard let r, let s else { return nil }
        guard ECDSA_SIG_set0(sig, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(sig, nil)
        guard length > 0 else { return nil }
        var out = [UInt8](repeating: 0, count: Int(length))
        let written = out.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var p: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_ECDSA_SIG(sig, &p)
        }
        return written == length ? out : nil
    }
}

/// The P-256 key (an `EVP_PKEY`) of ``ES256Key`` and ``ES256Signer``, read from a PEM private key, or (`publicToo`)
/// a PEM public key first; anything else, or a key of another curve, is a `TLSError` naming `name`. Freed with it.
final class P256Key: @unchecked Sendable {
    let key: OpaquePointer

    init(pem: [UInt8], name: String, publicToo: Bool) throws(TLSError) {
        let loaded: OpaquePointer? = pem.withUnsafeBytes { bytes in
            guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return nil }
            defer { BIO_free(bio) }
            if publicToo {
                if let key = PEM_read_bio_PUBKEY(bio, nil, nil, nil) { return key }
                _ = BIO_ctrl(bio, 1 /* BIO_CTRL_RESET */, 0, nil)
                ERR_clear_error()
            }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let loaded else {
            throw TLSError("\(name): not a PEM \(publicToo ? "public or private" : "private") key")
        }
        guard EVP_PKEY_get_base_id(loaded) == EVP_PKEY_EC, EVP_PKEY_get_bits(loaded) == 256 else {
            EVP_PKEY_free(loaded)
            throw TLSError("\(name): not a P-256 (ES256) key")
        }
        key = loaded
    }

    deinit { EVP_PKEY_free(key) }
}
