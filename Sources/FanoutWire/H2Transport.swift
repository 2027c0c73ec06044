internal import CNGHTTP2
import UVLoop

/// What one HTTP/2 connection's bytes go through, under both sides (``H2ServerConnection``, ``H2ClientConnection``):
/// the socket, or an in-memory connection's `output`; TLS when on (``TLSSession``'s own BIO); input into nghttp2
/// (`nghttp2_session_mem_recv`, its callbacks run inside) and nghttp2's output out (`nghttp2_session_mem_send`),
/// in one write per flush, up to a watermark of bytes waiting on the socket. The session and the protocol
/// (streams, requests, answers) stay with the connection, which hands the session in. Confined to its loop's
/// thread; a final class held by a `let` (one load per use, no retain on the hot path, no overlapping access when
/// nghttp2's callbacks reach the connection during a receive or a send).
final class H2Transport {
    /// The socket; nil in memory (then `output`), or for a client before it connects or once the connect failed.
    @exclusivity(unchecked) var stream: TCPStream?
    let output: ((UnsafeRawBufferPointer) -> Void)?
    let tls: TLSSession?
    /// No more frames are taken from nghttp2 while this many bytes wait on the socket (`Int.max`: no watermark).
    let watermark: Int
    /// Plaintext of one flush under TLS, encrypted at once (reused).
    @exclusivity(unchecked) var outgoing = PlaintextBuffer()
    /// Inside `nghttp2_session_mem_recv` (its callbacks may submit, but must not send), inside a send.
    @exclusivity(unchecked) var inReceive = false
    @exclusivity(unchecked) var inFlush = false
    /// The connection ended: nothing more goes into nghttp2.
    @exclusivity(unchecked) var finished = false
    /// Why the connection ended (the first reason given), if it did.
    @exclusivity(unchecked) var endReason: String?
    /// Flushes that wrote some of nghttp2's output (to the socket, through TLS, or to `output`).
    @exclusivity(unchecked) var writes = 0

    init(stream: TCPStream?, output: ((UnsafeRawBufferPointer) -> Void)?, tls: TLSSession?, watermark: Int) {
        self.stream = stream
        self.output = output
        self.tls = tls
        self.watermark = watermark
    }

    deinit { outgoing.deallocate() }

    /// The owner holds the output (``H2ServerConnection/holdOutput()``): answers submitted meanwhile go out together.
    @exclusivity(unchecked) var held = false

    /// Inside a receive or a send, or held: a submission waits for the flush that follows.
    var busy: Bool { inFlush || inReceive || held }

    // MARK: Input

    /// Input as read from the socket (or handed in): through TLS when on, into nghttp2 (its callbacks run inside),
    /// until the first failure. A failure of nghttp2's queues a GOAWAY (the connection ends once it is sent;
    /// `endReason` says why). Returns why the connection must close at once instead: TLS failed (its alert, if
    /// any, was written), or the client's first bytes were not HTTP/2's preface.
    func receive(_ bytes: UnsafeRawBufferPointer, into session: OpaquePointer?) -> String? {
        var code: Int32 = 0
        if let tls {
            do throws(TLSError) {
                try tls.receive(bytes) { plain in if code == 0 { code = process(plain, session) } }
            } catch {
                writeCiphertext()
                return "TLS: \(error)"
            }
        } else {
            code = process(bytes, session)
        }
        guard code != 0 else { return nil }
        if code == NGHTTP2_ERR_BAD_CLIENT_MAGIC.rawValue { return "no HTTP/2 preface" }
        // A fatal error (a flood, for instance): nghttp2 has queued a GOAWAY; send it, then close.
        failed("protocol error: " + String(cString: nghttp2_strerror(code)))
        nghttp2_session_terminate_session(session, UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue))
        return nil
    }

    /// One piece of plaintext into nghttp2: 0, or nghttp2's (negative) error code.
    private func process(_ bytes: UnsafeRawBufferPointer, _ session: OpaquePointer?) -> Int32 {
        guard let session, !finished, bytes.count > 0 else { return 0 }
        inReceive = true
        defer { inReceive = false }
        let consumed = nghttp2_session_mem_recv(
            session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        return consumed < 0 ? Int32(consumed) : 0
    }

    // MARK: Output

    /// What a send did.
    struct Sent {
        /// Stopped at the watermark with frames still queued in nghttp2.
        var blocked = false
        /// Nothing of nghttp2's was sent: no output, the socket closed, or the TLS handshake still going (its
        /// records were written).
        var skipped = false
    }

    /// Sends what nghttp2 has queued: h2c straight into one socket write (one copy of each byte), under TLS
    /// encrypted then its records in one write, in memory chunk by chunk to `output`. Takes no more frames once
    /// `watermark` bytes wait on the socket. The caller checks that it is not `busy` nor `finished`; a failure
    /// sets `endReason`.
    func send(_ session: OpaquePointer) -> Sent {
        inFlush = true
        defer { inFlush = false }
        var sent = Sent()
        guard let stream else {
            guard let output else {
                sent.skipped = true
                return sent
            }
            if let tls { return sendEncrypted(session, tls, pending: 0, sent) }
            var wrote = false
            while let chunk = next(session, queued: 0, &sent) {
                output(chunk)
                wrote = true
            }
            if wrote { writes += 1 }
            return sent
        }
        guard !stream.isClosed else {
            sent.skipped = true
            return sent
        }
        let pending = stream.pendingWriteBytes
        guard let tls else {
            // Nothing queued: no write (a gathered write takes a block first, then sees it has nothing).
            guard nghttp2_session_want_write(session) != 0 else { return sent }
            stream.write(gathering: { gather in
                while let chunk = next(session, queued: pending + gather.count, &sent) { gather.append(chunk) }
                if gather.count > 0 { writes += 1 }
            })
            return sent
        }
        return sendEncrypted(session, tls, pending: pending, sent)
    }

    /// Under TLS (a socket's, or an in-memory connection's): nghttp2's frames encrypted in one piece, then the
    /// records written (`writeCiphertext`); during the handshake only its records.
    private func sendEncrypted(_ session: OpaquePointer, _ tls: TLSSession, pending: Int, _ sent: Sent) -> Sent {
        var sent = sent
        guard tls.handshakeDone else {
            writeCiphertext()
            sent.skipped = true
            return sent
        }
        while let chunk = next(session, queued: pending + outgoing.count, &sent) { outgoing.append(chunk) }
        if !outgoing.isEmpty {
            writes += 1
            do throws(TLSError) {
                try tls.writePlaintext(outgoing.bytes)
            } catch {
                failed("TLS: \(error)")
            }
        }
        writeCiphertext()
        outgoing.removeAll(keepLimit: 1 << 20)  // a burst's buffer is not kept forever
        return sent
    }

    /// nghttp2's next chunk of output (valid until the next call); nil when it has nothing more, failed, or
    /// `queued` bytes reached the watermark (then `blocked` if it still has some).
    @inline(__always)
    private func next(_ session: OpaquePointer, queued: Int, _ sent: inout Sent) -> UnsafeRawBufferPointer? {
        if queued >= watermark {
            sent.blocked = nghttp2_session_want_write(session) != 0
            return nil
        }
        var data: UnsafePointer<UInt8>?
        let n = nghttp2_session_mem_send(session, &data)
        if n < 0 {
            failed("nghttp2: " + String(cString: nghttp2_strerror(Int32(n))))
            return nil
        }
        return n == 0 ? nil : UnsafeRawBufferPointer(start: data, count: n)
    }

    /// The TLS records waiting (handshake, alert, encrypted frames), in one socket write; none if none wait.
    func writeCiphertext() {
        guard let tls, tls.hasCiphertext else { return }
        guard let stream else { return tls.takeCiphertext { output?($0) } }
        stream.write(gathering: { gather in tls.takeCiphertext { gather.append($0) } })
    }

    /// Records why the connection ends, unless a reason was given before.
    func failed(_ reason: String) {
        if endReason == nil { endReason = reason }
    }

    /// Neither side has more to say: the connection may end.
    static func done(_ session: OpaquePointer) -> Bool {
        nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0
    }
}
