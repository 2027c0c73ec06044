import FanoutMetrics
import Foundation
import UVLoop

/// `--barrier DIR`: the N shards of one push meet before their common start, with no coordinator. Shard K, once its
/// population is built and every connection is ready, writes `DIR/ready-K` (a temporary file renamed: a reader sees
/// all of it or nothing) holding that instant, then looks at the directory every `barrierPollMillis` until all N
/// files are there. The start is the latest of the N ready instants plus `barrierMarginSeconds`: every shard reads
/// the same files, so every shard computes the same instant; from there `--start-at`'s rules apply (a shard that
/// saw the last file later than the start + `--max-start-skew` refuses, exit 7). A shard whose peers are not all
/// there within `barrierTimeoutSeconds` gives up: nothing sent, `results.barrier.timedOut` and `startRefused` say
/// so (exit 8). Before the schedule: nothing here touches the hot path.
extension PushRun {
    /// The file shard `k` writes once ready.
    static func barrierFileName(_ k: Int) -> String { "ready-\(k)" }

    static var wallNanos: Int64 { Int64(Date().timeIntervalSince1970 * 1e9) }

    /// gethostname(2) (the pod's name on Kubernetes), for the reader of a barrier file; not Foundation's `hostName`,
    /// which may wait for a DNS lookup.
    static var hostName: String {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return "" }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Ready: writes this shard's file and starts looking for the others'.
    func meetBarrier() {
        guard let loop, let directory = options.barrierDirectory else { return }
        let now = PushRun.wallNanos
        results.barrier = PushBarrierRecord(
            directory: directory, shards: options.shard.count,
            marginNanos: Int64((options.barrierMarginSeconds * 1e9).rounded()),
            timeoutNanos: Int64((options.barrierTimeoutSeconds * 1e9).rounded()), ownReadyUnixNanos: now)
        do {
            try publishReady(directory: directory, readyUnixNanos: now)
        } catch {
            startError = "--barrier \(directory): \(error)"
            return stop()
        }
        let timer = UVLoop.Timer(loop: loop) { [unowned self] timer in self.pollBarrier(timer) }
        barrierTimer = timer
        pollBarrier(timer)
    }

    /// `DIR/ready-K`, written whole (temporary file, then rename); refused when it is there already (another run's
    /// barrier, or shard K launched twice: the start it fixed would not be this run's).
    private func publishReady(directory: String, readyUnixNanos: Int64) throws {
        let k = options.shard.index
        let files = FileManager.default
        try files.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = (directory as NSString).appendingPathComponent(PushRun.barrierFileName(k))
        if files.fileExists(atPath: path) {
            throw PushError(
                "\(PushRun.barrierFileName(k)) is there already (another run's barrier, or shard \(options.shard) "
                    + "launched twice): give each run its own directory")
        }
        let object: [String: Any] = [
            "shard": options.shard.description, "readyUnixNanos": readyUnixNanos, "configHash": results.configHash,
            "host": PushRun.hostName, "pid": Int(getpid()),
        ]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        let temporary = (directory as NSString).appendingPathComponent(".ready-\(k).\(getpid()).tmp")
        guard files.createFile(atPath: temporary, contents: data + Data("\n".utf8)) else {
            throw PushError("cannot write \(temporary)")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? files.removeItem(atPath: temporary)
            throw PushError("cannot rename \(temporary) to \(path): \(reason)")
        }
    }

    /// Reads the files that arrived; met: the start fixed, `--start-at`'s path taken; past the timeout: given up.
    private func pollBarrier(_ timer: UVLoop.Timer) {
        guard !finished, var record = results.barrier, let directory = options.barrierDirectory else { return }
        do {
            // A listing (readdir), not a lookup per name: a network filesystem revalidates a directory it opens,
            // where a name it found missing may stay cached missing for a while.
            let names = Set(try FileManager.default.contentsOfDirectory(atPath: directory))
            for k in record.readyUnixNanos.indices where record.readyUnixNanos[k] == nil {
                guard names.contains(PushRun.barrierFileName(k)) else { continue }
                record.readyUnixNanos[k] = try readReady(directory: directory, k: k)
            }
        } catch {
            results.barrier = record
            startError = "--barrier \(directory): \(error)"
            return stop()
        }
        let now = PushRun.wallNanos
        let ready = record.readyUnixNanos.compactMap { $0 }
        if ready.count == record.shards, let latest = ready.max() {
            let start = latest + record.marginNanos
            record.metUnixNanos = now
            record.startUnixNanos = start
            results.barrier = record
            startAtUnixNanos = start
            results.requestedStartSeconds = Double(start) / 1e9
            timer.close()
            barrierTimer = nil
            return startAtOrRefuse()
        }
        if now - record.ownReadyUnixNanos >= record.timeoutNanos {
            let missing = record.readyUnixNanos.indices.filter { record.readyUnixNanos[$0] == nil }
            let why =
                "\(record.shards - missing.count) of \(record.shards) shards ready within --barrier-timeout "
                + String(format: "%g", Double(record.timeoutNanos) / 1e9) + " s of this one (no "
                + missing.map(PushRun.barrierFileName).joined(separator: ", ") + " in \(directory))"
            record.timedOut = why
            results.barrier = record
            results.startRefused = "barrier not met: " + why
            timer.close()
            barrierTimer = nil
            return stop()
        }
        results.barrier = record
        timer.start(afterMillis: options.barrierPollMillis)
    }

    /// Shard `k`'s ready instant, from its file: of this run's shard count and configuration, or refused (a stale or
    /// foreign file would fix another start).
    private func readReady(directory: String, k: Int) throws -> Int64 {
        let name = PushRun.barrierFileName(k)
        let path = (directory as NSString).appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: path),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let shard = object["shard"] as? String, let ready = (object["readyUnixNanos"] as? NSNumber)?.int64Value
        else {
            throw PushError("\(name): not a barrier file of fanout push ({\"shard\": \"K/N\", \"readyUnixNanos\": …})")
        }
        let expected = "\(k)/\(options.shard.count)"
        guard shard == expected else {
            throw PushError("\(name) is shard \(shard)'s, expected \(expected): another run's barrier?")
        }
        let hash = object["configHash"] as? String ?? ""
        guard hash == results.configHash else {
            throw PushError(
                "\(name) is of another configuration (configHash \(hash), this run's \(results.configHash)): "
                    + "another run's barrier?")
        }
        return ready
    }
}
