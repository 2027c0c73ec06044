import Testing

@testable import FanoutCore

/// `ByteInterner.replace` forgets a key and gives its id a new one; the table must stay exactly a
/// map of the live keys (backward-shift deletion, no tombstones), checked against a dictionary.
@Suite("ByteInterner")
struct ByteInternerTests {
    /// A key of `length` bytes from a small alphabet, so that some keys repeat.
    func key(_ g: inout SplitMix64, length: Int) -> [UInt8] {
        (0..<length).map { _ in UInt8(ascii: "a") + UInt8(g.next() % 3) }
    }

    func id(_ i: ByteInterner, _ key: [UInt8]) -> Int32? { key.withUnsafeBytes { i.lookup($0) } }

    @Test("random interns and replaces: every live key finds its id, every forgotten key finds nothing")
    func replaceAgainstModel() {
        var g = SplitMix64(seed: 42)
        var interner = ByteInterner()
        var live: [[UInt8]: Int32] = [:]
        var keyOf: [Int32: [UInt8]] = [:]
        var forgotten: Set<[UInt8]> = []
        var replaced = 0
        for step in 0..<20_000 {
            let length = 1 + Int(g.next() % 9)
            let key = key(&g, length: length)
            if keyOf.isEmpty || g.next() % 3 == 0 {
                let (id, inserted) = key.withUnsafeBytes { interner.intern($0) }
                #expect(inserted == (live[key] == nil), "step \(step)")
                if inserted {
                    live[key] = id
                    keyOf[id] = key
                    forgotten.remove(key)
                }
            } else {
                let target = Int32(g.next() % UInt64(interner.count))
                let old = keyOf[target]!
                let ok = key.withUnsafeBytes { interner.replace(target, with: $0) }
                #expect(ok == (old.count == key.count && live[key] == nil), "step \(step)")
                if ok {
                    live[old] = nil
                    forgotten.insert(old)
                    live[key] = target
                    keyOf[target] = key
                    forgotten.remove(key)
                    replaced += 1
                }
            }
            if step % 500 == 0 || step == 19_999 {
                for (key, expected) in live { #expect(id(interner, key) == expected) }
                for key in forgotten { #expect(id(interner, key) == nil) }
                for (i, key) in keyOf { #expect(interner.withBytes(i) { Array($0) } == key) }
            }
        }
        #expect(replaced > 1000)
        #expect(interner.count == keyOf.count)
    }

    @Test("random interns and removes: live keys find their ids, removed ones nothing; ids and bytes are reused")
    func removeAgainstModel() {
        var g = SplitMix64(seed: 7)
        var interner = ByteInterner()
        var live: [[UInt8]: Int32] = [:]
        var removed: Set<[UInt8]> = []
        var peak = 0
        for step in 0..<20_000 {
            let key = key(&g, length: 6 + Int(g.next() % 3))
            if live.isEmpty || g.next() % 2 == 0 {
                let before = interner.count
                let (id, inserted) = key.withUnsafeBytes { interner.intern($0) }
                #expect(inserted == (live[key] == nil), "step \(step)")
                if inserted {
                    // A new key takes a removed id of its length when there is one (the table grows otherwise).
                    #expect((id < before) == (interner.count == before), "step \(step)")
                    live[key] = id
                    removed.remove(key)
                }
            } else {
                let (victim, id) = live.first!
                let first = interner.remove(id)
                let second = interner.remove(id)
                #expect(first && !second, "step \(step): removed once; a second remove changes nothing")
                live[victim] = nil
                removed.insert(victim)
            }
            peak = max(peak, live.count)
            #expect(interner.liveCount == live.count, "step \(step)")
            if step % 500 == 0 || step == 19_999 {
                for (key, expected) in live {
                    #expect(id(interner, key) == expected)
                    #expect(interner.withBytes(expected) { Array($0) } == key)
                }
                for key in removed { #expect(id(interner, key) == nil) }
            }
        }
        // Three key lengths: at most the peak of each length is ever held.
        #expect(interner.count <= 3 * peak && interner.count < 2_000, "ids follow the live keys, not the churn")
        #expect(interner.arenaBytes <= interner.count * 8)
    }

    @Test("a table rebuilt while ids are removed leaves them out (no lookup finds a removed key after growth)")
    func growAfterRemove() {
        var interner = ByteInterner()
        for n in 0..<8 { _ = interner.intern("key-\(n)") }
        let three = interner.remove(interner.lookup("key-3")!)
        let five = interner.remove(interner.lookup("key-5")!)
        #expect(three && five)
        // Keys of another length cannot take the removed ids: the table grows and is rebuilt.
        for n in 0..<100 { _ = interner.intern("longer-key-\(n)") }
        #expect(interner.lookup("key-3") == nil && interner.lookup("key-5") == nil)
        #expect(interner.lookup("key-4") == 4 && interner.liveCount == 106 && interner.count == 108)
        let (id, inserted) = interner.intern("key-9")
        #expect(inserted && (id == 3 || id == 5) && interner.count == 108 && interner.lookup("key-9") == id)
    }
}

/// The router's channels: a removed channel stops resolving and its id and subscriber list go to the next one.
@Suite("Router channels")
struct RouterChannelTests {
    @Test("removeChannel returns the subscribers and frees the id; the next channel starts with none")
    func removeAndReuse() {
        var router = Router()
        let a = Array("channel-a".utf8)
        let b = Array("channel-b".utf8)
        let c = a.withUnsafeBytes { router.registerChannel($0, app: 7) }
        #expect(router.liveChannelCount == 1 && router.channelApp[Int(c)] == 7)
        let first = router.removeChannel(c)
        #expect(first == [] && router.liveChannelCount == 0)
        let second = router.removeChannel(c)
        #expect(second == [] && router.liveChannelCount == 0, "removing twice changes nothing")
        #expect(a.withUnsafeBytes { router.resolve(.channel, $0) } == .unknownChannel)
        let d = b.withUnsafeBytes { router.registerChannel($0, app: 9) }
        #expect(d == c && router.channels.count == 1 && router.liveChannelCount == 1)
        #expect(router.channelApp[Int(d)] == 9 && router.subscribers[Int(d)].isEmpty)
    }
}

