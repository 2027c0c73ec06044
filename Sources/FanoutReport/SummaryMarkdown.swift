import FanoutCore
import FanoutMetrics
import Foundation

/// `summary.md`: the run in tables a person reads in a minute.
public enum SummaryMarkdown {
    public static func text(_ r: RunReport) -> String {
        let i = r.info
        let a = r.accounting
        var out: [String] = []
        out.append("# fanout run: \(i.scenario)")
        out.append("")
        let shard = i.shard.map { "shard \($0)" } ?? (i.shards > 1 ? "merged from \(i.shards) shards" : "whole run")
        out.append(
            "\(i.clock) time · \(i.workers) workers · seed \(i.seed) · config `\(i.configHash)` · \(shard) · "
                + "identities " + (a.identitiesHold ? "**hold**" : "**BROKEN**"))
        out.append("")
        out.append("## Configuration")
        out.append("")
        out += table(
            ["", ""],
            [
                ["scenario", i.scenario],
                ["seed / config hash", "\(i.seed) / `\(i.configHash)`"],
                ["clock", i.clock],
                ["workers", "\(i.workers)"],
                ["devices' slice", shard],
                ["scheduled duration", seconds(i.durationSeconds)],
                ["wall time", seconds(i.wallSeconds)],
                ["started", i.startedAt],
                ["fanout", "\(i.version) (git \(i.gitRevision))"],
                ["machine", "\(i.machine.cores) cores, \(i.machine.cpu), \(i.machine.os)"],
                [
                    "timing",
                    String(
                        format: "a clock read costs %.1f ns; stage times sampled 1 in %d pushes",
                        i.timerOverheadNanos, i.stageSampleEvery),
                ],
            ], align: "ll")
        out.append("")
        out.append("## Counts")
        out.append("")
        out.append("\(r.activities) activities; \(r.events) source events.")
        out.append("")
        let pushCheck = a.pushes == a.rejectedTotal + a.unroutableTotal + a.routed ? "✓" : "✗"
        let deliveryCheck = a.deliveries == a.outcomesTotal ? "✓" : "✗"
        out += table(
            ["identity", "left", "right", ""],
            [
                [
                    "pushes = rejected + unroutable + routed", "\(a.pushes)",
                    "\(a.rejectedTotal) + \(a.unroutableTotal) + \(a.routed)", pushCheck,
                ],
                ["deliveries = Σ outcomes", "\(a.deliveries)", "\(a.outcomesTotal)", deliveryCheck],
            ], align: "lrrc")
        out.append("")
        var verdicts: [[String]] = []
        for reason in RejectReason.allCases where a[reason] > 0 {
            verdicts.append(["rejected", reason.name, "\(a[reason])", share(a[reason], a.pushes)])
        }
        for reason in UnroutableReason.allCases where a[reason] > 0 {
            verdicts.append(["unroutable", reason.name, "\(a[reason])", share(a[reason], a.pushes)])
        }
        verdicts.append(["routed", "", "\(a.routed)", share(a.routed, a.pushes)])
        out += table(["push verdict", "reason", "pushes", "share"], verdicts, align: "llrr")
        out.append("")
        let outcomes = Outcome.allCases.filter { a[$0] > 0 }.map {
            [$0.name, "\(a[$0])", share(a[$0], a.deliveries)]
        }
        out += table(
            ["outcome", "deliveries", "share"], outcomes.isEmpty ? [["none", "0", ""]] : outcomes,
            align: "lrr")
        if a.requests > 0 {
            out.append("")
            out.append("Activity requests: \(a.requests), refused at the limit: \(a.requestsLimitExceeded).")
        }
        out.append("")
        out.append("## Latency")
        out.append("")
        out.append(
            "Per stage (service time) and end to end (from each event's intended time, so coordinated "
                + "omission is accounted for). HdrHistogram, 3 significant digits.")
        out.append("")
        let stages: [Metric] = [.encode, .validate, .route, .apply, .endToEnd, .fanoutCompletion, .scheduleLag]
        out += table(
            ["metric", "count", "p50", "p90", "p99", "p99.9", "p99.99", "max"],
            stages.filter { r[$0].totalCount > 0 }.map { row($0.name, r[$0]) }, align: "lrrrrrrr")
        out.append("")
        out += measurementSection(r)
        out.append("## Fan-out completion by size")
        out.append("")
        out.append("Last recipient applied − the event's intended time, once per event, by its number of recipients.")
        out.append("")
        let buckets: [(String, Metric)] = [
            ("1", .fanoutCompletion1), ("2–100", .fanoutCompletion2to100), ("101–10k", .fanoutCompletion101to10k),
            (">10k", .fanoutCompletionOver10k),
        ]
        out += table(
            ["recipients", "events", "p50", "p90", "p99", "p99.9", "p99.99", "max"],
            buckets.map { row($0.0, r[$0.1]) }, align: "lrrrrrrr")
        out.append("")
        out.append("## Throughput and memory")
        out.append("")
        out += table(
            ["", ""],
            [
                ["deliveries/s", grouped(r.perSecond(a.deliveries))],
                ["pushes/s", grouped(r.perSecond(a.pushes))],
                ["events/s", grouped(r.perSecond(r.events))],
                ["peak resident memory", String(format: "%.1f MiB", Double(r.peakResidentBytes) / 1_048_576)],
                ["per activity", "\(r.bytesPerActivity) B"],
            ], align: "lr")
        out.append("")
        if let trend = ResourceTrend(r.resources), r.resources.count >= 3 {
            out.append("## Resources over time")
            out.append("")
            out.append(
                "Sampled every \(Int(ResourceSample.intervalSeconds)) s; flat means resident memory within ±5% "
                    + "of its level after warm-up (the first 20% of the run) and open descriptors constant.")
            out.append("")
            let mib = { (b: Int) in String(format: "%.1f MiB", Double(b) / 1_048_576) }
            out += table(
                ["", "after warm-up", "last", "max", "flat"],
                [
                    [
                        "resident memory", mib(trend.rssFirstAfterWarmUp), mib(trend.rssLast), mib(trend.rssMax),
                        trend.rssFlat ? "yes" : "**no**",
                    ],
                    [
                        "open file descriptors", "\(trend.fdsFirst)", "\(trend.fdsLast)", "\(trend.fdsMax)",
                        trend.fdsFlat ? "yes" : "**no**",
                    ],
                ], align: "lrrrc")
            out.append("")
            out += table(
                ["t (s)", "resident", "fds"],
                r.resources.map {
                    [String(format: "%.0f", $0.elapsedSeconds), mib($0.residentBytes), "\($0.openFileDescriptors)"]
                }, align: "rrr")
            out.append("")
        }
        return out.joined(separator: "\n")
    }

    static func row(_ name: String, _ h: LatencyHistogram) -> [String] {
        let l = LatencySummary(h)
        guard l.count > 0 else { return [name, "0", "", "", "", "", "", ""] }
        return [name, "\(l.count)"] + [l.p50, l.p90, l.p99, l.p999, l.p9999, l.max].map(Units.duration)
    }

    /// A Markdown table; `align` has one letter per column: l, r or c.
    public static func table(_ header: [String], _ rows: [[String]], align: String) -> [String] {
        let marks = align.map { c -> String in
            switch c {
            case "r": "---:"
            case "c": ":---:"
            default: "---"
            }
        }
        return ["| " + header.joined(separator: " | ") + " |", "| " + marks.joined(separator: " | ") + " |"]
            + rows.map {
                "| " + $0.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |"
            }
    }

    static func share(_ part: Int, _ whole: Int) -> String {
        whole > 0 ? String(format: "%.2f%%", Double(part) * 100 / Double(whole)) : ""
    }

    static func seconds(_ s: Double) -> String { String(format: "%.3f s", s) }

    static func grouped(_ v: Double) -> String { Units.grouped(Int(v.rounded())) }
}

/// Units people read.
extension SummaryMarkdown {
    /// How the run measured: the sampling rule and its cost, clamped samples, the cost model.
    static func measurementSection(_ r: RunReport) -> [String] {
        let m = r.measurement
        guard !m.sampling.isEmpty else { return [] }
        let deliveries = max(r.accounting.deliveries, 1)
        var rows: [[String]] = [["sampling", m.sampling]]
        let perDelivery = Double(m.clockReads) / Double(deliveries)
        rows.append([
            "clock reads",
            String(
                format: "%@ (%.3f per delivery; ≈ %.1f ns each)", Units.grouped(m.clockReads), perDelivery,
                r.info.timerOverheadNanos),
        ])
        rows.append(["clamped samples", "\(m.clampedSamples) (above one hour, recorded as one hour)"])
        rows.append([
            "events skipped", "\(Units.grouped(m.eventsSkipped)) (worker × event pairs with no local recipient)",
        ])
        if let model = m.costModel { rows.append(["cost model (ns)", "`\(model)`"]) }
        rows.append(["final merge", String(format: "%.3f s", m.finalMergeSeconds)])
        rows.append(["report files", String(format: "%.3f s to render", m.reportSeconds)])
        return ["## Measurement", ""] + table(["", ""], rows, align: "ll") + [""]
    }
}

public enum Units {
    /// Nanoseconds in a readable unit: 812 ns, 3.41 µs, 12.5 ms, 1.20 s.
    public static func duration(_ nanos: UInt64) -> String {
        let v = Double(nanos)
        switch v {
        case ..<1_000: return String(format: "%.0f ns", v)
        case ..<10_000: return String(format: "%.2f µs", v / 1e3)
        case ..<1_000_000: return String(format: "%.1f µs", v / 1e3)
        case ..<10_000_000: return String(format: "%.2f ms", v / 1e6)
        case ..<1_000_000_000: return String(format: "%.1f ms", v / 1e6)
        default: return String(format: "%.2f s", v / 1e9)
        }
    }

    /// 1234567 → "1,234,567".
    public static func grouped(_ v: Int) -> String {
        let digits = String(v.magnitude)
        var out = ""
        for (n, c) in digits.enumerated() {
            if n > 0 && (digits.count - n) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return (v < 0 ? "-" : "") + out
    }

}
