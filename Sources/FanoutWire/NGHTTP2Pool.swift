internal import CNGHTTP2

#if canImport(Glibc)
import Glibc
#endif

/// nghttp2's allocator for one session (`nghttp2_mem`): blocks by size class — multiples of 16 bytes up to 1 KiB,
/// then powers of two up to 128 KiB — kept on a free list per class when nghttp2 frees them and handed out again;
/// bigger ones straight from malloc. With 100 streams in flight nghttp2 frees and allocates its per-stream blocks
/// (the stream, its outbound item, the copied header block, each received header's buffer) in batches larger than
/// glibc's per-thread cache (7 blocks a size), so most went to malloc's slow paths: ~1,900 instructions a request
/// under callgrind. The lists keep at most `cacheLimit` bytes (a server's connection: what a peer can make it keep
/// after a burst is bounded); past it a freed block goes back to malloc. They are freed with the pool. Confined to
/// the session's thread; the session must be deleted before the pool is released.
final class NGHTTP2Pool {
    /// Before each block: its class (or -1 for a block from malloc), then its capacity.
    static let header = 16
    static let smallClasses = 64
    static let classes = smallClasses + 7
    private let heads: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    /// The most bytes (blocks' capacities) the free lists keep.
    let cacheLimit: Int
    /// Bytes on the free lists now.
    private(set) var cachedBytes = 0
    /// Blocks freed to malloc because the lists held `cacheLimit` bytes.
    private(set) var uncached = 0

    init(cacheLimit: Int = .max) {
        self.cacheLimit = cacheLimit
        heads = .allocate(capacity: NGHTTP2Pool.classes)
        heads.initialize(repeating: nil, count: NGHTTP2Pool.classes)
    }

    deinit {
        for k in 0..<NGHTTP2Pool.classes {
            var next = heads[k]
            while let block = next {
                next = block.load(fromByteOffset: 8, as: UnsafeMutableRawPointer?.self)
                free(block)
            }
        }
        heads.deallocate()
    }

    /// The class of a request for `size` bytes, -1 above the largest.
    @inline(__always)
    static func sizeClass(_ size: Int) -> Int {
        if size <= 1024 { return size == 0 ? 0 : (size - 1) >> 4 }
        var k = smallClasses
        var capacity = 2048
        while capacity < size && k < classes {
            k += 1
            capacity <<= 1
        }
        return k < classes ? k : -1
    }

    @inline(__always)
    static func capacity(_ k: Int) -> Int { k < smallClasses ? (k + 1) << 4 : 2048 << (k - smallClasses) }

    func allocate(_ size: Int) -> UnsafeMutableRawPointer? {
        let k = NGHTTP2Pool.sizeClass(size)
        let block: UnsafeMutableRawPointer
        if k >= 0, let reused = heads[k] {
            heads[k] = reused.load(fromByteOffset: 8, as: UnsafeMutableRawPointer?.self)
            cachedBytes &-= NGHTTP2Pool.capacity(k)
            block = reused
        } else {
            let capacity = k >= 0 ? NGHTTP2Pool.capacity(k) : size
            guard let fresh = malloc(NGHTTP2Pool.header + capacity) else { return nil }
            fresh.storeBytes(of: k, as: Int.self)
            fresh.storeBytes(of: capacity, toByteOffset: 8, as: Int.self)
            block = fresh
        }
        return block + NGHTTP2Pool.header
    }

    func release(_ pointer: UnsafeMutableRawPointer?) {
        guard let pointer else { return }
        let block = pointer - NGHTTP2Pool.header
        let k = block.load(as: Int.self)
        if k < 0 {
            free(block)
            return
        }
        let capacity = NGHTTP2Pool.capacity(k)
        if cachedBytes > cacheLimit &- capacity {
            uncached &+= 1
            free(block)
            return
        }
        cachedBytes &+= capacity
        // A free block keeps its class at 0 and links the next free one at 8 (its capacity is its class's).
        block.storeBytes(of: heads[k], toByteOffset: 8, as: UnsafeMutableRawPointer?.self)
        heads[k] = block
    }

    func reallocate(_ pointer: UnsafeMutableRawPointer?, _ size: Int) -> UnsafeMutableRawPointer? {
        guard let pointer else { return allocate(size) }
        let block = pointer - NGHTTP2Pool.header
        let k = block.load(as: Int.self)
        let capacity = k < 0 ? block.load(fromByteOffset: 8, as: Int.self) : NGHTTP2Pool.capacity(k)
        if size <= capacity { return pointer }
        guard let larger = allocate(size) else { return nil }
        larger.copyMemory(from: pointer, byteCount: capacity)
        release(pointer)
        return larger
    }

    @inline(__always)
    private static func with<R>(_ user: UnsafeMutableRawPointer?, _ body: (NGHTTP2Pool) -> R) -> R {
        Unmanaged<NGHTTP2Pool>.fromOpaque(user!)._withUnsafeGuaranteedRef(body)
    }

    /// The allocator to hand to `nghttp2_session_client_new3` / `server_new3` (its user data: this pool, not retained).
    var mem: nghttp2_mem {
        nghttp2_mem(
            mem_user_data: Unmanaged.passUnretained(self).toOpaque(),
            malloc: { size, user in NGHTTP2Pool.with(user) { $0.allocate(size) } },
            free: { pointer, user in NGHTTP2Pool.with(user) { $0.release(pointer) } },
            calloc: { count, size, user in
                NGHTTP2Pool.with(user) { pool in
                    let bytes = count * size
                    let pointer = pool.allocate(bytes)
                    if let pointer { memset(pointer, 0, bytes) }
                    return pointer
                }
            },
            realloc: { pointer, size, user in NGHTTP2Pool.with(user) { $0.reallocate(pointer, size) } })
    }

    /// A new session (client or server) on this pool's memory, `user` its callbacks' user data: a SETTINGS frame of
    /// more than 64 entries ends the connection with GOAWAY on either side (nghttp2's other flood bounds stay).
    func session(
        callbacks: OpaquePointer?, user: UnsafeMutableRawPointer, server: Bool
    ) -> OpaquePointer {
        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        nghttp2_option_set_max_settings(option, 64)
        var created: OpaquePointer?
        var mem = self.mem
        let status = server
            ? nghttp2_session_server_new3(&created, callbacks, user, option, &mem)
            : nghttp2_session_client_new3(&created, callbacks, user, option, &mem)
        let name = server ? "server" : "client"
        precondition(status == 0 && created != nil, "nghttp2_session_\(name)_new3 failed: \(status)")
        return created!
    }
}
