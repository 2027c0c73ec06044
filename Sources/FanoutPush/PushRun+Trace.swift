import FanoutCore
import FanoutAPNs
import FanoutMetrics
import FanoutTrace
import FanoutWire
import Foundation
import UVLoop


/// A trace's push lines to send (`fanout push TARGET TRACE.jsonl`): each at its `at` divided by `rateScale` after the
/// run's t0, in the file's order, with the line's own headers and exact payload bytes (docs/TRACE.md).
public final class PushTrace {
    public let pushes: TracePushes
    public let info: PushTraceInfo
    /// `at` is divided by this (`--rate-scale`): 2 sends the trace in half its time.
    public let rateScale: Double
    /// Only the push lines due within this many seconds of t0 (after scaling) are sent (`--duration`); nil: all.
    public let durationSeconds: Double?
    /// Generated `apns-id`s (for push lines whose `apnsId` is null) come from this seed and the line number.
    public let seed: UInt64
    /// The next push line to send.
    var next = 0

    /// Reads `path` (replayed to check it: a line `fanout replay` refuses throws its `TraceError`, line number
    /// included) and hashes it.
    public init(path: String, rateScale: Double = 1, durationSeconds: Double? = nil, seed: UInt64 = 0) throws {
        precondition(rateScale > 0)
        pushes = try TracePushes.read(path: path)
        // The file's hash, read in chunks (a trace may be large).
        guard let file = FileHandle(forReadingAtPath: path) else { throw FileError(path: path, "cannot read the file") }
        defer { try? file.close() }
        var fnv = FNV1a.offsetBasis
        while let chunk = try file.read(upToCount: 1 << 20), !chunk.isEmpty {
            fnv = chunk.withUnsafeBytes { FNV1a.hash($0, from: fnv) }
        }
        info = PushTraceInfo(
            path: path, lines: pushes.lineCount, hash: FNV1a.hex(fnv),
            pushLines: pushes.pushes.count, notSent: pushes.otherOps)
        self.rateScale = rateScale
        self.durationSeconds = durationSeconds
        self.seed = seed
    }

    /// The time after t0 at which push `k` is due.
    func intendedNanos(_ k: Int) -> UInt64 {
        UInt64((Double(pushes.pushes[k].atMillis) * 1e6 / rateScale).rounded())
    }

    /// The due time of the next push line, nil when none is left (or the next is beyond `durationSeconds`).
    var nextIntendedNanos: UInt64? {
        guard next < pushes.pushes.count else { return nil }
        let due = intendedNanos(next)
        if let durationSeconds, Double(due) > durationSeconds * 1e9 { return nil }
        return due
    }

    /// The configuration of the run (the trace's bytes, the time scale, the duration): shards of one run share it.
    var configHash: String {
        let text = "trace \(info.hash) rateScale \(rateScale) duration \(durationSeconds.map { "\($0)" } ?? "all")"
        return FNV1a.hex(FNV1a.hash(text.utf8))
    }
}

extension PushRun {
    static let collapseIdName = Array("apns-collapse-id".utf8)
    static let devicePath = Array("/3/device/".utf8)
    static let broadcastPath = Array("/4/broadcasts/apps/".utf8)
    static let topicSuffix = Array(".push-type.liveactivity".utf8)

    /// Sends `trace`'s push lines (``PushTrace``) to `options.target`, each at its intended time, as the scenario's
    /// pushes are sent: open loop, the same accounting, `--shard K/N` sending the push lines whose index (their
    /// place among the trace's push lines, from 0) is K modulo N.
    public convenience init(trace: PushTrace, options: PushOptions) throws {
        precondition(options.connections >= 1)
        self.init(trace: trace, options: options, token: try PushRun.providerToken(options))
        describe(name: (trace.info.path as NSString).lastPathComponent, seed: trace.seed, configHash: trace.configHash)
        results.trace = trace.info
    }

    /// Sends the push lines due by `elapsed` (nanoseconds after t0); returns when the next one is due (nil: none).
    func sendTrace(_ trace: PushTrace, upTo elapsed: UInt64) -> UInt64? {
        while let due = trace.nextIntendedNanos, due <= elapsed {
            let k = trace.next
            trace.next += 1
            guard options.shard.isWhole || k % options.shard.count == options.shard.index else { continue }
            sendTracePush(trace, k, due: due)
        }
        return trace.nextIntendedNanos
    }

    /// Push line `k`: a token push to `/3/device/TOKEN`, a push-to-start to `/3/device/STARTTOKEN`, a broadcast to
    /// `/4/broadcasts/apps/BUNDLE` (the topic without `.push-type.liveactivity`) with the channel as
    /// `apns-channel-id`, as it is. Headers are the line's (a null one is not sent; a broadcast has no `apns-topic`,
    /// its bundle is in the path); `apns-id` (`apns-request-id` on a broadcast) is the line's `apnsId`, or one made
    /// from the seed and the line number when that is null. The body is the payload's exact bytes.
    private func sendTracePush(_ trace: PushTrace, _ k: Int, due: UInt64) {
        let p = trace.pushes.pushes[k]
        let bytes = trace.pushes.bytes
        var authorization: [UInt8]?
        if let token {
            let wallSeconds = (t0UnixNanos + Int64(due)) / 1_000_000_000
            do {
                authorization = try token.authorization(nowSeconds: wallSeconds)
                results.tokensIssued = token.tokensIssued
            } catch {
                // Counted sent and failed: sent = answered + failed + unanswered holds.
                failUnsent(1, "provider token: \(error)", due: t0Nanos &+ due)
                return
            }
        }
        results.events += 1
        var headers = HeaderList()
        var path: [UInt8]
        switch p.target {
        case .token, .startToken:
            path = PushRun.devicePath + bytes[p.address]
            if let topic = p.topic { headers.append(name: PushRun.topicName, value: Array(bytes[topic])) }
        case .channel:
            path = PushRun.broadcastPath
            if let topic = p.topic {
                let value = bytes[topic]
                path += value.count > PushRun.topicSuffix.count && value.hasSuffix(PushRun.topicSuffix)
                    ? value.dropLast(PushRun.topicSuffix.count) : value
            }
            headers.append(name: PushRun.channelIdName, value: Array(bytes[p.address]))
        }
        for (name, range) in [
            (PushRun.pushTypeName, p.pushType), (PushRun.priorityName, p.priority),
            (PushRun.expirationName, p.expiration), (PushRun.collapseIdName, p.collapseId),
        ] {
            if let range { headers.append(name: name, value: Array(bytes[range])) }
        }
        if let authorization { headers.append(name: PushRun.authorizationName, value: authorization) }
        // The line's own id as written (a trace may hold any text), else one from the seed; after the other
        // headers, as a scenario push's id goes.
        let idHeader: H2UUIDHeader.Name = p.target == .channel ? .apnsRequestId : .apnsId
        let idName = idHeader.text
        let id = p.apnsId.map { Array(bytes[$0]) }
            ?? PushRun.requestId(idHeader, seed: trace.seed, event: p.line, push: 0).value
        headers.append(name: Array(UnsafeRawBufferPointer(start: idName.utf8Start, count: idName.utf8CodeUnitCount)),
            value: id)
        switch p.target {
        case .token: results.tokenPushes += 1
        case .startToken: results.pushToStarts += 1
        case .channel: results.broadcasts += 1
        }
        send(H2ClientRequest(
            path: path, headers: headers, body: Array(bytes[p.payload]), tag: Int(truncatingIfNeeded: t0Nanos &+ due)),
            group: 0)
    }
}

extension ArraySlice where Element == UInt8 {
    fileprivate func hasSuffix(_ suffix: [UInt8]) -> Bool {
        count >= suffix.count && self.suffix(suffix.count).elementsEqual(suffix)
    }
}
