/// Interns byte strings (tokens, channel ids, activity and device ids) as dense `Int32` ids.
///
/// Keys live back to back in one byte arena; an open-addressing table (linear probing, load ≤ 1/2)
/// maps a key's hash to its id. `lookup` takes raw bytes and allocates nothing, so routing a push by
/// its token costs one hash and usually one comparison. Ids are assigned in insertion order; `replace`
/// gives an id a new key of the same length (the old key is forgotten), so a key that is superseded,
/// like a rotated token, need not stay in memory; `remove` frees an id, and the next new key of the
/// same length takes it over (its bytes in place), so keys that come and go (channels created and
/// deleted) keep the memory of the most ever held at once. The hash is a fixed function (no per-process
/// seed), so behaviour is reproducible.
public struct ByteInterner: Sendable {
    private var arena: [UInt8] = []
    private var offsets: [Int] = [0]
    private var hashes: [UInt64] = []
    private var table: [Int32]
    private var mask: Int
    /// Removed ids by key length, for reuse; `freeCount` of them in all.
    private var free: [Int: [Int32]] = [:]
    public private(set) var freeCount = 0

    public init(capacity: Int = 16) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        table = Array(repeating: -1, count: size)
        mask = size - 1
    }

    /// Reserves room for `keys` more keys of `bytes` bytes in all.
    public mutating func reserveCapacity(keys: Int, bytes: Int) {
        arena.reserveCapacity(arena.count + bytes)
        offsets.reserveCapacity(offsets.count + keys)
        hashes.reserveCapacity(hashes.count + keys)
        var size = table.count
        while size < (hashes.count + keys) * 2 { size <<= 1 }
        if size > table.count {
            table = Array(repeating: -1, count: size)
            mask = size - 1
            placeAll()
        }
    }

    /// Number of ids handed out: `0..<count`, removed ones included (see `liveCount`).
    public var count: Int { hashes.count }

    /// Number of keys interned now: `count` less the removed ids not taken over yet.
    public var liveCount: Int { hashes.count - freeCount }

    /// Bytes of key storage (every id's, removed ones included).
    public var arenaBytes: Int { arena.count }

    /// The bytes of key `id`; valid until the next insertion.
    @inline(__always)
    public func withBytes<R>(_ id: Int32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let start = offsets[Int(id)]
        let end = offsets[Int(id) + 1]
        return try arena.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
    }

    public func string(_ id: Int32) -> String {
        withBytes(id) { String(decoding: $0, as: UTF8.self) }
    }

    /// Id of `key`, or nil when it was never interned.
    @inline(__always)
    public func lookup(_ key: UnsafeRawBufferPointer) -> Int32? {
        let h = ByteInterner.hash(key)
        var slot = Int(truncatingIfNeeded: h) & mask
        return arena.withUnsafeBytes { arenaBytes in
            while true {
                let id = table[slot]
                if id < 0 { return nil }
                if hashes[Int(id)] == h {
                    let start = offsets[Int(id)]
                    let length = offsets[Int(id) + 1] - start
                    if length == key.count
                        && (length == 0 || memoryEqual(arenaBytes.baseAddress! + start, key.baseAddress!, length))
                    {
                        return id
                    }
                }
                slot = (slot + 1) & mask
            }
        }
    }

    public func lookup(_ key: String) -> Int32? {
        var copy = key
        return copy.withUTF8 { lookup(UnsafeRawBufferPointer($0)) }
    }

    /// Id of `key`, interning it when new. `inserted` tells which; a new key may take over an id removed
    /// earlier (`id < count` before the call), so a caller keeping arrays by id sets rather than appends.
    @discardableResult
    public mutating func intern(_ key: UnsafeRawBufferPointer) -> (id: Int32, inserted: Bool) {
        if let id = lookup(key) { return (id, false) }
        if freeCount > 0, let id = free[key.count]?.popLast() {
            freeCount -= 1
            if key.count > 0 {
                let start = offsets[Int(id)]
                arena.withUnsafeMutableBytes {
                    ($0.baseAddress! + start).copyMemory(from: key.baseAddress!, byteCount: key.count)
                }
            }
            let h = ByteInterner.hash(key)
            hashes[Int(id)] = h
            place(id, hash: h)
            return (id, true)
        }
        let id = Int32(hashes.count)
        let h = ByteInterner.hash(key)
        arena.append(contentsOf: key)
        offsets.append(arena.count)
        hashes.append(h)
        if hashes.count * 2 > table.count { grow() } else { place(id, hash: h) }
        return (id, true)
    }

    @discardableResult
    public mutating func intern(_ key: String) -> (id: Int32, inserted: Bool) {
        var copy = key
        return copy.withUTF8 { intern(UnsafeRawBufferPointer($0)) }
    }

    /// Gives `id` the key `key` in place of its own, which is forgotten (`lookup` no longer finds it).
    /// Only for a key of the same length that is not interned yet; otherwise returns false and changes
    /// nothing.
    public mutating func replace(_ id: Int32, with key: UnsafeRawBufferPointer) -> Bool {
        let start = offsets[Int(id)]
        guard offsets[Int(id) + 1] - start == key.count, lookup(key) == nil, removeFromTable(id) else { return false }
        if key.count > 0 {
            arena.withUnsafeMutableBytes {
                ($0.baseAddress! + start).copyMemory(from: key.baseAddress!, byteCount: key.count)
            }
        }
        let h = ByteInterner.hash(key)
        hashes[Int(id)] = h
        place(id, hash: h)
        return true
    }

    /// Forgets key `id` (`lookup` no longer finds it) and frees the id for the next new key of its length.
    /// Returns false, changing nothing, when `id` is not interned now (never handed out, or removed).
    @discardableResult
    public mutating func remove(_ id: Int32) -> Bool {
        guard id >= 0, Int(id) < hashes.count, removeFromTable(id) else { return false }
        free[offsets[Int(id) + 1] - offsets[Int(id)], default: []].append(id)
        freeCount += 1
        return true
    }

    /// Takes `id` out of the table; later entries of its probe run move back (backward-shift
    /// deletion), so lookups never need tombstones. False when `id` is not in the table.
    private mutating func removeFromTable(_ id: Int32) -> Bool {
        var hole = Int(truncatingIfNeeded: hashes[Int(id)]) & mask
        while table[hole] != id {
            if table[hole] < 0 { return false }
            hole = (hole + 1) & mask
        }
        var next = (hole + 1) & mask
        while table[next] >= 0 {
            let home = Int(truncatingIfNeeded: hashes[Int(table[next])]) & mask
            // The entry at `next` may fill the hole if the hole lies on its probe path [home, next).
            if (next &- home) & mask >= (next &- hole) & mask {
                table[hole] = table[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        table[hole] = -1
        return true
    }

    private mutating func place(_ id: Int32, hash: UInt64) {
        var slot = Int(truncatingIfNeeded: hash) & mask
        while table[slot] >= 0 { slot = (slot + 1) & mask }
        table[slot] = id
    }

    private mutating func grow() {
        let size = table.count * 2
        table = Array(repeating: -1, count: size)
        mask = size - 1
        placeAll()
    }

    /// Places every id but the removed ones in a cleared table.
    private mutating func placeAll() {
        var removed = Set<Int32>()
        if freeCount > 0 { for ids in free.values { removed.formUnion(ids) } }
        for id in 0..<hashes.count where !removed.contains(Int32(id)) { place(Int32(id), hash: hashes[id]) }
    }

    /// A fixed 64-bit hash, eight bytes per step (multiply–xorshift mixing).
    @inline(__always)
    public static func hash(_ key: UnsafeRawBufferPointer) -> UInt64 {
        let m: UInt64 = 0x9E37_79B9_7F4A_7C15
        var h: UInt64 = 0xCBF2_9CE4_8422_2325 ^ (UInt64(key.count) &* m)
        var i = 0
        let n = key.count
        if let base = key.baseAddress {
            while i + 8 <= n {
                let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                h = (h ^ word) &* m
                h ^= h >> 29
                i += 8
            }
            var tail: UInt64 = 0
            var shift: UInt64 = 0
            while i < n {
                tail |= UInt64(base.load(fromByteOffset: i, as: UInt8.self)) << shift
                shift += 8
                i += 1
            }
            h = (h ^ tail) &* m
        }
        h ^= h >> 32
        h = h &* 0xD6E8_FEB8_6659_FD93
        h ^= h >> 32
        return h
    }
}
