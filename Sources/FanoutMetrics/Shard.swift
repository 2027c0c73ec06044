import FanoutCore

/// A slice of a run's devices, so that N processes (on N machines) together simulate the whole
/// population: `--shard K/N` keeps the devices whose id hashes to K modulo N (K from 0, as a
/// Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`). Every shard sees every source event; a
/// broadcast push is counted by one shard only (source modulo N), a token push by the shard of its
/// device, so the shards' counts add up to the whole run's exactly.
public struct Shard: Sendable, Equatable, CustomStringConvertible {
    public let index: Int
    public let count: Int

    public static let whole = Shard(uncheckedIndex: 0, count: 1)

    private init(uncheckedIndex index: Int, count: Int) {
        self.index = index
        self.count = count
    }

    public init(index: Int, count: Int) throws(ShardError) {
        guard count >= 1 && count <= 65_536 else { throw ShardError("N must be from 1 to 65536, got \(count)") }
        guard index >= 0 && index < count else { throw ShardError("K must be from 0 to \(count - 1), got \(index)") }
        self.index = index
        self.count = count
    }

    /// Parses `K/N`.
    public init(parsing text: String) throws(ShardError) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let k = Int(parts[0]), let n = Int(parts[1]) else {
            throw ShardError("expected K/N (for example 0/4), got \"\(text)\"")
        }
        try self.init(index: k, count: n)
    }

    public var description: String { "\(index)/\(count)" }
    public var isWhole: Bool { count == 1 }

    /// Is the device with this id in the shard? FNV-1a (64-bit) of the id's bytes modulo N: stable
    /// across machines, processes and versions, independent of the seed.
    @inline(__always)
    public func contains(deviceId: UnsafeRawBufferPointer) -> Bool {
        count == 1 || Shard.index(ofDeviceId: deviceId, count: count) == index
    }

    /// The slice (K of `count`) that holds the device with this id.
    @inline(__always)
    public static func index(ofDeviceId deviceId: UnsafeRawBufferPointer, count: Int) -> Int {
        Int(fnv1a(deviceId) % UInt64(count))
    }

    /// Does this shard count the verdict of a broadcast push of `source`?
    @inline(__always)
    public func countsBroadcast(source: Int) -> Bool { source % count == index }

    /// Does this shard count the verdict of a broadcast to the channel with this raw id (`fanout serve --shard`:
    /// every shard answers and applies it, one counts it)? FNV-1a of the id modulo N.
    public func countsChannel(_ id: [UInt8]) -> Bool {
        if count == 1 { return true }
        return id.withUnsafeBytes { Int(Shard.fnv1a($0) % UInt64(count)) == index }
    }

    public static func fnv1a(_ bytes: UnsafeRawBufferPointer) -> UInt64 { FNV1a.hash(bytes) }
}

public struct ShardError: Error, CustomStringConvertible, Equatable {
    public var description: String
    init(_ description: String) { self.description = description }
}
