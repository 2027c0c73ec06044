internal import CNGHTTP2
import FanoutCore
import UVLoop

/// Answers, output with backpressure, and the connection's end.
extension H2ServerConnection {
    /// Submits the response of a request that has not been answered; bytes go out at the next flush (at the
    /// end of the current read callback, or now when called outside one). An answer whose stream is gone (reset
    /// by the client, timed out, the connection ended) is counted in ``answersDropped``.
    public func respond(to request: H2Request, with response: H2Response) {
        guard let session, !request.answered, stream(request.streamId) === request else {
            answersDropped += 1
            return
        }
        request.answered = true
        request.response = response.body
        // Every name and value in one buffer, reused from response to response; nghttp2 copies the pairs into
        // its frame on submit.
        headerBytes.removeAll(keepingCapacity: true)
        headerRanges.removeAll(keepingCapacity: true)
        func add(_ name: some Sequence<UInt8>, _ value: some Sequence<UInt8>, flags: UInt8 = 0) {
            let n = headerBytes.count
            headerBytes.append(contentsOf: name)
            let v = headerBytes.count
            headerBytes.append(contentsOf: value)
            headerRanges.append((Int32(n), Int32(v), Int32(headerBytes.count), flags))
        }
        func bytes(_ text: StaticString) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
        }
        if let text = H2ServerConnection.statusText(response.status) {
            add(bytes(":status"), bytes(text))
        } else {
            add(bytes(":status"), String(response.status).utf8)
        }
        let never = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
        if let id = response.id { id.withValue { add(bytes(id.name), $0, flags: never) } }
        if let id = response.extraId { id.withValue { add(bytes(id.name), $0, flags: never) } }
        for header in response.headers { add(header.name.utf8, header.value.utf8) }
        if !response.body.isEmpty { add(bytes("content-length"), String(response.body.count).utf8) }
        let ranges = headerRanges
        let status: Int32 = headerBytes.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: ranges.count) { pairs in
                for (i, r) in ranges.enumerated() {
                    pairs[i] = nghttp2_nv(
                        name: base + Int(r.name), value: base + Int(r.value), namelen: Int(r.value - r.name),
                        valuelen: Int(r.end - r.value), flags: r.flags)
                }
                if response.body.isEmpty {
                    return nghttp2_submit_response(session, request.streamId, pairs.baseAddress, ranges.count, nil)
                }
                var provider = CNGHTTP2_data_provider(nil) { session, streamId, buffer, length, dataFlags, _, user in
                    H2ServerConnection.with(user) { $0.readBody(streamId, buffer!, length, dataFlags!) }
                }
                return nghttp2_submit_response(session, request.streamId, pairs.baseAddress, ranges.count, &provider)
            }
        }
        if status == 0 {
            responsesSubmitted += 1
            unsentAnswerBytes += response.body.count
            budget?.unsentAnswerBytes += response.body.count
        } else {
            answersDropped += 1
            request.response = []
        }
        if !transport.busy { flush() }
    }

    /// Refuses a complete request without an answer (RST_STREAM REFUSED_STREAM: nothing was done, the client may
    /// retry it), counted in ``requestsRefused``. The owner's choice, e.g. while this client holds too many unsent
    /// answer bytes.
    public func refuse(_ request: H2Request) {
        guard let session, !request.answered, stream(request.streamId) === request else { return }
        request.answered = true  // not a stream reset before its answer: the refusal is its answer
        requestsRefused += 1
        nghttp2_submit_rst_stream(
            session, UInt8(NGHTTP2_FLAG_NONE.rawValue), request.streamId, NGHTTP2_REFUSED_STREAM.rawValue)
        if !transport.busy { flush() }
    }

    /// Resets a complete request's stream instead of answering it (RST_STREAM with `code`), e.g. an injected
    /// fault. Not counted here (the owner counts why it reset); not a stream reset before its answer either.
    public func reset(_ request: H2Request, code: H2ResetCode) {
        guard let session, !request.answered, stream(request.streamId) === request else { return }
        request.answered = true
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), request.streamId, code.rawValue)
        if !transport.busy { flush() }
    }

    /// The part of a request's answer body nghttp2 has not taken leaves the unsent counts, and the body its memory
    /// (its stream closed, or the connection ended).
    func releaseAnswer(_ request: H2Request) {
        let left = request.response.count - request.responseOffset
        if left > 0 {
            unsentAnswerBytes -= left
            budget?.unsentAnswerBytes -= left
        }
        request.response = []
        request.responseOffset = 0
    }

    /// Graceful end: GOAWAY with NO_ERROR and `{"reason": reason}` as debug data; streams already opened
    /// finish; the connection closes when nothing is left to send or receive. `endReason` (default: `reason`) is
    /// why the connection is counted as ended, unless a reason was set before.
    public func goAway(reason: String, errorCode: UInt32 = 0, endReason label: String? = nil) {
        guard let session, !finished else { return }
        goingAway = true
        endReason = endReason ?? label ?? reason
        let debug = Array("{\"reason\":\"\(reason)\"}".utf8)
        let last = nghttp2_session_get_last_proc_stream_id(session)
        _ = debug.withUnsafeBufferPointer {
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, errorCode, $0.baseAddress, $0.count)
        }
        flush()
    }

    /// Closes at once, without GOAWAY (a client that never spoke HTTP/2, a client that stopped reading). With
    /// `replacing`, `reason` replaces a reason already set (a GOAWAY's, when the drain time is over).
    public func abort(reason: String, replacing: Bool = false) {
        endReason = replacing ? reason : endReason ?? reason
        finish()
    }

    func readBody(
        _ streamId: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ length: Int, _ flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let request = stream(streamId) else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let n = min(length, request.response.count - request.responseOffset)
        request.response.withUnsafeBytes { bytes in
            UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + request.responseOffset, byteCount: n)
        }
        request.responseOffset += n
        unsentAnswerBytes -= n
        budget?.unsentAnswerBytes -= n
        if request.responseOffset == request.response.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return n
    }

    // MARK: Output

    /// Holds the output: answers submitted until ``releaseOutput()`` are written together then, not one write each
    /// (the owner answering a batch of requests outside a read, e.g. answers handed back by another loop).
    public func holdOutput() { transport.held = true }

    public var holdsOutput: Bool { transport.held }

    /// Ends ``holdOutput()`` and sends what was submitted meanwhile.
    public func releaseOutput() {
        transport.held = false
        flush()
    }

    /// Sends what nghttp2 has queued (through TLS when on), up to the output watermark; closes once neither side
    /// has more to say.
    ///
    /// Backpressure as nghttp2's `libevent-server.c` does it: once ``H2ServerSettings/outputWatermarkBytes`` wait on
    /// the socket, no more frames are taken from nghttp2 (they stay in its queue, bounded by the open streams) and
    /// reading stops, until the socket drains (``drained()``). A client that does not read therefore holds at most
    /// about the watermark plus one read's answers.
    public func flush() {
        guard let session, !finished, !transport.busy else { return }
        let sent = transport.send(session)
        if finished || sent.skipped { return }  // a write failed and ended the connection
        if sent.blocked, let stream {
            if !outputPaused { outputPauses += 1 }
            outputPaused = true
            stream.pauseReading()
        }
        if H2Transport.done(session) {
            endReason = endReason ?? sessionEndReason
            finish()
        }
    }

    /// The socket has written everything queued: output resumes, and reading too once nghttp2's queue fits under
    /// the watermark again (so the streams a pipelining client keeps open stay bounded by one read's worth).
    func drained() {
        guard !finished, outputPaused, let stream else { return }
        outputPaused = false
        flush()
        guard !finished, !outputPaused else { return }
        do {
            try stream.resumeReading()
        } catch {
            end("\(error)")
        }
    }

    /// Why nghttp2 ended the session when no reason was set here: the client's GOAWAY, or a connection error
    /// nghttp2 detected (it sent GOAWAY with the error code to the client).
    var sessionEndReason: String {
        if let code = peerGoAwayCode {
            return code == 0 ? "closed by the client (GOAWAY)" : "closed by the client (GOAWAY error \(code))"
        }
        if let error = invalidFrameError { return "protocol error: " + String(cString: nghttp2_strerror(error)) }
        return "protocol error (GOAWAY by nghttp2)"
    }

    func end(_ reason: String) {
        endReason = endReason ?? reason
        finish()
    }

    func finish() {
        guard !finished else { return }
        finished = true
        outputPaused = false
        stream?.closeWhenDrained(withinMillis: settings.drainMillis)
        // The streams left open end here, unanswered.
        streams.forEach {
            if !$0.answered { streamsReset += 1 }
            releaseAnswer($0)
        }
        budget?.open -= streams.count
        incomplete.removeAll()
        streams.removeAll()
        pool.removeAll()
        lastStream = nil
        delegate?.connectionClosed(self)
        delegate = nil
    }
}
