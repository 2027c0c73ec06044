#if canImport(Glibc)
import Glibc
#endif

/// Bytes gathered for one write (under TLS: nghttp2's frames of one flush, encrypted in one piece): appended by
/// `memcpy` into one block grown by doubling, emptied keeping the block. `Array.append(contentsOf:)` of a raw buffer
/// cost ~100 instructions a chunk beyond the copy itself (callgrind, `fanout push` over TLS: ~230 a request).
/// Confined to its owner's thread; ``deallocate()`` frees the block (the owner's deinit).
struct PlaintextBuffer {
    private(set) var base: UnsafeMutableRawPointer?
    private(set) var count = 0
    private(set) var capacity = 0

    var isEmpty: Bool { count == 0 }

    /// The bytes gathered so far (valid until the next append, `removeAll` or `deallocate`).
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    @inline(__always)
    mutating func append(_ chunk: UnsafeRawBufferPointer) {
        guard let from = chunk.baseAddress, chunk.count > 0 else { return }
        if _slowPath(count + chunk.count > capacity) { grow(to: count + chunk.count) }
        (base! + count).copyMemory(from: from, byteCount: chunk.count)
        count += chunk.count
    }

    private mutating func grow(to needed: Int) {
        var size = max(capacity, 4096)
        while size < needed { size *= 2 }
        guard let block = realloc(base, size) else { fatalError("out of memory for \(size) bytes of output") }
        base = block
        capacity = size
    }

    /// Empties the buffer; its block is kept unless it grew past `keepLimit` bytes (a burst's is not kept forever).
    mutating func removeAll(keepLimit: Int) {
        count = 0
        if capacity > keepLimit { deallocate() }
    }

    /// Frees the block (the buffer is empty, with no capacity, afterwards).
    mutating func deallocate() {
        free(base)
        base = nil
        count = 0
        capacity = 0
    }
}
