import Testing

@testable import FanoutWire

@Suite("PlaintextBuffer: one flush's plaintext gathered by memcpy")
struct PlaintextBufferTests {
    @Test("chunks of every size (empty to 9 KB) across several growths come out whole and in order")
    func appendsInOrder() {
        var buffer = PlaintextBuffer()
        defer { buffer.deallocate() }
        var expected: [UInt8] = []
        for size in [0, 1, 7, 4096, 1, 9000, 0, 300, 20_000, 5] {
            let chunk = (0..<size).map { k in UInt8(truncatingIfNeeded: k &* 13 &+ expected.count) }
            chunk.withUnsafeBytes { buffer.append($0) }
            expected += chunk
            #expect(buffer.count == expected.count && buffer.capacity >= buffer.count)
        }
        #expect(Array(buffer.bytes) == expected)
    }

    @Test("emptied, it keeps its block up to the limit (the next flush reuses it) and frees a larger one")
    func removeAllKeepsOrFrees() {
        var buffer = PlaintextBuffer()
        defer { buffer.deallocate() }
        let small = [UInt8](repeating: 1, count: 3000)
        small.withUnsafeBytes { buffer.append($0) }
        let block = buffer.base
        buffer.removeAll(keepLimit: 1 << 20)
        #expect(buffer.isEmpty && buffer.capacity == 4096 && buffer.base == block)
        [UInt8]([9, 8]).withUnsafeBytes { buffer.append($0) }
        #expect(Array(buffer.bytes) == [9, 8] && buffer.base == block, "reused, not reallocated")
        let large = [UInt8](repeating: 2, count: (1 << 20) + 1)
        large.withUnsafeBytes { buffer.append($0) }
        #expect(buffer.count == large.count + 2 && buffer.bytes.dropFirst(2).allSatisfy { $0 == 2 })
        buffer.removeAll(keepLimit: 1 << 20)
        #expect(buffer.isEmpty && buffer.capacity == 0 && buffer.base == nil)
    }
}
