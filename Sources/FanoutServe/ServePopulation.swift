import FanoutMetrics
import FanoutReport
import FanoutSim
import Foundation

/// The start of `fanout serve`: the workers' services built at once, one thread each (as `fanout run` populates
/// its workers), each thread then writing its part of population.jsonl as it goes (bounded chunks) and hashing
/// the tokens it owns; the parts joined in worker order into population.jsonl, rotated-tokens.jsonl written, the
/// token directory built. Nothing is kept per activity beyond what the run engine keeps.
public enum ServePopulation {
    /// What the threads have done so far, for a progress line.
    public struct Progress: Sendable {
        public let devicesBuilt = ProgressCounter()
        public let populationBytes = ProgressCounter()
        /// Set once every thread is done: the token directory is built and the parts joined.
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

    /// Builds `workers` services for `scenario` at UNIX time `nowSeconds`; with a `folder`, writes
    /// population.jsonl and rotated-tokens.jsonl into it (temporary names renamed into place; a failed write
    /// leaves neither and is thrown).
    public static func build(
        scenario: Scenario, auth: ProviderAuth?, nowSeconds: Int64, workers count: Int, folder: String?,
        progress: Progress = Progress(), clock: @escaping @Sendable () -> UInt64
    ) throws -> Built {
        let done = DispatchSemaphore(value: 0)
        let services = (0..<count).map { _ in Box<APNsService?>(nil) }
        let parts = (0..<count).map { _ in Box<Result<StreamedFile?, FileWriteError>>(.success(nil)) }
        let hashes = (0..<count).map { _ in Box<[UInt64]>([]) }
        let path = folder.map { $0 + "/population.jsonl" }
        for k in 0..<count {
            let (service, part, owned) = (services[k], parts[k], hashes[k])
            let thread = Thread {
                defer { done.signal() }
                let built = APNsService(
                    scenario: scenario, auth: auth, nowSeconds: nowSeconds, worker: k, of: count,
                    progress: progress.devicesBuilt, clock: clock)
                service.value = built
                if let path {
                    part.value = Result { () throws(FileWriteError) -> StreamedFile? in
                        let file = try StreamedFile(path: path, tag: "part\(k)", progress: progress.populationBytes)
                        var chunk: [UInt8] = []
                        chunk.reserveCapacity(StreamedFile.chunkBytes + StreamedFile.chunkBytes / 4)
                        do {
                            try built.appendPopulation(to: &chunk, chunkBytes: StreamedFile.chunkBytes) {
                                try file.write(&$0)
                            }
                            try file.write(&chunk)
                        } catch let error as FileWriteError {
                            file.discard()
                            throw error
                        } catch {
                            preconditionFailure("only writes fail: \(error)")
                        }
                        return file
                    }
                }
                if count > 1 { owned.value = built.ownedTokenHashes() }
            }
            thread.name = "fanout-build-\(k)"
            thread.stackSize = 8 << 20
            thread.start()
        }
        for _ in 0..<count { done.wait() }
        progress.joining.add(1)
        var built = Built(services: services.map { $0.value! })
        if count > 1 {
            built.cluster = ServeCluster(
                count: count, directory: TokenDirectory(hashesByWorker: hashes.map(\.value)))
            for h in hashes { h.value = [] }
        }
        guard let folder else { return built }
        // Join the parts in worker order: part 0 becomes population.jsonl, the others are appended to it.
        let files: [StreamedFile]
        do {
            files = try parts.map { try $0.value.get()! }
        } catch {
            for p in parts { if case .success(let file) = p.value { file?.discard() } }
            throw error
        }
        let population = files[0]
        population.progress = nil
        for file in files.dropFirst() {
            do {
                try population.append(contentsOfFile: file.temporaryPath)
            } catch {
                for f in files { f.discard() }
                throw error
            }
            file.discard()
        }
        try population.commit()
        built.populationBytes = population.bytesWritten
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
