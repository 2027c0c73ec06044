import FanoutAPNs
import FanoutMetrics
import FanoutSim
import Foundation

/// The start of `fanout serve`: the workers' services built at once, one thread each (as `fanout run` populates
/// its workers), each thread then hashing the tokens it owns (for the token directory) and writing its part of
/// population.jsonl at its place in the file as it goes (bounded chunks); then rotated-tokens.jsonl. Nothing is
/// kept per activity beyond what the run engine keeps.
public enum ServePopulation {
    /// What the threads have done so far, for a progress line.
    public struct Progress: Sendable {
        public let devicesBuilt = ProgressCounter()
        public let populationBytes = ProgressCounter()
        /// Set once every thread is done (the files are being closed).
        public let joining = ProgressCounter()
        public init() {}
    }

    public struct Built {
        public var services: [APNsService]
        public var cluster: ServeCluster?
        /// Bytes of population.jsonl and rotated-tokens.jsonl (0 when no folder was given).
        public var populationBytes = 0
        public var rotatedTokenBytes = 0
    }

    final class Box<T>: @unchecked Sendable {
        // @unchecked: written by one thread before it signals, read by the waiting thread after the wait.
        var value: T
        init(_ value: T) { self.value = value }
    }

    /// Each loop's byte count of population.jsonl, published once known: a loop writes its part at the sum of the
    /// counts of the loops before it (the parts land in loop order, written at once, nothing copied afterwards).
    final class PartOffsets: @unchecked Sendable {
        // @unchecked: `sizes` is touched only under `condition`.
        private let condition = NSCondition()
        private var sizes: [Int?]

        init(count: Int) { sizes = Array(repeating: nil, count: count) }

        func publish(_ k: Int, size: Int) {
            condition.lock()
            sizes[k] = size
            condition.broadcast()
            condition.unlock()
        }

        /// The offset of part `k`, once every part before it is counted.
        func offset(of k: Int) -> Int {
            condition.lock()
            defer { condition.unlock() }
            while sizes[..<k].contains(where: { $0 == nil }) { condition.wait() }
            return sizes[..<k].reduce(0) { $0 + $1! }
        }
    }

    struct PartFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// The build was asked to stop (``ProgressCounter/requestStop()`` on `progress.devicesBuilt`: `fanout serve`
    /// on SIGINT or SIGTERM): nothing is served, population.jsonl and rotated-tokens.jsonl are not written.
    public struct Interrupted: Error, CustomStringConvertible {
        public var description: String { "interrupted while building the population" }
    }

    /// Builds `workers` services for `scenario` at UNIX time `nowSeconds`; with a `folder`, writes
    /// population.jsonl and rotated-tokens.jsonl into it (temporary names renamed into place; a failed write
    /// leaves neither and is thrown). Each loop's thread builds its service, counts the bytes of its part of
    /// population.jsonl (but the last loop) and writes its part at its offset once the parts before it are
    /// counted: the parts land in loop order, written at once, nothing copied afterwards. Meanwhile the calling
    /// thread hashes each built loop's tokens into the token directory.
    public static func build(
        scenario: Scenario, auth: ProviderAuth?, nowSeconds: Int64, workers count: Int, folder: String?,
        shard: Shard = .whole, progress: Progress = Progress(), clock: @escaping @Sendable () -> UInt64
    ) throws -> Built {
        let population = try folder.map { try StreamedFile(path: $0 + "/population.jsonl") }
        population?.progress = progress.populationBytes
        let shared = population.map { Box($0) }
        let offsets = PartOffsets(count: count)
        let done = (0..<count).map { _ in DispatchSemaphore(value: 0) }
        let ready = (0..<count).map { _ in DispatchSemaphore(value: 0) }
        let services = (0..<count).map { _ in Box<APNsService?>(nil) }
        let failures = (0..<count).map { _ in Box<(any Error)?>(nil) }
        let written = (0..<count).map { _ in Box(0) }
        for k in 0..<count {
            let (service, failure, part) = (services[k], failures[k], written[k])
            let (finished, madeReady) = (done[k], ready[k])
            let thread = Thread {
                defer { finished.signal() }
                let made = APNsService(
                    scenario: scenario, auth: auth, nowSeconds: nowSeconds, worker: k, of: count, shard: shard,
                    progress: progress.devicesBuilt, clock: clock)
                service.value = made
                madeReady.signal()
                // First what the loops after this one wait for (this part's size; the last part's is not needed),
                // then the part itself. The token hashes are the calling thread's (it only reads the service).
                guard let file = shared?.value else { return }
                let stop = progress.devicesBuilt
                if stop.stopRequested {  // interrupted: nothing written (the loops after this one wait for a size)
                    offsets.publish(k, size: 0)
                    return
                }
                let size = k < count - 1 ? made.populationByteCount() : nil
                if let size { offsets.publish(k, size: size) }
                let start = offsets.offset(of: k)
                var offset = start
                var chunk: [UInt8] = []
                chunk.reserveCapacity(StreamedFile.chunkBytes + StreamedFile.chunkBytes / 4)
                do {
                    try made.appendPopulation(to: &chunk, chunkBytes: StreamedFile.chunkBytes) {
                        if stop.stopRequested { throw Interrupted() }
                        let n = $0.count
                        try file.write(&$0, at: offset)
                        offset += n
                    }
                    let n = chunk.count
                    try file.write(&chunk, at: offset)
                    offset += n
                    part.value = offset - start
                    if let size, part.value != size {
                        throw PartFailure(
                            description: "population.jsonl: loop \(k) wrote \(part.value) bytes where \(size) were "
                                + "counted (the loops after it wrote at the wrong offsets)")
                    }
                } catch {
                    failure.value = error
                }
            }
            thread.name = "fanout-build-\(k)"
            thread.stackSize = 8 << 20
            thread.start()
        }
        // `--shard`: the other shards' tokens (while the loops build theirs), to tell a misrouted push.
        let foreign = shard.isWhole
            ? nil : ForeignTokens(world: World(scenario: scenario, shard: shard, epochSeconds: nowSeconds))
        // The token directory, loop by loop as they are built (while they write their parts; reads only).
        var directory = TokenDirectory()
        for k in 0..<count {
            ready[k].wait()
            guard count > 1, let service = services[k].value else { continue }
            let hashes = service.ownedTokenHashes()
            // The loops hold about as many tokens each.
            if k == 0 { directory.reserveCapacity(hashes.count * count * 21 / 20) }
            directory.add(hashes, owner: k)
        }
        for k in 0..<count { done[k].wait() }
        progress.joining.add(1)
        var built = Built(services: services.map { $0.value! })
        for service in built.services { service.foreignTokens = foreign }
        if count > 1 { built.cluster = ServeCluster(count: count, directory: directory) }
        if progress.devicesBuilt.stopRequested {
            population?.discard()
            throw Interrupted()
        }
        guard let folder, let population else { return built }
        if let error = failures.lazy.compactMap(\.value).first {
            population.discard()
            throw error
        }
        try population.commit()
        built.populationBytes = written.reduce(0) { $0 + $1.value }
        let rotated = try StreamedFile(path: folder + "/rotated-tokens.jsonl")
        var chunk: [UInt8] = []
        do {
            for service in built.services {
                try service.appendRotatedTokens(to: &chunk, chunkBytes: StreamedFile.chunkBytes) {
                    try rotated.write(&$0)
                }
            }
            try rotated.write(&chunk)
            try rotated.commit()
        } catch {
            rotated.discard()
            // population.jsonl alone would be half of what a backend loads: remove it too.
            unlink(population.path)
            throw error
        }
        built.rotatedTokenBytes = rotated.bytesWritten
        return built
    }
}
