import FanoutCore

/// Which worker owns each token the population was built with (read-only once built, shared by the
/// workers): a 64-bit hash of the token's bytes (`hash`) → the worker. Tokens made later (an activity started
/// by push-to-start) are not in it; a push to one is judged where it arrives.
public struct TokenDirectory: Sendable {
    // An open-addressing table (linear probing, at most 3/4 full) of token hashes and their owners: a look-up per
    // request is a multiply, a mask and a compare or two. A `[UInt64: UInt8]` here hashed every look-up again with
    // SipHash (about 250 instructions a request under `scripts/callgrind-serve.sh` with two workers).
    /// Token hashes by slot (0: empty; a hash of 0 is kept apart, `zeroOwner`).
    private var keys: [UInt64] = []
    private var owners: [UInt8] = []
    private var zeroOwner: UInt8?
    public private(set) var count = 0

    public init() {}

    /// From each worker's token hashes (`APNsService.ownedTokenHashes`).
    public init(hashesByWorker: [[UInt64]]) {
        reserveCapacity(hashesByWorker.reduce(0) { $0 + $1.count })
        for (worker, hashes) in hashesByWorker.enumerated() { add(hashes, owner: worker) }
    }

    package mutating func reserveCapacity(_ n: Int) {
        var slots = 16
        while slots * 3 < n * 4 { slots *= 2 }
        guard slots > keys.count else { return }
        let oldKeys = keys, oldOwners = owners
        keys = [UInt64](repeating: 0, count: slots)
        owners = [UInt8](repeating: 0, count: slots)
        count = zeroOwner == nil ? 0 : 1
        for (i, key) in oldKeys.enumerated() where key != 0 { insert(key, oldOwners[i]) }
    }

    /// Adds a worker's token hashes (`APNsService.ownedTokenHashes`); a hash already listed takes the new owner.
    package mutating func add(_ hashes: [UInt64], owner worker: Int) {
        reserveCapacity(count + hashes.count)
        for h in hashes { insert(h, UInt8(worker)) }
    }

    private mutating func insert(_ key: UInt64, _ owner: UInt8) {
        if key == 0 {
            if zeroOwner == nil { count += 1 }
            zeroOwner = owner
            return
        }
        if (count + 1) * 4 > keys.count * 3 { reserveCapacity(count + 1) }
        let mask = keys.count - 1
        var i = TokenDirectory.slot(key, mask)
        while keys[i] != 0 && keys[i] != key { i = (i + 1) & mask }
        if keys[i] == 0 { count += 1 }
        keys[i] = key
        owners[i] = owner
    }

    @inline(__always)
    private static func slot(_ key: UInt64, _ mask: Int) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> 32) & mask
    }

    static func hash(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.withUnsafeBytes { hash($0) }
    }

    /// Eight bytes at a time (a 64-character token in eight multiplies, not 64: FNV-1a's byte at a time cost ~250
    /// instructions a request under `scripts/callgrind-serve.sh` with two workers), then a finalizer that spreads
    /// every input bit over the whole word (MurmurHash3's fmix64). Only the directory uses it, at build and look-up.
    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let n = bytes.count
        var h = FNV1a.offsetBasis ^ (UInt64(truncatingIfNeeded: n) &* 0x9E37_79B9_7F4A_7C15)
        var i = 0
        while i &+ 8 <= n {
            let w = bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            h = (h ^ w) &* 0xFF51_AFD7_ED55_8CCD
            h ^= h >> 29
            i &+= 8
        }
        if i < n {
            var w: UInt64 = 0
            for k in i..<n { w |= UInt64(bytes[k]) << UInt64((k - i) * 8) }
            h = (h ^ w) &* 0xFF51_AFD7_ED55_8CCD
        }
        h ^= h >> 33
        h &*= 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        return h
    }

    public func owner(_ token: ArraySlice<UInt8>) -> Int? {
        let key = TokenDirectory.hash(token)
        if key == 0 { return zeroOwner.map(Int.init) }
        guard !keys.isEmpty else { return nil }
        return keys.withUnsafeBufferPointer { k in
            let mask = k.count - 1
            var i = TokenDirectory.slot(key, mask)
            while true {
                if k[i] == key { return Int(owners[i]) }
                if k[i] == 0 { return nil }
                i = (i + 1) & mask
            }
        }
    }
}

/// What one serving worker tells another (several workers).
public enum PeerMessage: Sendable {
    case broadcast(RemoteBroadcast)
    case fanoutPart(origin: Int, id: Int, endNanos: UInt64)
    case channel(raw: [UInt8], bundle: [UInt8], storagePolicy: Int, deleted: Bool)
}

/// A broadcast answered by one worker, for the others' subscribers.
public struct RemoteBroadcast: Sendable {
    public var channel: [UInt8]
    public var headers: CheckedHeaders
    public var payload: [UInt8]
    public var arrivalNanos: UInt64
    public var origin: Int
    public var id: Int
}
