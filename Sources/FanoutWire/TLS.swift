internal import COpenSSL

#if canImport(Glibc)
import Glibc
#endif

/// A TLS failure: what was being done and OpenSSL's error queue, as text.
public struct TLSError: Error, CustomStringConvertible, Sendable {
    public let description: String

    init(_ what: String) {
        var text = what
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            text += ": " + String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        description = text
    }
}

/// A server's TLS configuration (`SSL_CTX`): its certificate chain and key, TLS 1.2 or later, ALPN `h2`.
/// One per serving thread (OpenSSL contexts may be shared, but shared-nothing costs nothing here).
public final class TLSContext {
    let context: OpaquePointer

    /// Loads a PEM certificate chain and its PEM private key; throws with OpenSSL's reason when either
    /// cannot be read or they do not match.
    public init(certificateFile: String, keyFile: String) throws(TLSError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw TLSError("SSL_CTX_new") }
        self.context = context
        try makePipeMethod()
        guard COpenSSL_CTX_set_min_proto_version_tls12(context) == 1 else { throw TLSError("TLS 1.2 minimum") }
        _ = COpenSSL_CTX_set_options(context, COpenSSL_no_renegotiation_option())
        guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
            throw TLSError("cannot read the certificate \(certificateFile)")
        }
        guard SSL_CTX_use_PrivateKey_file(context, keyFile, SSL_FILETYPE_PEM) == 1 else {
            throw TLSError("cannot read the private key \(keyFile)")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw TLSError("the key \(keyFile) does not match the certificate \(certificateFile)")
        }
        COpenSSL_CTX_select_h2(context)
    }

    /// A client's configuration: TLS 1.2 or later, ALPN offering only `h2`, and the server's certificate verified
    /// against `caFile` (PEM), or the system's trust store when nil, unless `insecure` (no verification at all).
    public init(clientCAFile caFile: String?, insecure: Bool) throws(TLSError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw TLSError("SSL_CTX_new") }
        self.context = context
        isClient = true
        try makePipeMethod()
        guard COpenSSL_CTX_set_min_proto_version_tls12(context) == 1 else { throw TLSError("TLS 1.2 minimum") }
        let protocols: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        guard SSL_CTX_set_alpn_protos(context, protocols, UInt32(protocols.count)) == 0 else {
            throw TLSError("ALPN h2")
        }
        if insecure {
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        } else {
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            if let caFile {
                guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                    throw TLSError("cannot read the CA file \(caFile)")
                }
            } else {
                guard SSL_CTX_set_default_verify_paths(context) == 1 else { throw TLSError("the system's CAs") }
            }
        }
        verifies = !insecure
    }

    /// Whether this is a client's context (``init(clientCAFile:insecure:)``) and whether it checks the server.
    private(set) var isClient = false
    private(set) var verifies = false

    /// The method of its sessions' BIOs (``TLSSession``): made once per context, freed with it (its sessions hold it).
    private(set) var pipeMethod: OpaquePointer?

    /// One BIO type index for the process (OpenSSL has 128 of them).
    private static let pipeIndex = BIO_get_new_index()

    private func makePipeMethod() throws(TLSError) {
        guard Self.pipeIndex > 0, let method = COpenSSL_pipe_method(Self.pipeIndex) else {
            throw TLSError("BIO_meth_new")
        }
        pipeMethod = method
    }

    deinit {
        SSL_CTX_free(context)
        if let pipeMethod { BIO_meth_free(pipeMethod) }
    }
}

/// One connection's TLS state over one BIO of our own (`COpenSSL_Pipe`, Sources/COpenSSL/shim.h): ciphertext from
/// the socket goes in with ``receive(_:into:)`` (read by OpenSSL straight from the socket's buffer; only what it
/// leaves unread is copied, to be read first next time) or ``feed(_:)`` (copied), plaintext comes out of
/// ``readPlaintext(into:)``; plaintext to send goes in with ``writePlaintext(_:)``, and the records it makes wait in
/// one buffer (grown, never zeroed) for ``takeCiphertext(_:)``. No socket is touched here: the event loop owns I/O.
/// Public so that an in-memory peer (the serve fuzz target's client, tests) speaks real TLS to an in-memory
/// connection.
public final class TLSSession {
    private let ssl: OpaquePointer
    /// The BIO's buffers (its data); released after the SSL (which owns the BIO).
    private let pipe: UnsafeMutablePointer<COpenSSL_Pipe>
    /// Holds the BIO's method for as long as the BIO lives.
    private let context: TLSContext
    public private(set) var handshakeDone = false

    /// A server's session (it accepts).
    public convenience init(context: TLSContext) throws(TLSError) {
        try self.init(context, client: false)
    }

    /// The one place a session's SSL and BIO are made; `client` picks the handshake's side.
    private init(_ context: TLSContext, client: Bool) throws(TLSError) {
        guard let ssl = SSL_new(context.context) else { throw TLSError("SSL_new") }
        guard let bio = BIO_new(context.pipeMethod) else {
            SSL_free(ssl)
            throw TLSError("BIO_new")
        }
        pipe = UnsafeMutablePointer<COpenSSL_Pipe>.allocate(capacity: 1)
        pipe.initialize(to: COpenSSL_Pipe())
        BIO_set_data(bio, pipe)
        self.ssl = ssl
        self.context = context
        requiresH2 = client
        SSL_set_bio(ssl, bio, bio)  // the SSL owns the BIO (one reference for both directions) from here on
        if client { SSL_set_connect_state(ssl) } else { SSL_set_accept_state(ssl) }
    }

    /// A client's session for `serverName` (a DNS name or an IP literal): SNI for a name (none for an address, as
    /// RFC 6066 says), the certificate checked against the name or address when the context verifies, and `h2`
    /// required from ALPN once the handshake is done. ``startHandshake()`` writes the ClientHello.
    public convenience init(clientContext context: TLSContext, serverName: String) throws(TLSError) {
        precondition(context.isClient, "a client session needs a client context")
        try self.init(context, client: true)
        let isAddress = serverName.contains(":") || serverName.allSatisfy { $0 == "." || $0.isNumber }
        if isAddress {
            if context.verifies {
                guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1 else {
                    throw TLSError("bad server address \(serverName)")
                }
            }
        } else {
            guard COpenSSL_set_server_name(ssl, serverName) == 1 else { throw TLSError("SNI \(serverName)") }
            if context.verifies {
                guard SSL_set1_host(ssl, serverName) == 1 else { throw TLSError("bad server name \(serverName)") }
            }
        }
    }

    /// Set for a client: a handshake that does not end with ALPN `h2` fails.
    private var requiresH2 = false

    /// A client's first flight (the ClientHello), waiting in ``takeCiphertext(_:)`` afterwards.
    public func startHandshake() throws(TLSError) {
        let status = SSL_do_handshake(ssl)
        if status == 1 { return }
        let error = SSL_get_error(ssl, status)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return }
        throw TLSError("TLS handshake failed")
    }

    deinit {
        SSL_free(ssl)  // frees the BIO, which reads and writes nothing more
        COpenSSL_pipe_release(pipe)
        pipe.deallocate()
    }

    /// Hands ciphertext to OpenSSL, copied (read by the next ``readPlaintext(into:)``).
    public func feed(_ bytes: UnsafeRawBufferPointer) throws(TLSError) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        guard COpenSSL_pipe_keep(pipe, base, bytes.count) == 1 else { throw TLSError("out of memory for ciphertext") }
    }

    /// Ciphertext from the socket, decrypted into `sink` (``readPlaintext(into:)``): OpenSSL reads it where it is;
    /// whatever it leaves unread (none, unless the read stopped early) is copied before this returns, as `bytes`
    /// is valid only during the call.
    public func receive(
        _ bytes: UnsafeRawBufferPointer, into sink: (UnsafeRawBufferPointer) -> Void
    ) throws(TLSError) {
        pipe.pointee.borrowed = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        pipe.pointee.borrowedCount = bytes.count
        do {
            try readPlaintext(into: sink)
        } catch {
            _ = COpenSSL_pipe_end_borrow(pipe)
            throw error
        }
        guard COpenSSL_pipe_end_borrow(pipe) == 1 else { throw TLSError("out of memory for ciphertext") }
    }

    /// Advances the handshake and decrypts what is available into `sink`. Throws on a TLS failure (the
    /// alert, if any, is waiting in `takeCiphertext`).
    public func readPlaintext(into sink: (UnsafeRawBufferPointer) -> Void) throws(TLSError) {
        if !handshakeDone {
            let status = SSL_do_handshake(ssl)
            if status != 1 {
                let error = SSL_get_error(ssl, status)
                if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return }
                var reason = "TLS handshake failed"
                let verify = SSL_get_verify_result(ssl)
                if verify != X509_V_OK {
                    reason += " (certificate: " + String(cString: X509_verify_cert_error_string(verify)) + ")"
                }
                throw TLSError(reason)
            }
            if requiresH2 {
                var selected: UnsafePointer<UInt8>?
                var length: UInt32 = 0
                SSL_get0_alpn_selected(ssl, &selected, &length)
                guard length == 2, let selected, selected[0] == UInt8(ascii: "h"), selected[1] == UInt8(ascii: "2")
                else { throw TLSError("the server did not select h2 (ALPN)") }
            }
            handshakeDone = true
        }
        try withUnsafeTemporaryAllocation(byteCount: 16 * 1024, alignment: 16) { buffer throws(TLSError) in
            while true {
                let n = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
                if n > 0 {
                    sink(UnsafeRawBufferPointer(start: buffer.baseAddress, count: Int(n)))
                    continue
                }
                let error = SSL_get_error(ssl, n)
                if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_ZERO_RETURN {
                    return
                }
                throw TLSError("TLS read failed")
            }
        }
    }

    /// Encrypts plaintext to send (after the handshake).
    public func writePlaintext(_ bytes: UnsafeRawBufferPointer) throws(TLSError) {
        var offset = 0
        while offset < bytes.count {
            let n = SSL_write(ssl, bytes.baseAddress! + offset, Int32(bytes.count - offset))
            guard n > 0 else { throw TLSError("TLS write failed") }
            offset += Int(n)
        }
    }

    /// Some ciphertext waits for the socket.
    public var hasCiphertext: Bool { pipe.pointee.outCount > 0 }

    /// Ciphertext waiting for the socket (handshake records, alerts, encrypted frames): all of it in one piece (more
    /// pieces only if `sink` makes this session write again). The buffer is kept for the next records unless it
    /// grew past 1 MiB.
    public func takeCiphertext(_ sink: (UnsafeRawBufferPointer) -> Void) {
        while pipe.pointee.outCount > 0, let block = pipe.pointee.out {
            let count = pipe.pointee.outCount
            let capacity = pipe.pointee.outCapacity
            pipe.pointee.out = nil  // detached while `sink` runs: a write meanwhile starts a buffer of its own
            pipe.pointee.outCount = 0
            pipe.pointee.outCapacity = 0
            sink(UnsafeRawBufferPointer(start: block, count: count))
            if pipe.pointee.out == nil && capacity <= 1 << 20 {
                pipe.pointee.out = block
                pipe.pointee.outCapacity = capacity
            } else {
                free(block)
            }
        }
    }
}
