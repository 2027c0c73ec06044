/// The requests a worker forwarded to the workers owning their tokens, waiting for their answers: slots in an
/// array, reused through a free list, each id its slot and the slot's generation (an answer for a request whose
/// connection closed meanwhile finds its slot empty or reused and is dropped, never given to another request).
/// A look-up is an index and a compare: a `[Int: …]` dictionary hashed every id twice with SipHash. Generic only so
/// a test can hold plain objects (`APNsServer` holds `H2ServerConnection` and `H2Request`).
struct ForwardedRequests<Connection: AnyObject, Request: AnyObject> {
    private var slots: [(generation: UInt32, connection: Connection?, request: Request?)] = []
    private var free: [Int32] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Keeps `request` of `connection` until its answer comes back; the id goes with the forwarded request.
    mutating func add(_ connection: Connection, _ request: Request) -> Int {
        let slot: Int
        if let reused = free.popLast() {
            slot = Int(reused)
            slots[slot].generation &+= 1
            slots[slot].connection = connection
            slots[slot].request = request
        } else {
            slot = slots.count
            slots.append((0, connection, request))
        }
        count += 1
        return Int(slots[slot].generation) << 32 | slot
    }

    /// The request `id` names, taken out; nil when its connection closed since (its slot emptied).
    mutating func remove(_ id: Int) -> (connection: Connection, request: Request)? {
        let slot = id & 0xFFFF_FFFF
        guard slot < slots.count, Int(slots[slot].generation) == id >> 32,
            let connection = slots[slot].connection, let request = slots[slot].request
        else { return nil }
        release(slot)
        return (connection, request)
    }

    /// Forgets the requests of a closed connection: their answers, when they come, are dropped.
    mutating func removeAll(of connection: Connection) {
        for slot in slots.indices where slots[slot].connection === connection { release(slot) }
    }

    private mutating func release(_ slot: Int) {
        slots[slot].connection = nil
        slots[slot].request = nil
        free.append(Int32(slot))
        count -= 1
    }
}
