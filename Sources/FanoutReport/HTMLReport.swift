import FanoutCore
import FanoutMetrics
import Foundation
import Histogram

/// `report.html`: the run on one self-contained page — header, percentile spectra, throughput and
/// latency over time, outcomes, the stage waterfall and the percentile table. Inline CSS and SVG
/// only: no script, no font, no network. The same report renders to the same bytes.
public enum HTMLReport {
    public static func render(_ r: RunReport) -> String {
        let title = "fanout run: \(r.info.scenario)"
        var out = """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(HTMLText.escape(title))</title>
            <style>
            \(css)
            </style>
            </head>
            <body>
            <main>

            """
        out += header(r)
        out += spectra(r)
        out += overTime(r)
        out += outcomes(r)
        out += waterfall(r)
        out += percentileTable(r)
        out +=
            "<footer>fanout \(HTMLText.escape(r.info.version)) (git \(HTMLText.escape(r.info.gitRevision)))"
            + " · HdrHistogram, 3 significant digits, values recorded in nanoseconds · this page has no script"
            + " and loads nothing.</footer>\n"
        out += "</main>\n</body>\n</html>\n"
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

    static func spectrum(
        title: String, series: [(name: String, color: String, histogram: Histogram<UInt64>)]
    )
        -> String
    {
        let width = 960.0
        let height = 380.0
        let left = 78.0
        let right = width - 220
        let top = 14.0
        let bottom = height - 58
        var out = "<figure>\n<figcaption>\(HTMLText.escape(title))</figcaption>\n"
        let present = series.filter { $0.histogram.totalCount > 0 }
        guard !present.isEmpty else {
            return out + "<p class=\"empty\">No values recorded for these metrics.</p>\n</figure>\n"
        }
        // Nines on the x axis: 5 (99.999%), or 6 when some series has a million values.
        let nines = present.contains { $0.histogram.totalCount >= 1_000_000 } ? 6 : 5
        let x = LinearScale(low: 0, upTo: Double(nines), from: left, to: right, ticks: nines)
        let lowest = present.map { Double($0.histogram.min) }.min() ?? 1
        let highest = present.map { Double($0.histogram.max) }.max() ?? 1
        let y = LogScale(covering: lowest, highest, from: bottom, to: top)
        var svg = SVG(width: width, height: height, title: title)
        svg.rect(left, top, right - left, bottom - top, fill: "#fbfbfc")
        for tick in y.ticks {
            let py = y(tick.value)
            svg.line(left, py, right, py, stroke: tick.labelled ? "#dde1e6" : "#eef0f3")
            if tick.labelled {
                svg.text(left - 8, py + 4, HTMLText.tickDuration(tick.value), anchor: .end, size: 12)
            }
        }
        var xTicks: [(Double, String)] = [(0, "0%"), (log10(2), "50%")]
        for n in 1...nines {
            xTicks.append((Double(n), String(format: "%.\(max(n - 2, 0))f%%", 100 - pow(10, 2 - Double(n)))))
        }
        for (value, label) in xTicks {
            let px = x(value)
            svg.line(px, top, px, bottom, stroke: "#dde1e6")
            svg.line(px, bottom, px, bottom + 5, stroke: "#8a929e")
            svg.text(px, bottom + 19, label, anchor: .middle, size: 12)
        }
        svg.line(left, bottom, right, bottom, stroke: "#8a929e")
        svg.line(left, top, left, bottom, stroke: "#8a929e")
        svg.text(
            (left + right) / 2, height - 12, "percentile (log scale of 1/(1−p))", anchor: .middle, size: 13,
            fill: "#1d2330")
        svg.text(
            18, (top + bottom) / 2, "latency (log scale)", anchor: .middle, size: 13, fill: "#1d2330",
            rotated: true)
        for s in present {
            var points: [(Double, Double)?] = []
            for v in s.histogram.percentiles(ticksPerHalfDistance: 5) {
                let p = v.percentileLevelIteratedTo / 100
                let nine = p >= 1 ? Double(nines) : min(-log10(1 - p), Double(nines))
                points.append((x(nine), y(Double(max(v.value, 1)))))
            }
            svg.path(points, stroke: s.color, width: 2.2, tooltip: s.name)
        }
        // Legend, right of the plot: every series, those without values greyed.
        var ly = top + 12
        for s in series {
            let l = LatencySummary(s.histogram)
            let has = l.count > 0
            svg.line(right + 16, ly - 4, right + 40, ly - 4, stroke: has ? s.color : "#c3c8cf", width: 3)
            svg.text(right + 48, ly, s.name, size: 13, fill: has ? "#1d2330" : "#8a929e", bold: true)
            let detail =
                has
                ? "p99 \(Units.duration(l.p99)) · max \(Units.duration(l.max))"
                : "no values"
            svg.text(right + 48, ly + 16, detail, size: 11.5, fill: "#5b6472")
            if has {
                svg.text(right + 48, ly + 31, "\(Units.grouped(Int(l.count))) values", size: 11.5, fill: "#5b6472")
            }
            ly += has ? 52 : 38
        }
        out += svg.text + "\n</figure>\n"
        return out
    }

    // MARK: Over time

    /// One bar (or point) of the over-time charts: intervals `first..<first + count`, added.
    struct TimeBucket {
        var start: Double
        var end: Double
        var histogram: Histogram<UInt64>
        /// Seconds of scheduled run time the bucket covers (its rate's denominator).
        var seconds: Double
        var afterScheduledEnd: Bool
    }

    static func timeBuckets(
        _ r: RunReport, maxBuckets: Int = 240
    ) -> (
        buckets: [TimeBucket], unit: String,
        scale: Double
    )? {
        let decoded = r.intervalHistograms(.endToEnd)
        let intervalSeconds = Double(max(r.intervalNanos, 1)) / 1e9
        let virtual = r.info.clock == "virtual"
        // Display unit: simulated minutes in virtual time, seconds of run time in real time.
        let scale = virtual ? 60.0 : 1.0
        let unit = virtual ? "simulated minutes" : "seconds of run time"
        let scheduled = r.info.durationSeconds.isFinite ? max(r.info.durationSeconds, 0) : 0
        let lastIndex = decoded.map(\.index).max() ?? -1
        let scheduledIntervals = Int((scheduled / intervalSeconds - 1e-9).rounded(.up))
        let count = max(lastIndex + 1, decoded.isEmpty ? 0 : scheduledIntervals)
        guard count > 0, count < 10_000_000 else { return nil }
        let group = max(1, (count + maxBuckets - 1) / maxBuckets)
        // Decoded histograms are used as they are (no copies); empty buckets share one empty histogram.
        let empty = LatencyRecorder.makeHistogram()
        var byIndex: [Int: Histogram<UInt64>] = [:]
        for d in decoded where d.index >= 0 {
            if byIndex[d.index] == nil { byIndex[d.index] = d.histogram } else { byIndex[d.index]!.add(d.histogram) }
        }
        var buckets: [TimeBucket] = []
        var first = 0
        while first < count {
            let last = min(first + group, count)
            var h: Histogram<UInt64>?
            var seconds = 0.0
            for index in first..<last {
                if let part = byIndex[index] {
                    if h == nil { h = part } else { h!.add(part) }
                }
                let start = Double(index) * intervalSeconds
                let covered = min(intervalSeconds, scheduled - start)
                // Past the scheduled end (events that started late) a whole interval is the denominator.
                seconds += covered > intervalSeconds * 0.05 ? covered : intervalSeconds
            }
            let start = Double(first) * intervalSeconds
            buckets.append(
                TimeBucket(
                    start: start / scale, end: Double(last) * intervalSeconds / scale,
                    histogram: h ?? empty,
                    seconds: seconds, afterScheduledEnd: start >= scheduled - 1e-9))
            first = last
        }
        return (buckets, unit, scale)
    }

    static func overTime(_ r: RunReport) -> String {
        var out = "<section>\n<h2>Over time</h2>\n"
        guard let (buckets, unit, scale) = timeBuckets(r) else {
            return out + "<figure><figcaption>Throughput over time</figcaption><p class=\"empty\">No interval "
                + "histograms in this report.</p></figure>\n<figure><figcaption>End-to-end latency over time"
                + "</figcaption><p class=\"empty\">No interval histograms in this report.</p></figure>\n</section>\n"
        }
        let intervalSeconds = Double(max(r.intervalNanos, 1)) / 1e9
        let grouped = buckets.count > 1 && (buckets[0].end - buckets[0].start) * scale > intervalSeconds * 1.5
        let perBar =
            grouped
            ? String(
                format: "each bar adds %.0f intervals of ",
                (buckets[0].end - buckets[0].start) * scale
                    / intervalSeconds) + intervalLabel(intervalSeconds)
            : "one bar per interval of \(intervalLabel(intervalSeconds))"
        let simulated = r.info.clock == "virtual" ? " simulated" : ""
        let by = r.info.clock == "virtual" ? "intended" : "start"
        out +=
            "<p class=\"note\">From the interval histograms (latency.hlog), by \(by) time: \(perBar). "
            + "Deliveries per\(simulated) second = endToEnd values in the interval ÷ its length. "
            + "Grey: intervals after the scheduled end.</p>\n"
        let scheduledEnd = r.info.durationSeconds.isFinite ? max(r.info.durationSeconds / scale, 0) : 0
        // Both charts share one time axis, so their intervals line up.
        let axisEnd = max(buckets.last?.end ?? 1, scheduledEnd)
        out += throughputChart(
            buckets, unit: unit, axisEnd: axisEnd, scheduledEnd: scheduledEnd,
            rateLabel: "deliveries per\(simulated) second")
        out += latencyOverTime(buckets, unit: unit, axisEnd: axisEnd)
        out += "</section>\n"
        return out
    }

    static func intervalLabel(_ seconds: Double) -> String {
        seconds >= 60 && seconds.truncatingRemainder(dividingBy: 60) == 0
            ? "\(Int(seconds / 60)) simulated minute\(seconds == 60 ? "" : "s")"
            : "\(HTMLText.short(seconds)) s"
    }

    static func timeAxis(
        _ svg: inout SVG, _ x: LinearScale, top: Double, bottom: Double, unit: String,
        height: Double
    ) {
        for tick in x.ticks {
            let px = x(tick)
            svg.line(px, bottom, px, bottom + 5, stroke: "#8a929e")
            svg.text(px, bottom + 19, HTMLText.short(tick), anchor: .middle, size: 12)
        }
        svg.line(x.from, bottom, x.to, bottom, stroke: "#8a929e")
        svg.line(x.from, top, x.from, bottom, stroke: "#8a929e")
        svg.text((x.from + x.to) / 2, height - 10, unit, anchor: .middle, size: 13, fill: "#1d2330")
    }

    static func throughputChart(
        _ buckets: [TimeBucket], unit: String, axisEnd: Double, scheduledEnd: Double,
        rateLabel: String
    ) -> String {
        let title = "Throughput over time"
        let width = 960.0
        let height = 300.0
        let left = 78.0
        let right = width - 24
        let top = 16.0
        let bottom = height - 52
        let rates = buckets.map { $0.seconds > 0 ? Double($0.histogram.totalCount) / $0.seconds : 0 }
        let end = buckets.last?.end ?? 1
        let x = LinearScale(low: 0, upTo: axisEnd, from: left, to: right, ticks: 10, exact: true)
        let y = LinearScale(low: 0, upTo: max(rates.max() ?? 0, 1), from: bottom, to: top, ticks: 5)
        var svg = SVG(width: width, height: height, title: title)
        for tick in y.ticks {
            let py = y(tick)
            svg.line(left, py, right, py, stroke: "#dde1e6")
            svg.text(left - 8, py + 4, HTMLText.compact(tick), anchor: .end, size: 12)
        }
        let barWidth = (x(buckets.first.map { $0.end - $0.start } ?? 1) - x(0))
        let gap = barWidth > 6 ? 1.5 : 0
        let labelBars = buckets.count <= 30 && barWidth >= 30
        for (b, rate) in zip(buckets, rates) {
            let x0 = x(b.start) + gap / 2
            let x1 = x(b.end) - gap / 2
            let tip =
                "\(HTMLText.short(b.start))–\(HTMLText.short(b.end)): \(Units.grouped(Int(rate.rounded())))/s"
                + " (\(Units.grouped(Int(b.histogram.totalCount))) values)"
            svg.rect(
                x0, y(rate), x1 - x0, bottom - y(rate), fill: b.afterScheduledEnd ? "#b8bec7" : "#3f8fc9",
                tooltip: tip)
            if labelBars && rate > 0 {
                svg.text((x0 + x1) / 2, y(rate) - 5, HTMLText.compact(rate), anchor: .middle, size: 11.5)
            }
        }
        if scheduledEnd > 0 && scheduledEnd < end - 1e-9 {
            let px = x(scheduledEnd)
            svg.line(px, top, px, bottom, stroke: "#5b6472", dash: "4 3")
            svg.text(px - 4, top + 12, "scheduled end", anchor: .end, size: 11.5, fill: "#5b6472")
        }
        timeAxis(&svg, x, top: top, bottom: bottom, unit: unit, height: height)
        svg.text(18, (top + bottom) / 2, rateLabel, anchor: .middle, size: 13, fill: "#1d2330", rotated: true)
        return "<figure>\n<figcaption>\(title)</figcaption>\n" + svg.text + "\n</figure>\n"
    }

    static func latencyOverTime(_ buckets: [TimeBucket], unit: String, axisEnd: Double) -> String {
        let title = "End-to-end latency over time"
        let width = 960.0
        let height = 320.0
        let left = 78.0
        let right = width - 24
        let top = 38.0
        let bottom = height - 52
        let lines: [(String, String, String?, Double?)] = [
            ("p50", "#009E73", nil, 50), ("p99", "#D55E00", nil, 99), ("p99.9", "#7b3294", nil, 99.9),
            ("max", "#8a929e", "5 4", nil),
        ]
        let filled = buckets.filter { $0.histogram.totalCount > 0 }
        var svg = SVG(width: width, height: height, title: title)
        guard !filled.isEmpty else {
            return "<figure>\n<figcaption>\(title)</figcaption>\n<p class=\"empty\">No endToEnd values in any "
                + "interval.</p>\n</figure>\n"
        }
        let lowest = filled.map { Double($0.histogram.valueAtPercentile(50)) }.min() ?? 1
        let highest = filled.map { Double($0.histogram.max) }.max() ?? 1
        let x = LinearScale(low: 0, upTo: axisEnd, from: left, to: right, ticks: 10, exact: true)
        let y = LogScale(covering: lowest, highest, from: bottom, to: top)
        for tick in y.ticks {
            let py = y(tick.value)
            svg.line(left, py, right, py, stroke: tick.labelled ? "#dde1e6" : "#eef0f3")
            if tick.labelled {
                svg.text(left - 8, py + 4, HTMLText.tickDuration(tick.value), anchor: .end, size: 12)
            }
        }
        var lx = left
        for (name, color, dash, percentile) in lines {
            // Steps: each interval's value held across the interval; gaps where it has no values.
            var points: [(Double, Double)?] = []
            for b in buckets {
                guard b.histogram.totalCount > 0 else {
                    points.append(nil)
                    continue
                }
                let v = percentile.map { b.histogram.valueAtPercentile($0) } ?? b.histogram.max
                let py = y(Double(max(v, 1)))
                points += [(x(b.start), py), (x(b.end), py)]
            }
            svg.path(points, stroke: color, width: dash == nil ? 2.2 : 1.5, dash: dash, tooltip: "endToEnd \(name)")
            svg.line(lx, 16, lx + 24, 16, stroke: color, width: 3, dash: dash)
            svg.text(lx + 30, 20, "endToEnd \(name)", size: 12.5, fill: "#1d2330")
            lx += 150
        }
        timeAxis(&svg, x, top: top, bottom: bottom, unit: unit, height: height)
        svg.text(
            18, (top + bottom) / 2, "latency (log scale)", anchor: .middle, size: 13, fill: "#1d2330",
            rotated: true)
        return "<figure>\n<figcaption>\(title)</figcaption>\n" + svg.text + "\n</figure>\n"
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

    static func bars(title: String, unit: String, rows: [(String, Int, String)], whole: Int) -> String {
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

    // MARK: Stage waterfall

    static func waterfall(_ r: RunReport) -> String {
        let title = "Stage waterfall"
        var out = "<section>\n<h2>\(title)</h2>\n"
        let present = stages.filter { r[$0].totalCount > 0 }
        guard !present.isEmpty else {
            return out + "<p class=\"empty\">No stage times recorded.</p>\n</section>\n"
        }
        let summaries = Dictionary(uniqueKeysWithValues: stages.map { ($0, LatencySummary(r[$0])) })
        let p50 = stages.map { Double(summaries[$0]!.p50) }
        let p99 = stages.map { Double(summaries[$0]!.p99) }
        let sum50 = p50.reduce(0, +)
        let sum99 = p99.reduce(0, +)
        let e2e = LatencySummary(r[.endToEnd])
        let e2e50 = Double(e2e.p50)

        let width = 960.0
        let labelRight = 150.0
        let left = 160.0
        let right = width - 90
        let rowHeight = 34.0
        // Stacked rows leave room under the bar for the labels of segments too narrow to hold them.
        let stride = rowHeight + 34
        let top = 10.0
        let axisY = top + 2 * stride + (e2e.count > 0 ? rowHeight + 16 : 0) + 2
        let height = axisY + 48
        // The end-to-end median for scale, unless it dwarfs the stages: then its bar is broken.
        let broken = e2e.count > 0 && e2e50 > 3 * sum99
        let x = LinearScale(low: 0, upTo: broken ? sum99 : max(sum99, e2e50), from: left, to: right, ticks: 8)
        var svg = SVG(width: width, height: height, title: title)
        for tick in x.ticks {
            let px = x(tick)
            svg.line(px, top - 4, px, axisY, stroke: "#eef0f3")
            svg.line(px, axisY, px, axisY + 5, stroke: "#8a929e")
            svg.text(px, axisY + 19, tick == 0 ? "0" : HTMLText.tickDuration(tick), anchor: .middle, size: 12)
        }
        svg.line(left, axisY, x.to, axisY, stroke: "#8a929e")
        svg.text((left + right) / 2, height - 8, "time (linear)", anchor: .middle, size: 13, fill: "#1d2330")

        func textWidth(_ s: String, size: Double) -> Double { Double(s.count) * size * 0.6 }
        func stacked(_ row: Int, _ label: String, _ values: [Double], _ which: String) {
            let y0 = top + Double(row) * stride
            svg.text(labelRight, y0 + rowHeight / 2 + 5, label, anchor: .end, size: 13, fill: "#1d2330", bold: true)
            var at = 0.0
            var belowEnd = -Double.infinity
            for (stage, v) in zip(stages, values) where v > 0 {
                let x0 = x(at)
                let x1 = x(at + v)
                let text = Units.duration(UInt64(v))
                svg.rect(
                    x0, y0, max(x1 - x0, 1), rowHeight, fill: color(stage),
                    tooltip: "\(stage.name) \(which): \(text)")
                let full = "\(stage.name) \(text)"
                if textWidth(full, size: 12) + 12 <= x1 - x0 {
                    svg.text(
                        (x0 + x1) / 2, y0 + rowHeight / 2 + 4.5, full, anchor: .middle, size: 12,
                        fill: textColor(on: stage))
                } else {
                    // Under the bar, left to right without overlap, with a tick up to the segment.
                    let mid = (x0 + x1) / 2
                    let w = textWidth(full, size: 11.5)
                    let start = max(mid - w / 2, belowEnd + 10, left)
                    svg.line(mid, y0 + rowHeight, mid, y0 + rowHeight + 5, stroke: color(stage), width: 2)
                    svg.rect(start, y0 + rowHeight + 9, 8, 8, fill: color(stage))
                    svg.text(start + 11, y0 + rowHeight + 17, full, size: 11.5, fill: "#3b4350")
                    belowEnd = start + 11 + w
                }
                at += v
            }
            svg.text(
                x(at) + 8, y0 + rowHeight / 2 + 4.5, "Σ " + Units.duration(UInt64(at)), size: 12.5,
                fill: "#1d2330", bold: true)
        }
        stacked(0, "stages, p50", p50, "p50")
        stacked(1, "stages, p99", p99, "p99")
        if e2e.count > 0 {
            let y0 = top + 2 * stride
            svg.text(
                labelRight, y0 + rowHeight / 2 + 5, "endToEnd, p50", anchor: .end, size: 13, fill: "#1d2330",
                bold: true)
            let x1 = broken ? right + 60 : x(e2e50)
            svg.rect(
                left, y0, max(x1 - left, 1), rowHeight, fill: color(.endToEnd),
                tooltip: "endToEnd p50: \(Units.duration(e2e.p50))")
            let share =
                sum50 > 0 && e2e50 > 0
                ? " · the stages' medians are \(HTMLText.percent(sum50, of: e2e50))"
                    + " of it" : ""
            if broken {
                // Two white slashes: the bar is not to scale.
                for dx in [0.0, 9.0] {
                    let bx = right + 12 + dx
                    svg.add(
                        "<path d=\"M\(HTMLText.coordinate(bx)) \(HTMLText.coordinate(y0 - 3)) L"
                            + "\(HTMLText.coordinate(bx + 8)) \(HTMLText.coordinate(y0 + rowHeight + 3))\" "
                            + "stroke=\"#ffffff\" stroke-width=\"4\"/>")
                }
                svg.text(
                    left + 10, y0 + rowHeight / 2 + 4.5,
                    "\(Units.duration(e2e.p50)) (bar broken: not to "
                        + "scale)\(share)", size: 12.5, fill: "#ffffff", bold: true)
            } else if x1 - left > 330 {
                svg.text(
                    left + 10, y0 + rowHeight / 2 + 4.5, "\(Units.duration(e2e.p50))\(share)", size: 12.5,
                    fill: "#ffffff", bold: true)
            } else {
                svg.text(
                    x1 + 8, y0 + rowHeight / 2 + 4.5, "\(Units.duration(e2e.p50))\(share)", size: 12.5,
                    fill: "#1d2330", bold: true)
            }
        }
        out +=
            "<p class=\"note\">Where the time of an update goes: each stage's median (and p99) service time, "
            + "stacked in pipeline order, against the end-to-end median. Percentiles do not add exactly; the "
            + "stacks show proportions. Time outside the stages is waiting: schedule lag and queueing.</p>\n"
        out += "<figure>\n" + svg.text + "\n</figure>\n"
        out +=
            "<table class=\"legend\">\n<thead><tr><th>stage</th><th class=\"n\">p50</th><th class=\"n\">share of "
            + "Σ p50</th><th class=\"n\">p99</th><th class=\"n\">share of Σ p99</th><th class=\"n\">samples</th>"
            + "</tr></thead>\n<tbody>\n"
        for (n, stage) in stages.enumerated() {
            let s = summaries[stage]!
            out += "<tr><td><i class=\"swatch\" style=\"background:\(color(stage))\"></i>\(stage.name)</td>"
            out +=
                s.count > 0
                ? "<td class=\"n\">\(Units.duration(s.p50))</td><td class=\"n\">\(HTMLText.percent(p50[n], of: sum50))"
                    + "</td><td class=\"n\">\(Units.duration(s.p99))</td><td class=\"n\">"
                    + "\(HTMLText.percent(p99[n], of: sum99))</td>"
                : "<td class=\"n\">–</td><td class=\"n\">–</td><td class=\"n\">–</td><td class=\"n\">–</td>"
            out += "<td class=\"n\">\(Units.grouped(Int(s.count)))</td></tr>\n"
        }
        out += "</tbody>\n</table>\n</section>\n"
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

    static let css = """
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
