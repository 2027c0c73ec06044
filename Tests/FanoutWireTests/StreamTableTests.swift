import Testing

@testable import FanoutWire

@Suite("StreamTable (a connection's open streams, without hashing)")
struct StreamTableTests {
    static func request(_ id: Int32) -> H2Request { H2Request(streamId: id, arrivalNanos: 0, bodyLimit: 16) }

    @Test("every stream is found and removed once, also when a slow stream's slot is wanted by a newer one")
    func collisions() {
        var table = StreamTable()
        // Stream 1 stays open while 3,000 newer streams come and go: ids 1 + 2,048k share its slot.
        let slow = Self.request(1)
        table.insert(slow)
        var open: [Int32: H2Request] = [:]
        for k in 1...3000 {
            let id = Int32(1 + 2 * k)
            let r = Self.request(id)
            table.insert(r)
            open[id] = r
            if k % 3 == 0 {  // a third of them close at once, the rest stay open
                #expect(table.remove(id) === r)
                open[id] = nil
            }
        }
        #expect(table.overflowed > 0)
        #expect(table.find(1) === slow)
        for (id, r) in open { #expect(table.find(id) === r) }
        #expect(table.count == open.count + 1)
        #expect(table.find(9_999) == nil && table.remove(9_999) == nil)
        for id in open.keys { #expect(table.remove(id) != nil) }
        #expect(table.remove(1) === slow && table.count == 0)
        for k in 0...3000 { #expect(table.find(Int32(1 + 2 * k)) == nil) }
    }

    @Test("a stream inserted twice under one id is held once")
    func replace() {
        var table = StreamTable()
        let a = Self.request(5)
        let b = Self.request(5)
        table.insert(a)
        table.insert(b)
        #expect(table.count == 1 && table.find(5) === b)
        table.removeAll()
        #expect(table.count == 0 && table.find(5) == nil)
    }

    @Test("removeAll empties every slot held, the last one and the overflow included")
    func removeAllSlots() {
        var table = StreamTable()
        // Slots 0, 500 and 1,023 (ids 1, 1,001 and 2,047), and stream 2,049 in the overflow (slot 0 is held).
        let ids: [Int32] = [1, 1_001, 2_047, 2_049]
        for id in ids { table.insert(Self.request(id)) }
        #expect(table.count == 4 && table.overflowed == 1)
        table.removeAll()
        #expect(table.count == 0)
        for id in ids { #expect(table.find(id) == nil) }
        // Every slot is free again: new streams in the same slots take them, none goes to the overflow.
        for id in [Int32(4_097), 5_097, 6_143] { table.insert(Self.request(id)) }
        #expect(table.overflowed == 1)
        for id in [Int32(4_097), 5_097, 6_143] { #expect(table.find(id)?.streamId == id) }
    }
}
