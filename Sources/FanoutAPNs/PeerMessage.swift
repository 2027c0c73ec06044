import FanoutCore

/// Which worker owns each token the population was built with (read-only once built, shared by the
/// workers): a 64-bit FNV-1a hash of the token's bytes → the worker. Tokens made later (an activity started
/// by push-to-start) are not in it; a push to one is judged where it arrives.
public struct TokenDirectory: Sendable {
    private var owners: [UInt64: UInt8] = [:]

    public init() {}

    /// From each worker's token hashes (`APNsService.ownedTokenHashes`).
    public init(hashesByWorker: [[UInt64]]) {
        owners.reserveCapacity(hashesByWorker.reduce(0) { $0 + $1.count })
        for (worker, hashes) in hashesByWorker.enumerated() {
            for h in hashes { owners[h] = UInt8(worker) }
        }
    }

    package mutating func reserveCapacity(_ n: Int) { owners.reserveCapacity(n) }

    /// Adds a worker's token hashes (`APNsService.ownedTokenHashes`).
    package mutating func add(_ hashes: [UInt64], owner worker: Int) {
        for h in hashes { owners[h] = UInt8(worker) }
    }

    static func hash(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.withUnsafeBytes { hash($0) }
    }

    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 { FNV1a.hash(bytes) }

    public func owner(_ token: ArraySlice<UInt8>) -> Int? {
        owners[TokenDirectory.hash(token)].map(Int.init)
    }

    public var count: Int { owners.count }
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
