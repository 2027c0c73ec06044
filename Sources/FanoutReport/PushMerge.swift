import FanoutHistogramLog
import FanoutMetrics
import Foundation

/// A `fanout push` run folder read back: its summary.json's counts and its own verdicts (saturated, server-limited),
/// and its histograms from latency.hlog (the whole run's, per tag: the sum of the intervals, checked against the
/// summary's counts; a folder written before `answeredLatency`, `dispatchLag` and `streamWait` has none of them).
public enum PushFolder {
    /// Whether `folder` holds the summary.json of `fanout push` (not of `fanout run` or `fanout serve`).
    public static func isPush(_ folder: String) -> Bool {
        let file = (folder as NSString).appendingPathComponent("summary.json")
        guard let data = FileManager.default.contents(atPath: file),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return false }
        return object["tool"] as? String == "fanout push"
    }

    public static func read(_ folder: String) throws(ReportReadError) -> PushResults {
        let file = (folder as NSString).appendingPathComponent("summary.json")
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ReportReadError(file: file, "cannot read the file (a push folder holds summary.json)")
        }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw ReportReadError(file: file, "not a JSON object")
        }
        guard root["tool"] as? String == "fanout push" else {
            throw ReportReadError(file: file, "not the summary of a fanout push run (field tool)")
        }
        func field<T>(_ object: [String: Any], _ key: String, _ path: String, as: T.Type) throws(ReportReadError) -> T {
            guard let value = object[key] as? T else {
                throw ReportReadError(file: file, "field \(path)\(key): missing or not a \(T.self)")
            }
            return value
        }
        func number(_ object: [String: Any], _ key: String, _ path: String) throws(ReportReadError) -> Double {
            try field(object, key, path, as: NSNumber.self).doubleValue
        }
        func counts(_ object: [String: Any], _ key: String, _ path: String) throws(ReportReadError) -> [String: Int] {
            try field(object, key, path, as: [String: Int].self)
        }
        var r = PushResults()
        r.scenario = try field(root, "scenario", "", as: String.self)
        r.seed = UInt64(try field(root, "seed", "", as: Int.self))
        r.target = try field(root, "target", "", as: String.self)
        r.connections = try field(root, "connections", "", as: Int.self)
        r.streams = root["streams"] as? Int ?? 0
        r.authenticated = try field(root, "authentication", "", as: String.self) == "jwt"
        r.startedAtSeconds = try number(root, "startedAtSeconds", "")
        r.scheduleSeconds = try number(root, "scheduleSeconds", "")
        r.elapsedSeconds = try number(root, "elapsedSeconds", "")
        r.events = try field(root, "events", "", as: Int.self)
        r.tokenPushes = try field(root, "tokenPushes", "", as: Int.self)
        r.broadcasts = try field(root, "broadcasts", "", as: Int.self)
        r.pushToStarts = root["pushToStarts"] as? Int ?? 0
        if let source = root["source"] as? [String: Any], source["kind"] as? String == "trace" {
            r.trace = PushTraceInfo(
                path: try field(source, "path", "source.", as: String.self),
                lines: try field(source, "lines", "source.", as: Int.self),
                hash: try field(source, "fnv1a64", "source.", as: String.self),
                pushLines: try field(source, "pushLines", "source.", as: Int.self),
                notSent: try counts(source, "notSentDeviceSide", "source."))
        }
        let requests = try field(root, "requests", "", as: [String: Any].self)
        r.sent = try field(requests, "sent", "requests.", as: Int.self)
        r.submitted = try field(requests, "submitted", "requests.", as: Int.self)
        for (status, n) in try counts(requests, "byStatus", "requests.") {
            guard let code = Int(status) else {
                throw ReportReadError(file: file, "field requests.byStatus: \(status) is not a status")
            }
            r.byStatus[code] = n
        }
        r.byReason = try counts(requests, "byReason", "requests.")
        r.failures = try counts(requests, "failures", "requests.")
        r.unansweredAtEnd = try field(requests, "unansweredAtEnd", "requests.", as: Int.self)
        r.queuedAtEnd = try field(requests, "queuedAtEnd", "requests.", as: Int.self)
        r.peakQueued = try field(requests, "peakQueued", "requests.", as: Int.self)
        let saturation = try field(root, "saturation", "", as: [String: Any].self)
        r.maxScheduleLagNanos = UInt64(try field(saturation, "maxScheduleLagNanos", "saturation.", as: Int.self))
        // The folder's own verdicts, as it judged them (never judged again from its histograms here).
        r.recordedSaturated = try field(saturation, "saturated", "saturation.", as: Bool.self)
        r.recordedServerLimited = saturation["serverLimited"] as? Bool ?? false
        r.epochSeconds = (root["epochSeconds"] as? Int).map(Int64.init)
        r.connectionEnds = try counts(root, "connectionEnds", "")
        r.tokensIssued = try field(root, "providerTokensIssued", "", as: Int.self)
        r.interrupted = try field(root, "interrupted", "", as: Bool.self)
        r.reconnects = try field(root, "reconnects", "", as: Int.self)
        r.retries = try field(root, "retries", "", as: Int.self)
        // Written since issue 30 (absent from older folders: none counted then).
        r.connectionsDrained = root["connectionsDrained"] as? Int ?? 0
        r.reconnectBackoffs = root["reconnectBackoffs"] as? Int ?? 0
        // Written since push-soak's stream-id wrap (absent from older folders: read as 0).
        r.drainedForStreamIds = root["drainedForStreamIds"] as? Int ?? 0
        r.connectionsLost = try field(root, "connectionsLost", "", as: Bool.self)
        r.shard = root["shard"] as? String
        r.shards = root["shards"] as? Int ?? 1
        r.configHash = root["configHash"] as? String ?? ""
        PushReport.readStart(root, into: &r)
        guard r.identityHolds else {
            throw ReportReadError(file: file, "the identity sent = answered + failed + unansweredAtEnd is broken")
        }

        // The histograms: latency.hlog's intervals, added per tag; their totals must be the summary's counts.
        let (log, _, intervals) = try LatencyLogFile.read(folder, kind: "push")
        for interval in intervals {
            guard let h = LatencyLogFile.histogram(interval) else {
                throw ReportReadError(file: log, "an interval of another histogram layout than fanout's")
            }
            switch interval.tag {
            case "latency": r.latency.add(h)
            case "scheduleLag": r.scheduleLag.add(h)
            case "answeredLatency": r.answeredLatency.add(h)
            case "dispatchLag": r.dispatchLag.add(h)
            case "streamWait": r.streamWait.add(h)
            default: throw ReportReadError(file: log, "an interval tagged \(interval.tag ?? "(none)")")
            }
            r.intervals.append(PushInterval(
                tag: interval.tag!, startSeconds: interval.startSeconds, lengthSeconds: interval.lengthSeconds,
                compressed: h.encodedCompressed(), maxValue: h.max))
        }
        let histograms = [
            ("latency", r.latency), ("scheduleLag", r.scheduleLag), ("answeredLatency", r.answeredLatency),
            ("dispatchLag", r.dispatchLag), ("streamWait", r.streamWait),
        ]
        for (k, (name, h)) in histograms.enumerated() {
            let count = (root[name] as? [String: Any])?["count"] as? Int
            // latency and scheduleLag are in every push folder; the others since they were added.
            guard count == Int(h.totalCount) || (k >= 2 && count == nil && h.isEmpty) else {
                throw ReportReadError(
                    file: log,
                    "its intervals hold \(h.totalCount) \(name) samples, summary.json counts \(count ?? -1)")
            }
        }
        return r
    }
}

/// `fanout merge` of `fanout push --shard K/N` folders: all N shards of one schedule (same scenario, seed and
/// configuration hash: rates, devices, duration; one `--start-at` and one `--epoch`). Counts are summed (by status,
/// reason and failure too) and the identity checked again; histograms are added, the whole run's and each second's
/// (each shard's second k is t0 + k s, its t0 the common `--start-at`: the shards' seconds k added), never
/// percentiles averaged. The verdicts are the shards' own, ORed: saturated when one shard was (named), and
/// server-limited likewise.
public enum PushMerge {
    public static func merge(_ parts: [(folder: String, results: PushResults)]) throws(ReportReadError) -> PushResults {
        guard let (firstFolder, first) = parts.first else { throw ReportReadError(file: "merge", "no push folders") }
        // What the shards' folders add up to, one list each, so that a count added to PushResults is merged by
        // naming it here once.
        let summedCounts: [WritableKeyPath<PushResults, Int>] = [
            \.connections, \.events, \.tokenPushes, \.broadcasts, \.pushToStarts, \.sent, \.submitted,
            \.unansweredAtEnd, \.queuedAtEnd, \.peakQueued, \.tokensIssued, \.reconnects, \.retries,
            \.connectionsDrained, \.drainedForStreamIds, \.reconnectBackoffs,
        ]
        let summedCountsByName: [WritableKeyPath<PushResults, [String: Int]>] = [
            \.byReason, \.failures, \.connectionEnds,
        ]
        let addedHistograms: [WritableKeyPath<PushResults, LatencyHistogram>] = [
            \.latency, \.scheduleLag, \.answeredLatency, \.dispatchLag, \.streamWait,
        ]
        func differs(_ folder: String, _ what: String, _ a: String, _ b: String) -> ReportReadError {
            .notOneRun(folder, what, b, first: firstFolder, a, run: "push run")
        }
        var shards = ShardSet()
        for (folder, r) in parts {
            if r.scenario != first.scenario { throw differs(folder, "scenario", first.scenario, r.scenario) }
            if r.seed != first.seed { throw differs(folder, "seed", "\(first.seed)", "\(r.seed)") }
            if r.configHash != first.configHash {
                throw differs(folder, "configuration (rates, devices, duration)", first.configHash, r.configHash)
            }
            guard let text = r.shard, let shard = try? Shard(parsing: text) else {
                throw ReportReadError(
                    file: folder, "not a shard (run it with fanout push --shard K/N)", refusal: .shardSet)
            }
            try shards.add(shard, folder: folder)
        }
        try shards.checkWhole()
        let n = shards.count
        // One t0 and one clock: shards started apart, or counting from other epochs, are not one run. A shard whose
        // barrier was not met has no t0 (it sent nothing, and is named below).
        let (startFolder, startReference) = parts.first { $0.results.barrier?.timedOut == nil } ?? parts[0]
        for (folder, r) in parts {
            func shown(_ v: Double?) -> String { v.map { String(format: "%.3f", $0) } ?? "none" }
            if r.barrier?.timedOut == nil && r.requestedStartSeconds != startReference.requestedStartSeconds {
                throw ReportReadError.notOneRun(
                    folder, "--start-at", shown(r.requestedStartSeconds), first: startFolder,
                    shown(startReference.requestedStartSeconds), run: "push run")
            }
            if r.epochSeconds != first.epochSeconds {
                throw differs(
                    folder, "--epoch", first.epochSeconds.map(String.init) ?? "none",
                    r.epochSeconds.map(String.init) ?? "none")
            }
        }

        var m = PushResults()
        m.scenario = first.scenario
        m.seed = first.seed
        m.configHash = first.configHash
        m.trace = first.trace  // one trace (its hash is in configHash): the lines not sent are the whole trace's
        m.target = Array(Set(parts.map(\.results.target))).sorted().joined(separator: " ")
        m.authenticated = first.authenticated
        m.shards = n
        m.startedAtSeconds = .infinity
        // Each second k of every shard (t0 + k s), per tag, added.
        var seconds: [String: [Int: (length: Double, histogram: LatencyHistogram)]] = [:]
        m.requestedStartSeconds = startReference.requestedStartSeconds
        m.barrier = startReference.barrier
        var starts = PushShardStarts()
        m.epochSeconds = first.epochSeconds
        m.saturatedShards = []
        m.serverLimitedShards = []
        for (_, r) in parts {
            // Each shard's own verdict (as its summary.json states it), ORed.
            if r.saturated { m.saturatedShards!.append(r.shard ?? "?") }
            if r.serverLimited { m.serverLimitedShards!.append(r.shard ?? "?") }
            if let refused = r.startRefused {
                m.startRefused = (m.startRefused.map { $0 + "; " } ?? "") + "shard \(r.shard ?? "?") \(refused)"
            }
            if let started = r.startedUnixNanos {
                starts.startedUnixNanos[r.shard ?? "?"] = started
            } else if r.startRefused != nil {
                starts.notStarted.append(r.shard ?? "?")
            }
            if let skew = r.maxStartSkewNanos { starts.maxStartSkewNanos = max(starts.maxStartSkewNanos ?? 0, skew) }
            m.streams = max(m.streams, r.streams)
            for count in summedCounts { m[keyPath: count] += r[keyPath: count] }
            m.byStatus.merge(r.byStatus, uniquingKeysWith: +)
            for counts in summedCountsByName { m[keyPath: counts].merge(r[keyPath: counts], uniquingKeysWith: +) }
            m.interrupted = m.interrupted || r.interrupted
            m.connectionsLost = m.connectionsLost || r.connectionsLost
            for histogram in addedHistograms { m[keyPath: histogram].add(r[keyPath: histogram]) }
            // A shard that never started (refused, its barrier not met) has no start to count (0).
            if r.startedAtSeconds > 0 { m.startedAtSeconds = min(m.startedAtSeconds, r.startedAtSeconds) }
            m.scheduleSeconds = max(m.scheduleSeconds, r.scheduleSeconds)
            m.elapsedSeconds = max(m.elapsedSeconds, r.elapsedSeconds)
            m.maxScheduleLagNanos = max(m.maxScheduleLagNanos, r.maxScheduleLagNanos)
            if m.requestedStartSeconds != nil, let skew = r.startSkewNanos,
                abs(skew) > abs(m.startSkewNanos ?? 0) || m.startSkewNanos == nil
            {
                m.startSkewNanos = skew
            }
            for interval in r.intervals {
                // Second k starts at t0 + k s (a run's intervals do; an older folder's within a loop turn of it).
                let k = max(0, Int(interval.startSeconds.rounded()))
                let h: LatencyHistogram
                do {
                    h = try LatencyHistogram(decoding: interval.compressed)
                } catch {
                    throw ReportReadError(file: "merge", "interval \(k) of \(interval.tag): \(error)")
                }
                if var second = seconds[interval.tag]?[k] {
                    second.length = max(second.length, interval.lengthSeconds)
                    second.histogram.add(h)
                    seconds[interval.tag]![k] = second
                } else {
                    seconds[interval.tag, default: [:]][k] = (interval.lengthSeconds, h)
                }
            }
        }
        guard m.identityHolds else {
            throw ReportReadError(file: "merge", "the summed counts break the identity sent = answered + failed + "
                + "unansweredAtEnd")
        }
        let ks = Set(seconds.values.flatMap(\.keys)).sorted()
        for k in ks {
            for tag in PushIntervalSpool.tags {
                guard let second = seconds[tag]?[k] else { continue }
                m.intervals.append(PushInterval(
                    tag: tag, startSeconds: Double(k), lengthSeconds: second.length,
                    compressed: second.histogram.encodedCompressed(), maxValue: second.histogram.max))
            }
        }
        if m.startedAtSeconds == .infinity { m.startedAtSeconds = 0 }
        // Each shard's start and their spread (folders from before the start was recorded have none).
        if !starts.startedUnixNanos.isEmpty || !starts.notStarted.isEmpty {
            starts.notStarted.sort()
            m.shardStarts = starts
            m.maxStartSkewNanos = starts.maxStartSkewNanos
        }
        return m
    }
}
