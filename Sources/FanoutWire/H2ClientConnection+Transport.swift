internal import CNGHTTP2
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

// The connection's transport: connecting, reading (through TLS when on), writing what nghttp2 has queued, the end.
extension H2ClientConnection {
    func connected(_ result: Result<TCPStream, UVError>) {
        guard !finished else { return }
        switch result {
        case .failure(let error):
            stream = nil
            end("connect: \(error)")
        case .success(let stream):
            do {
                try stream.startReading(
                    onRead: { [unowned self] _, bytes in self.received(bytes) },
                    onEnd: { [unowned self] _, error in
                        self.end(error.map { "\($0)" } ?? "closed by the server")
                    })
                if let tls {
                    try tls.startHandshake()
                    tls.takeCiphertext { stream.write($0) }
                } else {
                    flush()
                }
            } catch {
                end("\(error)")
            }
        }
    }

    /// Input, as read from the socket (or handed in by a test).
    func received(_ bytes: UnsafeRawBufferPointer) {
        guard !finished else { return }
        if let tls {
            do {
                try tls.feed(bytes)
                try tls.readPlaintext { plain in self.process(plain) }
            } catch {
                tls.takeCiphertext { stream?.write($0) }
                end("TLS: \(error)")
                return
            }
        } else {
            process(bytes)
        }
        pump()
        flush()
    }

    func process(_ bytes: UnsafeRawBufferPointer) {
        guard let session, !finished, bytes.count > 0 else { return }
        inReceive = true
        defer { inReceive = false }
        let consumed = nghttp2_session_mem_recv(
            session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        if consumed < 0 {
            endReason = endReason ?? "protocol error: " + String(cString: nghttp2_strerror(Int32(consumed)))
            nghttp2_session_terminate_session(session, UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue))
        }
    }

    /// Sends what nghttp2 has queued (through TLS when on), in one write; ends the connection once neither side
    /// has more to say.
    func flush() {
        guard let session, !finished, !inFlush, !inReceive else { return }
        guard let stream else {
            // In memory (``init(loop:output:settings:)``): nghttp2's chunks go to `output` as they come.
            guard let output else { return }
            inFlush = true
            defer { inFlush = false }
            var wrote = false
            while let chunk = nextChunk(session) {
                output(chunk)
                wrote = true
            }
            if wrote { writes += 1 }
            endIfDone(session)
            return
        }
        guard !stream.isClosed else { return }
        inFlush = true
        defer { inFlush = false }
        if let tls, !tls.handshakeDone {
            tls.takeCiphertext { stream.write($0) }
            return
        }
        guard let tls else {
            // h2c: nghttp2's chunks go straight into the write's block (one copy of each byte).
            stream.write(gathering: { gather in
                while let chunk = nextChunk(session) { gather.append(chunk) }
                if gather.count > 0 { writes += 1 }
            })
            if let overflow = unsentOverflow() { return end(overflow) }
            endIfDone(session)
            return
        }
        outgoing.removeAll(keepingCapacity: true)
        while let chunk = nextChunk(session) { outgoing.append(contentsOf: chunk) }
        if !outgoing.isEmpty {
            writes += 1
            let failed: Bool = outgoing.withUnsafeBytes { bytes in
                do {
                    try tls.writePlaintext(bytes)
                    return false
                } catch {
                    return true
                }
            }
            if failed { endReason = endReason ?? "TLS write failed" }
        }
        tls.takeCiphertext { stream.write($0) }
        if let overflow = unsentOverflow() { return end(overflow) }
        if outgoing.capacity > 1 << 20 { outgoing = [] }
        endIfDone(session)
    }

    /// nghttp2's next chunk of output (valid until the next call), nil when it has nothing more (or failed).
    private func nextChunk(_ session: OpaquePointer) -> UnsafeRawBufferPointer? {
        var data: UnsafePointer<UInt8>?
        let n = nghttp2_session_mem_send(session, &data)
        if n < 0 {
            endReason = endReason ?? "nghttp2: " + String(cString: nghttp2_strerror(Int32(n)))
            return nil
        }
        return n == 0 ? nil : UnsafeRawBufferPointer(start: data, count: n)
    }

    /// Ends the connection once neither side has more to say.
    private func endIfDone(_ session: OpaquePointer) {
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            inFlush = false
            end(endReason ?? (goAwayReceived ? "GOAWAY from the server" : protocolError ?? "session ended"))
        }
    }

    /// The end: the socket closes once written, open streams and queued requests fail, the owner is told.
    func end(_ reason: String) {
        guard !finished else { return }
        finished = true
        endReason = endReason ?? reason
        stream?.closeWhenDrained(withinMillis: 1000)
        // Streams still open: nghttp2 would close them in nghttp2_session_del without our callbacks; fail them here.
        lastRecordId = 0
        lastRecord = nil
        if let session {
            // Sent and still open: the server may have processed them (not handed back for another try).
            let failure = H2ClientFailure.connectionEnded
            while let head = openList {
                let record = head.takeUnretainedValue()
                unlink(record)
                nghttp2_session_set_stream_user_data(session, record.streamId, nil)
                head.release()
                openStreams -= 1
                finishStream(record, failure: failure)
            }
        }
        let waiting = queue[queueHead...]
        queue = []
        queueHead = 0
        let failure: H2ClientFailure = goAwayReceived ? .goAway : .connectionEnded
        for case let request? in waiting { fail(request, failure, submittedNanos: 0) }
        onClosed?(self)
        // onResponse stays: a request submitted after the end still fails in it (it was dropped unanswered, found
        // by the push fuzz target); the owner's closure must not hold the connection strongly.
        onReady = nil
        onClosed = nil
    }
}
