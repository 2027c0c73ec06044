import FanoutCore
import FanoutMetrics
import Foundation

/// summary.json of `fanout serve` read back into the values `ServeReport` renders (the inverse of
/// `ServeReport.summaryJSON`): every key it writes is read, none defaulted.
extension ServeFolder {
    static func parseResults(
        _ root: Fields, _ summary: ServeSummaryFile, withoutHistogram: inout [String]
    ) throws(ReportReadError) -> ServeResults {
        let file = root.file
        var info = ServeResults.Info(
            scenario: summary.scenario, seed: summary.seed, listen: try root.string("listen"),
            transport: summary.transport, auth: summary.auth, startedAt: try root.string("startedAt"),
            gitRevision: try root.string("gitRevision"))
        info.workers = summary.workers
        let state = try root.string("state")
        guard let detail = ServeResults.StateDetail(rawValue: state) else {
            throw ReportReadError(file: file, "field state: expected none, summary or full, got \(state)")
        }
        info.state = detail
        info.manageListen = try root.optionalString("manageListen")
        // The objectives the run judged itself by (`--threshold`; folders written before the verdict have none).
        if let verdict = try root.optionalObject("verdict") {
            guard let list = (verdict.value as? [String: Any])?["objectives"] as? [[String: Any]] else {
                throw ReportReadError(file: file, "field verdict.objectives: expected a list of objects")
            }
            for (k, o) in list.enumerated() {
                guard let text = o["objective"] as? String else {
                    throw ReportReadError(file: file, "field verdict.objectives[\(k)].objective: expected a text")
                }
                info.thresholds.append(text)
            }
        }
        // The flags that change what the run measures (folders written before them have none).
        if let flags = try root.optionalObject("flags") {
            for key in (flags.value as? [String: Any] ?? [:]).keys { info.flags[key] = try flags.string(key) }
        }
        if let text = try root.optionalString("shard") {
            guard let shard = try? Shard(parsing: text) else {
                throw ReportReadError(file: file, "field shard: expected K/N, got \(text)")
            }
            info.shard = shard
            info.configHash = try root.string("configHash")
        } else {
            info.configHash = try root.optionalString("configHash")
        }

        var s = ServeStats()
        let requests = try root.object("requests")
        s.requests = try requests.int("total")
        var byReason: [APNsReason: Int] = [:]
        for (name, n) in try requests.counts("byReason") {
            guard let reason = APNsReason(rawValue: name) else {
                throw ReportReadError(file: file, "field requests.byReason.\(name): not a reason of APNs")
            }
            byReason[reason] = n
        }
        s.addAnswers(byStatus: try requests.statusCounts("byStatus"), byReason: byReason)
        s.acceptedPushes = try requests.int("acceptedPushes")
        s.acceptedBroadcasts = try requests.int("acceptedBroadcasts")
        s.acceptedOtherPushTypes = try requests.int("acceptedOtherPushTypes")
        s.channelRequests = try requests.int("channelRequests")
        let limits = try requests.object("channelLimits")
        s.channelRefusals = ServeStats.ChannelRefusals(
            perApp: try limits.int("perAppRefused"), bundles: try limits.int("apiBundlesRefused"),
            listsCut: try limits.int("listsCut"))
        // Written with a shard (and by a merge): token pushes to another shard's device.
        let merged = try root.optionalInt("shards") != nil
        if info.shard != nil || merged {
            s.notThisShard = try requests.int("notThisShard")
        }
        let findings = try root.object("findings")
        for f in ServeStats.Finding.allCases {
            let o = try findings.object("\(f)")
            s.findings.values[f.rawValue] = try o.int("count")
            guard let examples = (o.value as? [String: Any])?["examples"] as? [String] else {
                throw ReportReadError(file: file, "field \(o.path).examples: expected a list of texts")
            }
            s.examples.values[f.rawValue] = examples
        }

        var a = Accounting()
        let accounting = try root.object("accounting")
        a.pushes = try accounting.int("pushes")
        a.routed = try accounting.int("routed")
        a.deliveries = try accounting.int("deliveries")
        for (name, n) in try accounting.counts("rejected") {
            guard let r = RejectReason.allCases.first(where: { $0.name == name }) else {
                throw ReportReadError(file: file, "field accounting.rejected.\(name): not a reason")
            }
            a.rejected[r.rawValue] = n
        }
        for (name, n) in try accounting.counts("unroutable") {
            guard let r = UnroutableReason.allCases.first(where: { $0.name == name }) else {
                throw ReportReadError(file: file, "field accounting.unroutable.\(name): not a reason")
            }
            a.unroutable[r.rawValue] = n
        }
        let outcomes = try accounting.object("outcomes")
        for o in Outcome.allCases { a.outcomes[o.rawValue] = try outcomes.int(o.name) }

        let cs = try root.object("connections")
        var c = ConnectionStats()
        c[.accepted] = try cs.int("accepted")
        c[.closed] = try cs.int("closed")
        c[.peakOpen] = try cs.int("peakOpen")
        c[.tlsConnections] = try cs.int("tls")
        c[.bytesIn] = try cs.int("bytesIn")
        c[.bytesOut] = try cs.int("bytesOut")
        c[.streamsReset] = try cs.int("streamsReset")
        c.endReasons = try cs.counts("endReasons")
        c[.refused] = try cs.int("refused")
        c[.acceptErrors] = try cs.int("acceptErrors")
        c[.streamsRefused] = try cs.int("streamsRefused")
        c[.requestsRefused] = try cs.int("requestsRefused")
        c[.requestTimeouts] = try cs.int("requestTimeouts")
        c[.outputPauses] = try cs.int("outputPauses")
        c[.trailerFields] = try cs.int("trailerFields")
        c[.responsesSubmitted] = try cs.int("responsesSubmitted")
        c[.answersDropped] = try cs.int("answersDropped")
        c[.misplacedRequests] = try cs.int("misplacedRequests")
        let faults = try root.object("faults")
        info.latency = try faults.optionalString("latency")
        info.faults = try faults.optionalString("faults")
        c.faults = try faultCounts(faults, withoutHistogram: &withoutHistogram)

        var latency = LatencyRecorder.serve()
        latency.clamped = UInt64(try root.object("measurement").int("clampedSamples"))
        return ServeResults(
            info: info, stats: s, accounting: a, latency: latency, intervals: [], connections: c,
            bytes: (c[.bytesIn], c[.bytesOut]), elapsedSeconds: try root.double("elapsedSeconds"))
    }

    /// summary.json's `faults` (`ServeReport.faultsJSON`).
    static func faultCounts(_ o: Fields, withoutHistogram: inout [String]) throws(ReportReadError) -> FaultCounts {
        var f = FaultCounts()
        let injected = try o.object("injected")
        f[.serviceUnavailable] = try injected.int("503")
        f[.tooManyRequests] = try injected.int("429")
        f[.internalServerError] = try injected.int("500")
        f[.reset] = try injected.int("reset")
        f[.goAway] = try injected.int("goaway")
        f[.stalled] = try injected.int("stall")
        f[.held] = try o.int("held")
        f[.heldPeak] = try o.int("heldPeak")
        f[.heldOverflow] = try o.int("heldOverflow")
        if let h = try o.exactHistogram("heldFor") {
            f.heldNanos = h
        } else {
            withoutHistogram.append("faults.heldFor")
        }
        let r = try o.object("retries")
        func byKind(_ key: String) throws(ReportReadError) -> [Int] {
            let counts = try r.object(key)
            var out: [Int] = []
            for kind in RetryCounts.kinds { out.append(try counts.int(kind)) }
            return out
        }
        f.retries.refused = try byKind("refused")
        f.retries.retried = try byKind("retried")
        f.retries.neverRetried = try byKind("neverRetried")
        f.retries.untracked = try r.int("untracked")
        if let h = try r.exactHistogram("delay") {
            f.retries.delayNanos = h
        } else {
            withoutHistogram.append("faults.retries.delay")
        }
        for c in RetryCounts.BroadcastCount.allCases { f.retries.broadcasts[c] = try r.int(c.summaryKey) }
        return f
    }
}
