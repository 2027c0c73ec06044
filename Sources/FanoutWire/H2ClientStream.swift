/// One open stream's state, nghttp2's stream user data (retained from submit to close). A connection keeps the
/// records of closed streams for the next requests (``H2ClientConnection/recycle(_:)``): no allocation and
/// deallocation per request.
final class ClientStream {
    /// The request, kept whole (its path and content retained, not copied): a stream refused by a GOAWAY hands it
    /// back for another try. Held in a slot of the record's own and moved in and out through it (`hold`, `clear`):
    /// an `H2ClientRequest?` here was destroyed through the runtime's generic value witnesses at every `nil`.
    /// Read only while `holdsRequest`.
    private let slot = UnsafeMutablePointer<H2ClientRequest>.allocate(capacity: 1)
    // `@exclusivity(unchecked)`: a record is touched only on its connection's loop thread, one callback at a time.
    @exclusivity(unchecked) private(set) var holdsRequest = false
    var request: H2ClientRequest {
        unsafeAddress { UnsafePointer(slot) }
    }
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
        self.submittedNanos = submittedNanos
        hold(request)
    }

    deinit {
        if holdsRequest { slot.deinitialize(count: 1) }
        slot.deallocate()
    }

    /// Takes `request` into the slot (empty: a new record's, or one cleared for reuse).
    func hold(_ request: consuming H2ClientRequest) {
        precondition(!holdsRequest, "a record holds one request at a time")
        slot.initialize(to: request)
        holdsRequest = true
    }

    /// Back to a new record's state, the request dropped (its arrays released now, not at the record's reuse).
    /// Every field `init` sets or defaults is set here again: a new field belongs in both.
    func clear(_ settings: H2ClientSettings) {
        if holdsRequest {
            slot.deinitialize(count: 1)
            holdsRequest = false
        }
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
        record.hold(request)
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
