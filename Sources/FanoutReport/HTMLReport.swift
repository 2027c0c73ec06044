import FanoutCore
import FanoutMetrics
import Foundation

/// `report.html`: the run on one self-contained page — header, percentile spectra, throughput and
/// latency over time, outcomes, the stage waterfall and the percentile table. Inline CSS and SVG
/// only: no script, no font, no network. The same report renders to the same bytes.
public enum HTMLReport {
    public static func render(_ r: RunReport) -> String {
        var out = HTMLPage.start(title: "fanout run: \(r.info.scenario)")
        out += header(r)
        out += spectra(r)
        out += overTime(r)
        out += outcomes(r)
        out += waterfall(r)
        out += resources(r)
        out += percentileTable(r)
        out += HTMLPage.end(
            maker: "fanout \(HTMLText.escape(r.info.version)) (git \(HTMLText.escape(r.info.gitRevision)))")
        return out
    }

    // MARK: Colours (Okabe–Ito, readable with the common colour-vision deficiencies)

    static func color(_ metric: Metric) -> String {
        switch metric {
        case .encode: "#0072B2"
        case .validate: "#E69F00"
        case .route: "#009E73"
        case .apply: "#CC79A7"
        case .endToEnd: "#D55E00"
        case .fanoutCompletion: "#56B4E9"
        case .scheduleLag: "#6b6b6b"
        case .fanoutCompletion1: "#009E73"
        case .fanoutCompletion2to100: "#E69F00"
        case .fanoutCompletion101to10k: "#CC79A7"
        case .fanoutCompletionOver10k: "#0072B2"
        }
    }

    /// Text on a bar of `metric`'s colour: dark on the light colours.
    static func textColor(on metric: Metric) -> String {
        switch metric {
        case .validate, .route, .fanoutCompletion, .fanoutCompletion1, .fanoutCompletion2to100: "#1d2330"
        default: "#ffffff"
        }
    }

    static let stages: [Metric] = [.encode, .validate, .route, .apply]
    static let buckets: [(label: String, metric: Metric)] = [
        ("1 recipient", .fanoutCompletion1), ("2–100 recipients", .fanoutCompletion2to100),
        ("101–10k recipients", .fanoutCompletion101to10k), (">10k recipients", .fanoutCompletionOver10k),
    ]

    // MARK: Header

    static func header(_ r: RunReport) -> String {
        let i = r.info
        let a = r.accounting
        let e = HTMLText.escape
        let shard = i.shard.map { "shard \($0)" } ?? (i.shards > 1 ? "merged from \(i.shards) shards" : "whole run")
        var out = "<header>\n<h1>fanout run: <span class=\"scenario\">\(e(i.scenario))</span></h1>\n"
        out +=
            "<p class=\"sub\">\(e(i.clock)) time · \(i.workers) workers · seed \(i.seed) · config "
            + "<code>\(e(i.configHash))</code> · \(e(shard))</p>\n"
        let pushSides = "\(a.pushes) = \(a.rejectedTotal) + \(a.unroutableTotal) + \(a.routed)"
        let deliverySides = "\(a.deliveries) = \(a.outcomesTotal)"
        let pushOK = a.pushes == a.rejectedTotal + a.unroutableTotal + a.routed
        let deliveryOK = a.deliveries == a.outcomesTotal
        if a.identitiesHold {
            out += "<div class=\"identities ok\"><strong>✓ identities hold</strong>"
        } else {
            out += "<div class=\"identities broken\"><strong>✗ identities BROKEN</strong>"
        }
        out += "<span>pushes = rejected + unroutable + routed: \(pushSides) \(pushOK ? "✓" : "✗")</span>"
        out += "<span>deliveries = Σ outcomes: \(deliverySides) \(deliveryOK ? "✓" : "✗")</span></div>\n"
        let rows: [(String, String)] = [
            ("scenario", e(i.scenario)),
            ("clock", e(i.clock)),
            ("workers", "\(i.workers)"),
            ("seed", "\(i.seed)"),
            ("config hash", "<code>\(e(i.configHash))</code>"),
            ("devices' slice", e(shard)),
            ("started", e(i.startedAt)),
            ("wall time", String(format: "%.3f s", i.wallSeconds)),
            (
                "scheduled duration",
                String(format: "%.3f s", i.durationSeconds)
                    + (i.clock == "virtual" ? " (simulated)" : "")
            ),
            ("git revision", "<code>\(e(i.gitRevision))</code> (fanout \(e(i.version)))"),
            ("machine", e("\(i.machine.cores) cores, \(i.machine.cpu), \(i.machine.os)")),
            (
                "timing",
                String(
                    format: "a clock read costs %.1f ns; stage times sampled 1 in %d pushes",
                    i.timerOverheadNanos, i.stageSampleEvery)
            ),
        ]
        out += "<dl class=\"meta\">\n"
        for (k, v) in rows { out += "<dt>\(k)</dt><dd>\(v)</dd>\n" }
        out += "</dl>\n"
        let e2e = LatencySummary(r[.endToEnd])
        let perWall = "per wall second"
        let tiles: [(String, String, String)] = [
            ("deliveries", Units.grouped(a.deliveries), "\(Units.grouped(Int(r.perSecond(a.deliveries)))) \(perWall)"),
            ("pushes", Units.grouped(a.pushes), "\(Units.grouped(Int(r.perSecond(a.pushes)))) \(perWall)"),
            ("source events", Units.grouped(r.events), "\(Units.grouped(r.activities)) activities"),
            (
                "peak resident memory", String(format: "%.1f MiB", Double(r.peakResidentBytes) / 1_048_576),
                "\(Units.grouped(r.bytesPerActivity)) B per activity"
            ),
            ("endToEnd p50", e2e.count > 0 ? Units.duration(e2e.p50) : "–", "median"),
            ("endToEnd p99", e2e.count > 0 ? Units.duration(e2e.p99) : "–", "1 in 100 slower"),
            ("endToEnd p99.9", e2e.count > 0 ? Units.duration(e2e.p999) : "–", "1 in 1,000 slower"),
            (
                "endToEnd max", e2e.count > 0 ? Units.duration(e2e.max) : "–",
                "\(Units.grouped(Int(e2e.count))) values"
            ),
        ]
        out += "<div class=\"tiles\">\n"
        for (k, v, note) in tiles {
            out += "<div class=\"tile\"><span>\(k)</span><b>\(v)</b><small>\(note)</small></div>\n"
        }
        out += "</div>\n</header>\n"
        return out
    }

    // MARK: Percentile spectra

    static func spectra(_ r: RunReport) -> String {
        var out = "<section>\n<h2>Latency percentile spectra</h2>\n"
        out +=
            "<p class=\"note\">As HdrHistogram's plotter: the x axis is log(1/(1−p)), so every “nine” gets the "
            + "same width; the y axis is latency on a log scale. Stages are service times (sampled 1 in "
            + "\(r.info.stageSampleEvery) pushes); endToEnd runs from each event's intended time, so coordinated "
            + "omission is accounted for.</p>\n"
        out += spectrum(
            title: "Stage latency percentile spectrum",
            series: stages.map { ($0.name, color($0), r[$0]) })
        out += spectrum(
            title: "End-to-end latency percentile spectrum",
            series: [Metric.endToEnd, .fanoutCompletion, .scheduleLag].map { ($0.name, color($0), r[$0]) })
        out += spectrum(
            title: "Fan-out completion by size percentile spectrum",
            series: buckets.map { ($0.label, color($0.metric), r[$0.metric]) })
        out += "</section>\n"
        return out
    }

    public static func spectrum(
        title: String, series: [(name: String, color: String, histogram: LatencyHistogram)]
    )
        -> String
    {
        let frame = ChartFrame(height: 380, rightMargin: 220, top: 14, bottomMargin: 58)
        var out = "<figure>\n<figcaption>\(HTMLText.escape(title))</figcaption>\n"
        let present = series.filter { $0.histogram.totalCount > 0 }
        guard !present.isEmpty else {
            return out + "<p class=\"empty\">No values recorded for these metrics.</p>\n</figure>\n"
        }
        // Nines on the x axis: 5 (99.999%), or 6 when some series has a million values.
        let nines = present.contains { $0.histogram.totalCount >= 1_000_000 } ? 6 : 5
        let x = LinearScale(low: 0, upTo: Double(nines), from: frame.left, to: frame.right, ticks: nines)
        let lowest = present.map { Double($0.histogram.min) }.min() ?? 1
        let highest = present.map { Double($0.histogram.max) }.max() ?? 1
        let y = LogScale(covering: lowest, highest, from: frame.bottom, to: frame.top)
        var svg = SVG(width: frame.width, height: frame.height, title: title)
        svg.rect(frame.left, frame.top, frame.right - frame.left, frame.bottom - frame.top, fill: "#fbfbfc")
        for tick in y.ticks {
            let py = y(tick.value)
            svg.line(frame.left, py, frame.right, py, stroke: tick.labelled ? "#dde1e6" : "#eef0f3")
            if tick.labelled {
                svg.text(frame.left - 8, py + 4, HTMLText.tickDuration(tick.value), anchor: .end, size: 12)
            }
        }
        var xTicks: [(Double, String)] = [(0, "0%"), (log10(2), "50%")]
        for n in 1...nines {
            xTicks.append((Double(n), String(format: "%.\(max(n - 2, 0))f%%", 100 - pow(10, 2 - Double(n)))))
        }
        for (value, label) in xTicks {
            let px = x(value)
            svg.line(px, frame.top, px, frame.bottom, stroke: "#dde1e6")
            svg.line(px, frame.bottom, px, frame.bottom + 5, stroke: "#8a929e")
            svg.text(px, frame.bottom + 19, label, anchor: .middle, size: 12)
        }
        svg.line(frame.left, frame.bottom, frame.right, frame.bottom, stroke: "#8a929e")
        svg.line(frame.left, frame.top, frame.left, frame.bottom, stroke: "#8a929e")
        svg.text(
            (frame.left + frame.right) / 2, frame.height - 12, "percentile (log scale of 1/(1−p))", anchor: .middle,
            size: 13, fill: "#1d2330")
        svg.text(
            18, (frame.top + frame.bottom) / 2, "latency (log scale)", anchor: .middle, size: 13, fill: "#1d2330",
            rotated: true)
        for s in present {
            var points: [(Double, Double)?] = []
            for v in s.histogram.percentileSteps(ticksPerHalfDistance: 5) {
                let p = v.percentile / 100
                let nine = p >= 1 ? Double(nines) : min(-log10(1 - p), Double(nines))
                points.append((x(nine), y(Double(max(v.value, 1)))))
            }
            svg.path(points, stroke: s.color, width: 2.2, tooltip: s.name)
        }
        // Legend, right of the plot: every series, those without values greyed.
        var ly = frame.top + 12
        for s in series {
            let l = LatencySummary(s.histogram)
            let has = l.count > 0
            svg.line(frame.right + 16, ly - 4, frame.right + 40, ly - 4, stroke: has ? s.color : "#c3c8cf", width: 3)
            svg.text(frame.right + 48, ly, s.name, size: 13, fill: has ? "#1d2330" : "#8a929e", bold: true)
            let detail =
                has
                ? "p99 \(Units.duration(l.p99)) · max \(Units.duration(l.max))"
                : "no values"
            svg.text(frame.right + 48, ly + 16, detail, size: 11.5, fill: "#5b6472")
            if has {
                svg.text(
                    frame.right + 48, ly + 31, "\(Units.grouped(Int(l.count))) values", size: 11.5, fill: "#5b6472")
            }
            ly += has ? 52 : 38
        }
        out += svg.text + "\n</figure>\n"
        return out
    }

    // MARK: Outcomes

    static func outcomes(_ r: RunReport) -> String {
        let a = r.accounting
        var out = "<section>\n<h2>Outcome breakdown</h2>\n"
        var verdicts: [(String, Int, String)] = []
        for reason in RejectReason.allCases where a[reason] > 0 {
            verdicts.append(("rejected · \(reason.name)", a[reason], "#D55E00"))
        }
        for reason in UnroutableReason.allCases where a[reason] > 0 {
            verdicts.append(("unroutable · \(reason.name)", a[reason], "#E69F00"))
        }
        verdicts.append(("routed", a.routed, "#009E73"))
        out += bars(title: "Push verdicts", unit: "pushes", rows: verdicts, whole: a.pushes)
        let outcomeColors: [Outcome: String] = [
            .applied: "#009E73", .ignoredEnded: "#8a929e", .ignoredStaleTimestamp: "#b8bec7", .throttled: "#E69F00",
            .decodeFailed: "#D55E00", .limitExceeded: "#CC79A7", .expired: "#56B4E9", .coalesced: "#0072B2",
        ]
        let rows = Outcome.allCases.filter { a[$0] > 0 }.map { ($0.name, a[$0], outcomeColors[$0] ?? "#8a929e") }
        out += bars(title: "Delivery outcomes", unit: "deliveries", rows: rows, whole: a.deliveries)
        if a.requests > 0 {
            let refused = HTMLText.percent(Double(a.requestsLimitExceeded), of: Double(a.requests))
            out +=
                "<p class=\"note\">Activity requests: \(Units.grouped(a.requests)), refused at the limit: "
                + "\(Units.grouped(a.requestsLimitExceeded)) (\(refused)).</p>\n"
        }
        out += "</section>\n"
        return out
    }

    public static func bars(title: String, unit: String, rows: [(String, Int, String)], whole: Int) -> String {
        var out =
            "<h3>\(title)</h3>\n<table class=\"bars\">\n<thead><tr><th></th><th class=\"bar\">share of "
            + "\(Units.grouped(whole)) \(unit)</th><th class=\"n\">\(unit)</th><th class=\"n\">share</th></tr>"
            + "</thead>\n<tbody>\n"
        if rows.isEmpty {
            out += "<tr><td>none</td><td class=\"bar\"></td><td class=\"n\">0</td><td class=\"n\">–</td></tr>\n"
        }
        for (label, count, color) in rows {
            let share = whole > 0 ? Double(count) * 100 / Double(whole) : 0
            let width = String(format: "%.3f", share.isFinite ? min(max(share, 0), 100) : 0)
            let minimum = count > 0 ? "min-width:2px;" : ""
            out +=
                "<tr><td>\(HTMLText.escape(label))</td><td class=\"bar\"><span style=\"width:\(width)%;"
                + "\(minimum)background:\(color)\"></span></td><td class=\"n\">\(Units.grouped(count))</td>"
                + "<td class=\"n\">\(HTMLText.percent(Double(count), of: Double(whole)))</td></tr>\n"
        }
        out += "</tbody>\n</table>\n"
        return out
    }

    // MARK: Percentile table

    static func percentileTable(_ r: RunReport) -> String {
        var out =
            "<section>\n<h2>Percentiles per metric</h2>\n<table class=\"percentiles\">\n<thead><tr><th>metric"
            + "</th>"
        for h in ["count", "mean", "p50", "p90", "p99", "p99.9", "p99.99", "max"] { out += "<th class=\"n\">\(h)</th>" }
        out += "</tr></thead>\n<tbody>\n"
        for metric in Metric.allCases {
            let l = LatencySummary(r[metric])
            out +=
                "<tr><td><i class=\"swatch\" style=\"background:\(color(metric))\"></i>"
                + "\(HTMLText.escape(metric.name))</td><td class=\"n\">\(Units.grouped(Int(l.count)))</td>"
            if l.count > 0 {
                let mean = UInt64(l.mean.isFinite ? max(l.mean.rounded(), 0) : 0)
                let cells = [mean, l.p50, l.p90, l.p99, l.p999, l.p9999, l.max]
                for v in cells { out += "<td class=\"n\">\(Units.duration(v))</td>" }
            } else {
                out += String(repeating: "<td class=\"n muted\">–</td>", count: 7)
            }
            out += "</tr>\n"
        }
        out +=
            "</tbody>\n</table>\n<p class=\"note\">The same numbers as summary.md; full distributions in the "
            + "<code>.hgrm</code> files, per interval in <code>latency.hlog</code>.</p>\n</section>\n"
        return out
    }

    // MARK: Style

    public static let css = """
        :root { color-scheme: light; }
        body { margin: 0; background: #f4f5f7; color: #1d2330;
          font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
        main { max-width: 1000px; margin: 0 auto; padding: 20px 24px 40px; }
        header, section { background: #fff; border: 1px solid #e1e4e9; border-radius: 8px; padding: 16px 20px;
          margin: 0 0 16px; }
        h1 { font-size: 22px; margin: 0 0 2px; overflow-wrap: anywhere; }
        h2 { font-size: 17px; margin: 0 0 6px; }
        h3 { font-size: 14px; margin: 14px 0 4px; }
        code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
        .sub, .note, footer { color: #5b6472; }
        .note { font-size: 12.5px; margin: 4px 0 8px; }
        footer { font-size: 12px; text-align: center; }
        .identities { display: flex; flex-wrap: wrap; gap: 4px 18px; align-items: baseline; margin: 10px 0 12px;
          padding: 10px 14px; border-radius: 6px; font-size: 13px; }
        .identities strong { font-size: 18px; margin-right: 6px; }
        .ok { background: #e4f4ea; color: #125a30; border: 1px solid #9fd4b4; }
        .broken { background: #fde4e1; color: #8a1c12; border: 2px solid #e0796c; }
        b.bad { color: #b3261e; }
        dl.meta { display: grid; grid-template-columns: max-content 1fr max-content 1fr; gap: 3px 14px;
          margin: 0 0 12px; font-size: 13px; }
        dl.meta dt { color: #5b6472; }
        dl.meta dd { margin: 0; overflow-wrap: anywhere; }
        .tiles { display: grid; grid-template-columns: repeat(4, 1fr); gap: 8px; }
        .tile { border: 1px solid #e1e4e9; border-radius: 6px; padding: 6px 10px; }
        .tile span, .tile small { display: block; color: #5b6472; font-size: 12px; }
        .tile b { display: block; font-size: 19px; font-variant-numeric: tabular-nums; }
        figure { margin: 10px 0 14px; }
        figcaption { font-weight: 600; margin: 0 0 4px; }
        svg { display: block; width: 100%; height: auto; }
        .empty { color: #8a929e; font-style: italic; }
        table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; font-size: 13px; }
        th, td { padding: 3px 8px; border-bottom: 1px solid #eceef2; text-align: left; }
        th { color: #5b6472; font-weight: 600; }
        .n { text-align: right; white-space: nowrap; }
        .muted { color: #a3aab4; }
        table.bars td:first-child { white-space: nowrap; width: 30%; }
        .bar { width: 50%; }
        td.bar span { display: block; height: 14px; border-radius: 2px; }
        .swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
        """
}
