/// A connection's open request streams by id, without hashing. Client stream ids are odd and only increase, so
/// stream `id` lives in slot `(id >> 1) mod 1024`: a lookup is an index and a compare. A slot still held by an
/// older stream (one left open while 1,024 newer ones were opened after it) sends the newer stream to an
/// overflow dictionary, so every stream is found whatever the pattern.
struct StreamTable {
    static let slotCount = 1024
    private var slots = [H2Request?](repeating: nil, count: StreamTable.slotCount)
    private var overflow: [Int32: H2Request] = [:]
    /// Streams held (slots and overflow).
    private(set) var count = 0
    /// Streams that went to the overflow since the table was made (tests read it).
    private(set) var overflowed = 0

    @inline(__always)
    private static func slot(_ id: Int32) -> Int { Int(id >> 1) & (slotCount - 1) }

    @inline(__always)
    func find(_ id: Int32) -> H2Request? {
        if let r = slots[StreamTable.slot(id)], r.streamId == id { return r }
        return overflow.isEmpty ? nil : overflow[id]
    }

    /// Adds `request` under its `streamId` (replacing a stream of the same id).
    mutating func insert(_ request: H2Request) {
        let id = request.streamId
        _ = remove(id)
        let s = StreamTable.slot(id)
        if slots[s] == nil {
            slots[s] = request
        } else {
            overflow[id] = request
            overflowed += 1
        }
        count += 1
    }

    @discardableResult
    mutating func remove(_ id: Int32) -> H2Request? {
        let s = StreamTable.slot(id)
        if let r = slots[s], r.streamId == id {
            slots[s] = nil
            count -= 1
            return r
        }
        guard !overflow.isEmpty, let r = overflow.removeValue(forKey: id) else { return nil }
        count -= 1
        return r
    }

    /// Every stream held (slots, then overflow).
    func forEach(_ body: (H2Request) -> Void) {
        for case let r? in slots { body(r) }
        for r in overflow.values { body(r) }
    }

    mutating func removeAll() {
        // Slots are cleared up to the last one held (most connections end with none or a few low ones), not all.
        var left = count - overflow.count
        var i = 0
        while left > 0 {
            if slots[i] != nil {
                slots[i] = nil
                left -= 1
            }
            i += 1
        }
        overflow.removeAll()
        count = 0
    }
}
