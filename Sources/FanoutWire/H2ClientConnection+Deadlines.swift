internal import CNGHTTP2
import UVLoop

/// The deadlines of a client connection (nanoseconds; 0: none), read by the owner's periodic sweep
/// (``H2ClientConnection/sweep(now:_:)``): TCP connect + TLS handshake + the server's first SETTINGS, from the
/// connection's opening; a request's answer, from its hand-over (``H2ClientRequest/handedNanos``); a PING every
/// `pingIntervalNanos`, whose ACK must arrive before the next one is due.
public struct ClientDeadlines: Sendable, Equatable {
    public var connectNanos: UInt64
    public var requestNanos: UInt64
    public var pingIntervalNanos: UInt64

    public init(connectSeconds: Double, requestSeconds: Double, pingIntervalSeconds: Double) {
        connectNanos = deadlineNanos(connectSeconds)
        requestNanos = deadlineNanos(requestSeconds)
        pingIntervalNanos = deadlineNanos(pingIntervalSeconds)
    }
}

/// A deadline of `seconds` in nanoseconds, for the client's and the server's deadlines alike: 0 (none) for 0 or
/// less, and at most `UInt64.max / 2` (so `now + deadline` cannot overflow) for infinity or anything that long.
func deadlineNanos(_ seconds: Double) -> UInt64 {
    guard seconds.isFinite, seconds > 0 else { return seconds > 0 ? UInt64.max / 2 : 0 }
    return seconds >= Double(UInt64.max / 2) / 1e9 ? UInt64.max / 2 : UInt64(seconds * 1e9)
}

// The connection's deadlines and its drain: the one place they are decided (the owner's sweep passes the time in,
// so tests drive them on a virtual clock), and the stream ids' end.
extension H2ClientConnection {
    /// What a sweep at `now` did.
    public enum SweepAction: Equatable, Sendable {
        case none
        /// Ended: not ready within the connect deadline, or its PING unanswered by the next one.
        case ended
        /// Requests failed as ``H2ClientFailure/timeout`` (open streams reset, queued ones failed).
        case expired(Int)
    }

    /// The one place a client connection's deadlines are decided (the owner calls it from its periodic sweep):
    /// not ready by the connect deadline → ended (every request handed back or failed as at any end); requests
    /// handed over before `now − requestNanos` and still unanswered → RST_STREAM CANCEL (open) or failed (queued),
    /// as ``H2ClientFailure/timeout``; a PING unanswered for a ping interval → ended (a half-open connection: its
    /// open requests fail as `connectionEnded`, its queued ones are handed back); else a PING when one is due. A
    /// draining connection whose streams all ended is closed. Precise to the sweep's period.
    @discardableResult
    public func sweep(now: UInt64, _ d: ClientDeadlines) -> SweepAction {
        guard !finished else { return .none }
        if !isReady {
            guard d.connectNanos > 0, now &- openedNanos >= d.connectNanos, now > openedNanos else { return .none }
            end("no HTTP/2 connection within \(Double(d.connectNanos) / 1e9) s (TCP connect, TLS, SETTINGS)")
            return .ended
        }
        if d.pingIntervalNanos > 0 && !isDraining {
            if pingSentNanos != 0 && now > pingSentNanos && now - pingSentNanos >= d.pingIntervalNanos {
                end("no PING answer within \(Double(d.pingIntervalNanos) / 1e9) s (a half-open connection)")
                return .ended
            }
            if pingSentNanos == 0 && (lastPingNanos == 0 || now &- lastPingNanos >= d.pingIntervalNanos) {
                ping(now: now)
            }
        }
        var expired = 0
        if d.requestNanos > 0 && now > d.requestNanos {
            expired = expireRequests(handedBeforeNanos: now - d.requestNanos)
        }
        closeIfDrained()
        return expired > 0 ? .expired(expired) : .none
    }

    /// Sends a PING (its ACK is awaited until the next sweep past the ping interval).
    func ping(now: UInt64) {
        guard let session, !finished else { return }
        var opaque = now.bigEndian
        let status = withUnsafeBytes(of: &opaque) {
            nghttp2_submit_ping(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), $0.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard status == 0 else { return }
        pingSentNanos = max(now, 1)
        lastPingNanos = pingSentNanos
        pingsSent += 1
        flush()
    }

    /// Fails as ``H2ClientFailure/timeout`` every request handed over before `handedBeforeNanos` and unanswered:
    /// open ones from the oldest stream on (RST_STREAM CANCEL; they fail when the stream closes), queued ones from
    /// the queue's head (at once, not handed back). A request sent again keeps its first hand-over, so one may sit
    /// behind newer ones; it expires once they have.
    ///
    /// - Returns: the number of requests expired.
    @discardableResult
    public func expireRequests(handedBeforeNanos cutoff: UInt64) -> Int {
        guard let session, !finished else { return 0 }
        var expired = 0
        var cursor = oldestOpen
        while let link = cursor {
            let record = link.takeUnretainedValue()
            cursor = record.newer
            if record.timedOut { continue }
            guard record.holdsRequest, record.request.handedNanos < cutoff else { break }
            record.timedOut = true
            nghttp2_submit_rst_stream(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), record.streamId, NGHTTP2_CANCEL.rawValue)
            expired += 1
        }
        while let handed = queue.firstHandedNanos, handed < cutoff {
            fail(queue.removeFirst(), .timeout, submittedNanos: 0, handBack: false)
            expired += 1
        }
        if expired > 0 {
            flush()  // the RST_STREAMs go out and their streams close
            // The streams freed take queued requests now: a server that never answers sends nothing that would
            // (the queue is pumped after each read).
            pump()
            flush()
        }
        return expired
    }

    /// The stream ids are near their end: nothing more goes out on this connection; its queue is handed back (after
    /// the receive, if inside one) and the owner told (``onDraining``); it closes once its open streams ended.
    func beginDrainingForStreamIds() {
        guard !streamIdsExhausted, !finished else { return }
        let first = !isDraining
        streamIdsExhausted = true
        if first { onDraining?(self) }
        if !transport.inReceive { handBackQueued() }
    }

    /// A draining connection's queued requests, handed back unsent (``H2ClientResponse/unprocessed``).
    func handBackQueued() {
        guard isDraining, !queue.isEmpty else { return }
        let failure: H2ClientFailure = goAwayReceived ? .goAway : .streamIdsExhausted
        handBackAll(failure)
    }

    /// A connection drained for its stream ids closes (GOAWAY NO_ERROR) once no stream is open; a GOAWAY's
    /// connection ends by itself when nghttp2 has nothing more to read or write.
    func closeIfDrained() {
        guard streamIdsExhausted, !finished, openStreams == 0, !transport.busy else { return }
        close(reason: "stream ids used up (drained)")
    }

    /// Sets the next stream id (odd, at least the next one nghttp2 would use): a test starts a connection near the
    /// end of its ids this way. False when nghttp2 refuses it.
    @discardableResult
    public func setNextStreamId(_ id: Int32) -> Bool {
        guard let session else { return false }
        return nghttp2_session_set_next_stream_id(session, id) == 0
    }

    /// The stream id the next request would get (2^31 once they ran out).
    public var nextStreamId: UInt32 {
        guard let session else { return 0 }
        return nghttp2_session_get_next_stream_id(session)
    }
}
