internal import CNGHTTP2
import UVLoop

// What a server can make the client hold, and the bound on each (issue 21, item 4). A bound reached is counted:
// per request as the failure `responseTooLarge` (its stream reset), per connection as the connection's end reason.
//
// - A response's header block (every HEADERS/CONTINUATION of the stream: the answer, interim answers, trailers):
//   at most `maxResponseHeaderFields` fields (100) and `maxResponseHeaderBytes` (16 KiB, counted as
//   SETTINGS_MAX_HEADER_LIST_SIZE counts: name + value + 32 per field, and advertised as that setting). nghttp2
//   1.52 enforces no header-list limit on what it receives (it has no option for one; a single field above 64 KiB
//   is a COMPRESSION_ERROR for the connection), so the header callback counts: past the bound it fails the
//   callback, nghttp2 resets the stream (RST_STREAM INTERNAL_ERROR) and decodes the rest of the block without
//   handing it over.
// - A response's body: at most `maxResponseBodyBytes` (64 KiB; APNs answers with a few dozen bytes), then
//   RST_STREAM CANCEL; `bodyLimit` (4 KiB) of it is kept for the reason.
// - Pushed streams: none. SETTINGS_ENABLE_PUSH 0 is sent, and nghttp2 treats a PUSH_PROMISE after it as a
//   connection error (PROTOCOL_ERROR, GOAWAY): the connection ends, every request on it fails once.
// - CONTINUATION floods: Debian's nghttp2 1.52.0-1+deb12u3 (CVE-2024-28182) ends the session after 8
//   CONTINUATION frames of one header block; the header bound above holds whatever the library version.
// - SETTINGS and PING floods: nghttp2 answers each with an ACK and ends the session (NGHTTP2_ERR_FLOODED) when
//   more than 1,000 ACKs wait in its queue; the connection drains that queue into the socket after every read,
//   so the bound that holds is the socket's: more than `maxUnsentBytes` (64 MiB) written and not yet taken by the
//   server ends the connection (a server that sends and never reads). Requests alone stay far below it: at most
//   `maxConcurrentStreams` open, each a few kilobytes.
// - Streams open: at most `maxConcurrentStreams` and the server's SETTINGS_MAX_CONCURRENT_STREAMS; the requests
//   beyond wait in the queue, at most `maxQueued` (past it a request fails at once: `queueFull`).
// - A server that never answers holds a stream until the request deadline resets it (`timeout`), and a half-open
//   connection is found by its PING (H2ClientConnection+Deadlines.swift; the owner's sweep decides both).
// - nghttp2's own memory: its allocator keeps at most `memoryCacheBytes` of freed blocks; a SETTINGS frame of more
//   than 64 entries ends the connection.

/// One stream's answer so far, against the connection's bounds (see the comment above).
struct ResponseBounds {
    let maxHeaderBytes: Int
    let maxHeaderFields: Int
    let maxBodyBytes: Int
    var headerBytes = 0
    var headerFields = 0
    var bodyBytes = 0
    /// The part that went past its bound ("headers" or "body"), first one only.
    var exceeded: String?
    /// RST_STREAM submitted for a body past its bound.
    var resetSubmitted = false

    init(_ settings: H2ClientSettings) {
        maxHeaderBytes = settings.maxResponseHeaderBytes
        maxHeaderFields = settings.maxResponseHeaderFields
        maxBodyBytes = settings.maxResponseBodyBytes
    }

    /// One header field of `bytes` (name + value): false once the block is past its bound (or the body was).
    @inline(__always)
    mutating func admit(field bytes: Int) -> Bool {
        headerFields += 1
        headerBytes += bytes + 32
        if exceeded == nil && (headerFields > maxHeaderFields || headerBytes > maxHeaderBytes) { exceeded = "headers" }
        return exceeded == nil
    }

    /// `count` more body bytes: false once the body is past its bound (or the headers were).
    @inline(__always)
    mutating func admit(body count: Int) -> Bool {
        bodyBytes += count
        if exceeded == nil && bodyBytes > maxBodyBytes { exceeded = "body" }
        return exceeded == nil
    }
}

extension H2ClientConnection {
    /// A body past its bound: the stream is reset (CANCEL), once; the request fails as `responseTooLarge` when the
    /// stream closes.
    func bodyTooLarge(_ session: OpaquePointer?, _ id: Int32) -> Int32 {
        guard let record = record(session, id), !record.bounds.resetSubmitted else { return 0 }
        record.bounds.resetSubmitted = true
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_CANCEL.rawValue)
        return 0
    }

    /// The connection's end reason when the socket holds more than `maxUnsentBytes` the server has not taken.
    func unsentOverflow() -> String? {
        guard let stream, stream.pendingWriteBytes > settings.maxUnsentBytes else { return nil }
        return "the server does not read: \(stream.pendingWriteBytes) bytes unsent (bound \(settings.maxUnsentBytes))"
    }

    /// nghttp2's errors kept (its messages, and the frames it refused): a connection nghttp2 ends by itself (bytes
    /// that are not HTTP/2, a PUSH_PROMISE after SETTINGS_ENABLE_PUSH 0) ends with the last one as its reason.
    static func watchErrors(_ callbacks: OpaquePointer?) {
        nghttp2_session_callbacks_set_error_callback2(callbacks) { _, _, message, length, user in
            H2ClientConnection.with(user) { connection in
                let text = UnsafeRawBufferPointer(start: message, count: length).prefix(200)
                connection.protocolError = "protocol error: " + String(decoding: text, as: UTF8.self)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, frame, code, user in
            H2ClientConnection.with(user) { connection in
                connection.protocolError = "protocol error: " + String(cString: nghttp2_strerror(code))
                    + " (a frame of type \(frame?.pointee.hd.type ?? 0) on stream \(frame?.pointee.hd.stream_id ?? 0))"
            }
            return 0
        }
    }

    /// Input for an in-memory connection (``init(loop:output:settings:)``), as if read from a socket: processed,
    /// then queued requests go out and the answer is written to `output`.
    public func receive(_ bytes: UnsafeRawBufferPointer) {
        received(bytes)
    }
}
