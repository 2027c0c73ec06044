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
}
