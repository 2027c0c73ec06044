internal import CNGHTTP2
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

// nghttp2's session and its callbacks: SETTINGS, GOAWAY, response headers and data, stream closes, request
// bodies.
extension H2ClientConnection {
    func startSession() {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            session, frame, name, nameLength, value, valueLength, _, user in
            H2ClientConnection.with(user) {
                $0.header(
                    session, frame!, UnsafeRawBufferPointer(start: name, count: nameLength),
                    UnsafeRawBufferPointer(start: value, count: valueLength))
            }
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) {
            session, _, streamId, data, length, user in
            H2ClientConnection.with(user) {
                $0.data(session, streamId, UnsafeRawBufferPointer(start: data, count: length))
            }
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { session, frame, user in
            H2ClientConnection.with(user) { $0.frameReceived(session, frame!) }
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { session, streamId, code, user in
            H2ClientConnection.with(user) { $0.streamClosed(session, streamId, code) }
        }
        H2ClientConnection.watchErrors(callbacks)
        let created = pool.session(
            callbacks: callbacks, user: Unmanaged.passUnretained(self).toOpaque(), server: false)
        session = created
        if settings.firstStreamId > 1 {
            nghttp2_session_set_next_stream_id(created, settings.firstStreamId | 1)
        }
        var entries = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: settings.windowBytes),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: UInt32(clamping: settings.maxResponseHeaderBytes)),
        ]
        nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        nghttp2_session_set_local_window_size(
            created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(min(settings.windowBytes, 1 << 30)))
    }

    @inline(__always)
    static func with<R>(_ user: UnsafeMutableRawPointer?, _ body: (H2ClientConnection) -> R) -> R {
        Unmanaged<H2ClientConnection>.fromOpaque(user!)._withUnsafeGuaranteedRef(body)
    }

    /// Stream `id`'s record (nil once it closed): the one looked up last, or nghttp2's stream user data.
    @inline(__always)
    func record(_ session: OpaquePointer?, _ id: Int32) -> ClientStream? {
        lookUp(session, id)?.takeUnretainedValue()
    }

    @inline(__always)
    func lookUp(_ session: OpaquePointer?, _ id: Int32) -> Unmanaged<ClientStream>? {
        if id == lastRecordId, let last = lastRecord { return last }
        guard let user = nghttp2_session_get_stream_user_data(session, id) else { return nil }
        let record = Unmanaged<ClientStream>.fromOpaque(user)
        lastRecordId = id
        lastRecord = record
        return record
    }

    /// `body` with stream `id`'s record, borrowed (its stream's user data holds it): no retain and release per
    /// header field or body chunk. 0 when the stream has no record (closed).
    @inline(__always)
    func withRecord(_ session: OpaquePointer?, _ id: Int32, _ body: (ClientStream) -> Int32) -> Int32 {
        guard let record = lookUp(session, id) else { return 0 }
        return record._withUnsafeGuaranteedRef(body)
    }

    func header(
        _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>, _ name: UnsafeRawBufferPointer,
        _ value: UnsafeRawBufferPointer
    ) -> Int32 {
        withRecord(session, frame.pointee.hd.stream_id) { record in
            // Past the header bound: nghttp2 resets the stream and hands over no more of the block.
            guard record.bounds.admit(field: name.count + value.count) else {
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
            }
            guard frame.pointee.headers.cat == NGHTTP2_HCAT_RESPONSE else { return 0 }
            // Both names are 7 bytes long: most fields are told apart by their length alone.
            guard name.count == 7 else { return 0 }
            func named(_ text: StaticString) -> Bool { memcmp(name.baseAddress!, text.utf8Start, 7) == 0 }
            if named(":status") {
                var status = 0
                for byte in value where byte >= 0x30 && byte <= 0x39 { status = status * 10 + Int(byte - 0x30) }
                record.status = status
            } else if settings.keepsApnsId && named("apns-id") {
                record.apnsId = Array(value)
            }
            return 0
        }
    }

    func data(_ session: OpaquePointer?, _ id: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        withRecord(session, id) { record in
            if !record.bounds.admit(body: bytes.count) { return bodyTooLarge(session, id) }
            let room = record.bodyLimit - record.response.count
            if room > 0 { record.response.append(contentsOf: bytes.prefix(room)) }
            return 0
        }
    }

    func frameReceived(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let type = UInt32(frame.pointee.hd.type)
        if type == NGHTTP2_SETTINGS.rawValue && frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
            settingsArrived = true
        } else if type == NGHTTP2_GOAWAY.rawValue {
            let first = !isDraining
            goAwayReceived = true
            endReason = endReason ?? "GOAWAY from the server (error \(frame.pointee.goaway.error_code))"
            if first { onDraining?(self) }
        } else if type == NGHTTP2_PING.rawValue && frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 {
            if pingSentNanos != 0 {
                pingSentNanos = 0
                pingsAnswered += 1
            }
        } else if type == NGHTTP2_HEADERS.rawValue || type == NGHTTP2_DATA.rawValue,
            frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        {
            // Borrowed (no retain and release per answer).
            return withRecord(session, frame.pointee.hd.stream_id) { record in
                record.endNanos = EventLoop.hrtimeNanos
                return 0
            }
        }
        return 0
    }

    func streamClosed(_ session: OpaquePointer?, _ id: Int32, _ code: UInt32) -> Int32 {
        guard let user = nghttp2_session_get_stream_user_data(session, id) else { return 0 }
        nghttp2_session_set_stream_user_data(session, id, nil)
        if lastRecordId == id {
            lastRecordId = 0
            lastRecord = nil
        }
        let record = Unmanaged<ClientStream>.fromOpaque(user).takeRetainedValue()
        unlink(record)
        openStreams -= 1
        if record.endNanos != 0 && record.status != 0 {
            finishStream(record, failure: nil)
        } else if record.timedOut {
            finishStream(record, failure: .timeout)
        } else if goAwayReceived && code == NGHTTP2_REFUSED_STREAM.rawValue {
            finishStream(record, failure: .goAway)
        } else if code == NGHTTP2_REFUSED_STREAM.rawValue {
            // Not processed (RFC 9113 §8.7): handed back for another try.
            streamsRefused += 1
            finishStream(record, failure: .reset(code))
        } else {
            finishStream(record, failure: code == 0 ? .connectionEnded : .reset(code))
        }
        return 0
    }

    func finishStream(_ record: ClientStream, failure: H2ClientFailure?) {
        let failure = record.bounds.exceeded.map { H2ClientFailure.responseTooLarge($0) } ?? failure
        count(failure)
        // The answer's arrays move out of the record (no retain here, no release at its clear).
        var apnsId: [UInt8] = [], body: [UInt8] = []
        swap(&apnsId, &record.apnsId)
        swap(&body, &record.response)
        deliver(H2ClientResponse(
            tag: record.request.tag, status: failure == nil ? record.status : 0, apnsId: apnsId,
            body: body, failure: failure, unprocessed: H2ClientConnection.unprocessed(failure)
                ? record.request : nil,
            handedNanos: record.request.handedNanos, submittedNanos: record.submittedNanos,
            endNanos: failure == nil ? record.endNanos : EventLoop.hrtimeNanos))
        recycle(record)
    }

    /// Whether a sent request that failed so was not processed by the server: refused by a GOAWAY (above its last
    /// stream id) or by RST_STREAM REFUSED_STREAM (RFC 9113 §8.7).
    static func unprocessed(_ failure: H2ClientFailure?) -> Bool {
        failure == .goAway || failure == .reset(UInt32(NGHTTP2_REFUSED_STREAM.rawValue))
    }

    /// The body of the request whose record is `source` (retained by its stream until the stream closes; `end()`
    /// releases the records of streams still open, and nghttp2 is not asked for more once the connection ended:
    /// `flush`, `process` and `pump` do nothing after `finished`).
    static func readBody(
        _ source: UnsafeMutableRawPointer?, _ buffer: UnsafeMutablePointer<UInt8>, _ length: Int,
        _ flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let source else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let record = Unmanaged<ClientStream>.fromOpaque(source).takeUnretainedValue()
        let body = record.request.content.body
        let n = min(length, body.count - record.bodyOffset)
        body.withUnsafeBytes { bytes in
            UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + record.bodyOffset, byteCount: n)
        }
        record.bodyOffset += n
        if record.bodyOffset == body.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return n
    }
}
