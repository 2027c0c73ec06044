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
                if let tls = transport.tls {
                    try tls.startHandshake()
                    transport.writeCiphertext()
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
        if let reason = transport.receive(bytes, into: session) { return end(reason) }
        if settingsArrived && !isReady {
            isReady = true
            onReady?(self)
            if finished { return }
        }
        // A GOAWAY or the stream ids' end met inside the receive: the queue goes back to the owner now (to the
        // replacement), not when this connection ends.
        handBackQueued()
        pump()
        flush()
        closeIfDrained()
    }

    /// Sends what nghttp2 has queued (through TLS when on), in one write; ends the connection once neither side
    /// has more to say.
    func flush() {
        guard let session, !finished, !transport.busy else { return }
        let sent = transport.send(session)
        if finished || sent.skipped { return }  // a write failed and ended the connection
        if let overflow = unsentOverflow() { return end(overflow) }
        if H2Transport.done(session) {
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
        handBackAll(goAwayReceived ? .goAway : streamIdsExhausted ? .streamIdsExhausted : .connectionEnded)
        onClosed?(self)
        // onResponse stays: a request submitted after the end still fails in it (it was dropped unanswered, found
        // by the push fuzz target); the owner's closure must not hold the connection strongly.
        onReady = nil
        onClosed = nil
        onDraining = nil
        spareRecords = []  // not kept by a connection that will send nothing more
    }
}
