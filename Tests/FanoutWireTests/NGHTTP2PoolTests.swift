import Testing

@testable import FanoutWire

@Suite("NGHTTP2Pool, nghttp2's allocator")
struct NGHTTP2PoolTests {
    @Test("size classes: 16-byte steps to 1 KiB, then powers of two to 128 KiB, none above")
    func classes() {
        let sizes = [0, 1, 16, 17, 1024, 1025, 2048, 2049, 131_072, 131_073]
        #expect(sizes.map { NGHTTP2Pool.sizeClass($0) } == [0, 0, 0, 1, 63, 64, 64, 65, 70, -1])
        for size in [1, 17, 1000, 1025, 5000, 131_072] {
            #expect(NGHTTP2Pool.capacity(NGHTTP2Pool.sizeClass(size)) >= size)
        }
    }

    @Test("a freed block is handed out again for its class; realloc keeps the bytes; big blocks come and go")
    func reuse() throws {
        let pool = NGHTTP2Pool()
        let a = try #require(pool.allocate(100))
        let b = try #require(pool.allocate(100))
        #expect(a != b)
        pool.release(a)
        let again = pool.allocate(97)
        #expect(again == a, "the same class (97 to 112 bytes): the freed block")
        let other = try #require(pool.allocate(100))
        #expect(other != a)
        for i in 0..<100 { b.storeBytes(of: UInt8(i), toByteOffset: i, as: UInt8.self) }
        #expect(pool.reallocate(b, 110) == b, "fits its class: kept")
        let grown = try #require(pool.reallocate(b, 5000))
        #expect((0..<100).allSatisfy { grown.load(fromByteOffset: $0, as: UInt8.self) == UInt8($0) })
        let big = try #require(pool.allocate(1 << 20))
        big.storeBytes(of: 7, toByteOffset: (1 << 20) - 1, as: UInt8.self)
        let bigger = try #require(pool.reallocate(big, 2 << 20))
        #expect(bigger.load(fromByteOffset: (1 << 20) - 1, as: UInt8.self) == 7)
        for pointer in [bigger, grown, other, again] { pool.release(pointer) }
    }

    @Test("the free lists keep at most cacheLimit bytes; a block freed past it goes back to malloc, counted")
    func cacheLimit() throws {
        let pool = NGHTTP2Pool(cacheLimit: 1000)
        let blocks = try (0..<20).map { _ in try #require(pool.allocate(100)) }
        for block in blocks { pool.release(block) }
        #expect(pool.cachedBytes == 8 * 112 && pool.uncached == 12, "8 blocks of the 112-byte class fit in 1000")
        let again = try #require(pool.allocate(100))
        #expect(pool.cachedBytes == 7 * 112, "a block handed out again leaves the lists")
        pool.release(again)
        #expect(pool.cachedBytes == 8 * 112 && pool.uncached == 12)
    }
}
