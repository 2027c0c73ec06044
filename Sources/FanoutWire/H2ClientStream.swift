/// One open stream's state, nghttp2's stream user data (retained from submit to close). A connection keeps the
/// records of closed streams for the next requests (``H2ClientConnection/recycle(_:)``): no allocation and
/// deallocation per request.
final class ClientStream {
    /// Kept whole (its path and content retained, not copied): a stream refused by a GOAWAY hands it back for
    /// another try. nil while the record waits for reuse.
    // `@exclusivity(unchecked)`: a record is touched only on its connection's loop thread, one callback at a time.
    @exclusivity(unchecked) var request: H2ClientRequest?
    @exclusivity(unchecked) var bodyOffset = 0
    @exclusivity(unchecked) var submittedNanos: UInt64
    @exclusivity(unchecked) var status = 0
    @exclusivity(unchecked) var apnsId: [UInt8] = []
    @exclusivity(unchecked) var response: [UInt8] = []
    @exclusivity(unchecked) var endNanos: UInt64 = 0
    /// Reset by the request deadline (RST_STREAM CANCEL submitted): it fails as ``H2ClientFailure/timeout``.
    @exclusivity(unchecked) var timedOut = false
    let bodyLimit: Int
    /// The answer's header fields and body bytes so far, against the connection's bounds.
    @exclusivity(unchecked) var bounds: ResponseBounds
    /// Its stream, and its neighbours in the connection's list of open streams (not retained: the stream's user
    /// data holds the record while it is listed).
    @exclusivity(unchecked) var streamId: Int32 = 0
    @exclusivity(unchecked) var newer: Unmanaged<ClientStream>?
    @exclusivity(unchecked) var older: Unmanaged<ClientStream>?

    init(request: consuming H2ClientRequest, submittedNanos: UInt64, settings: H2ClientSettings) {
        bodyLimit = settings.bodyLimit
        bounds = ResponseBounds(settings)
        self.request = request
        self.submittedNanos = submittedNanos
    }

    /// Back to a new record's state, the request dropped (its arrays released now, not at the record's reuse).
    /// Every field `init` sets or defaults is set here again: a new field belongs in both.
    func clear(_ settings: H2ClientSettings) {
        request = nil
        bodyOffset = 0
        status = 0
        if !apnsId.isEmpty { apnsId = [] }
        if !response.isEmpty { response = [] }
        endNanos = 0
        timedOut = false
        bounds = ResponseBounds(settings)
        streamId = 0
        newer = nil
        older = nil
    }
}

extension H2ClientConnection {
    /// A record for `request`: a spare one, or a new one.
    @inline(__always)
    func makeRecord(_ request: consuming H2ClientRequest, submittedNanos: UInt64) -> ClientStream {
        guard let record = spareRecords.popLast() else {
            return ClientStream(request: request, submittedNanos: submittedNanos, settings: settings)
        }
        record.request = request
        record.submittedNanos = submittedNanos
        return record
    }

    /// Keeps the record of a stream that ended for a later request (at most one per stream the connection may
    /// open, so the spares never outnumber the streams).
    @inline(__always)
    func recycle(_ record: ClientStream) {
        record.clear(settings)
        if spareRecords.count < settings.maxConcurrentStreams { spareRecords.append(record) }
    }
}
