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
        // Static names and values, and the values written into the request's own `answerValues` (kept until its
        // stream closes), go to nghttp2 without a copy (NO_COPY_NAME/VALUE: it neither copies nor lower-cases
        // them; every name here is lowercase). Only `response.headers` (Strings: an error's content-type) are
        // copied by nghttp2, from one buffer reused from response to response.
        let copied = response.headers.count
        if copied > 0 {
            headerBytes.removeAll(keepingCapacity: true)
            headerRanges.removeAll(keepingCapacity: true)
            for header in response.headers {
                let n = headerBytes.count
                headerBytes.append(contentsOf: header.name.utf8)
                let v = headerBytes.count
                headerBytes.append(contentsOf: header.value.utf8)
                headerRanges.append((Int32(n), Int32(v), Int32(headerBytes.count), 0))
            }
        }
        let count = 1 + (response.id == nil ? 0 : 1) + (response.extraId == nil ? 0 : 1) + copied
            + (response.body.isEmpty ? 0 : 1)
        let status: Int32 = withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: count) { pairs in
            let noCopy = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
            var k = 0
            func put(_ name: StaticString, _ value: UnsafeRawPointer, _ length: Int, never: Bool = false) {
                pairs[k] = nghttp2_nv(
                    name: UnsafeMutablePointer(mutating: name.utf8Start),
                    value: UnsafeMutablePointer(mutating: value.assumingMemoryBound(to: UInt8.self)),
                    namelen: name.utf8CodeUnitCount, valuelen: length,
                    flags: never ? noCopy | UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) : noCopy)
                k += 1
            }
            let values = request.answerValues
            let digits = values + 2 * UniqueHeader.capacity
            if let text = H2ServerConnection.statusText(response.status) {
                put(":status", text.utf8Start, text.utf8CodeUnitCount)
            } else {
                put(":status", digits, H2ServerConnection.writeDecimal(response.status, to: digits))
            }
            // Ids: never indexed (see UniqueHeader).
            if let id = response.id {
                id.withValue { if $0.count > 0 { values.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
                put(id.name, values, id.count, never: true)
            }
            if let id = response.extraId {
                let at = values + UniqueHeader.capacity
                id.withValue { if $0.count > 0 { at.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
                put(id.name, at, id.count, never: true)
            }
            if copied > 0 {
                headerBytes.withUnsafeMutableBufferPointer { buffer in
                    let base = buffer.baseAddress!
                    for r in headerRanges {
                        pairs[k] = nghttp2_nv(
                            name: base + Int(r.name), value: base + Int(r.value), namelen: Int(r.value - r.name),
                            valuelen: Int(r.end - r.value), flags: r.flags)
                        k += 1
                    }
                }
            }
            if response.body.isEmpty {
                return nghttp2_submit_response(session, request.streamId, pairs.baseAddress, k, nil)
            }
            let length = digits + 24
            put("content-length", length, H2ServerConnection.writeDecimal(response.body.count, to: length))
            var provider = CNGHTTP2_data_provider(nil) { session, streamId, buffer, length, dataFlags, _, user in
                H2ServerConnection.with(user) { $0.readBody(streamId, buffer!, length, dataFlags!) }
            }
            return nghttp2_submit_response(session, request.streamId, pairs.baseAddress, k, &provider)
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

    /// `value` in decimal as `String(value)` writes it, at `to` (room for 24 bytes); returns its length.
    static func writeDecimal(_ value: Int, to out: UnsafeMutableRawPointer) -> Int {
        var magnitude = value.magnitude
        var reversed: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var n = 0
        withUnsafeMutableBytes(of: &reversed) { r in
            repeat {
                r[n] = UInt8(truncatingIfNeeded: 0x30 &+ magnitude % 10)
                magnitude /= 10
                n += 1
            } while magnitude > 0
            var at = 0
            if value < 0 {
                out.storeBytes(of: UInt8(ascii: "-"), as: UInt8.self)
                at = 1
            }
            for i in 0..<n { out.storeBytes(of: r[n - 1 - i], toByteOffset: at + i, as: UInt8.self) }
            n += at
        }
        return n
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
