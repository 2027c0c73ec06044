import FanoutCore
import FanoutMetrics
import Foundation

/// Throughput and latency over the run, from the interval summaries made when each interval of
/// latency.hlog closed (a report's cost does not grow with the number of samples).
extension HTMLReport {
    /// One bar (or point) of the over-time charts: intervals `first..<first + count`. `count` is the
    /// sum of their values; the latencies are those of the interval with the highest p99 among them
    /// (percentiles of different intervals are never averaged).
    struct TimeBucket {
        var start: Double
        var end: Double
        var count: UInt64
        var worst: LatencySummary?
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
        let decoded = r.intervalSummaries(.endToEnd)
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
        var byIndex: [Int: LatencySummary] = [:]
        for d in decoded where d.index >= 0 { byIndex[d.index] = d.summary }
        var buckets: [TimeBucket] = []
        var first = 0
        while first < count {
            let last = min(first + group, count)
            var total: UInt64 = 0
            var worst: LatencySummary?
            var seconds = 0.0
            for index in first..<last {
                if let part = byIndex[index] {
                    total &+= part.count
                    if part.count > 0 && part.p99 >= (worst?.p99 ?? 0) { worst = part }
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
                    count: total, worst: worst,
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
            + (grouped ? "Latencies of a bar: its interval with the highest p99 (never averaged). " : "")
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

    /// Horizontal grid lines at the value axis' ticks, labelled on the left.
    static func valueGrid(
        _ svg: inout SVG, _ y: LinearScale, left: Double, right: Double, label: (Double) -> String
    ) {
        for tick in y.ticks {
            let py = y(tick)
            svg.line(left, py, right, py, stroke: "#dde1e6")
            svg.text(left - 8, py + 4, label(tick), anchor: .end, size: 12)
        }
    }

    static func throughputChart(
        _ buckets: [TimeBucket], unit: String, axisEnd: Double, scheduledEnd: Double,
        rateLabel: String
    ) -> String {
        let title = "Throughput over time"
        let frame = ChartFrame(height: 300, top: 16)
        let rates = buckets.map { $0.seconds > 0 ? Double($0.count) / $0.seconds : 0 }
        let end = buckets.last?.end ?? 1
        let x = LinearScale(low: 0, upTo: axisEnd, from: frame.left, to: frame.right, ticks: 10, exact: true)
        let y = LinearScale(low: 0, upTo: max(rates.max() ?? 0, 1), from: frame.bottom, to: frame.top, ticks: 5)
        var svg = SVG(width: frame.width, height: frame.height, title: title)
        valueGrid(&svg, y, left: frame.left, right: frame.right, label: HTMLText.compact)
        let barWidth = (x(buckets.first.map { $0.end - $0.start } ?? 1) - x(0))
        let gap = barWidth > 6 ? 1.5 : 0
        let labelBars = buckets.count <= 30 && barWidth >= 30
        for (b, rate) in zip(buckets, rates) {
            let x0 = x(b.start) + gap / 2
            let x1 = x(b.end) - gap / 2
            let tip =
                "\(HTMLText.short(b.start))–\(HTMLText.short(b.end)): \(Units.grouped(Int(rate.rounded())))/s"
                + " (\(Units.grouped(Int(b.count))) values)"
            svg.rect(
                x0, y(rate), x1 - x0, frame.bottom - y(rate), fill: b.afterScheduledEnd ? "#b8bec7" : "#3f8fc9",
                tooltip: tip)
            if labelBars && rate > 0 {
                svg.text((x0 + x1) / 2, y(rate) - 5, HTMLText.compact(rate), anchor: .middle, size: 11.5)
            }
        }
        if scheduledEnd > 0 && scheduledEnd < end - 1e-9 {
            let px = x(scheduledEnd)
            svg.line(px, frame.top, px, frame.bottom, stroke: "#5b6472", dash: "4 3")
            svg.text(px - 4, frame.top + 12, "scheduled end", anchor: .end, size: 11.5, fill: "#5b6472")
        }
        timeAxis(&svg, x, top: frame.top, bottom: frame.bottom, unit: unit, height: frame.height)
        svg.text(
            18, (frame.top + frame.bottom) / 2, rateLabel, anchor: .middle, size: 13, fill: "#1d2330", rotated: true)
        return "<figure>\n<figcaption>\(title)</figcaption>\n" + svg.text + "\n</figure>\n"
    }

    static func latencyOverTime(
        _ buckets: [TimeBucket], unit: String, axisEnd: Double, title: String = "End-to-end latency over time",
        metric: String = "endToEnd"
    ) -> String {
        let frame = ChartFrame(height: 320, top: 38)
        let lines: [(String, String, String?, KeyPath<LatencySummary, UInt64>)] = [
            ("p50", "#009E73", nil, \.p50), ("p99", "#D55E00", nil, \.p99), ("p99.9", "#7b3294", nil, \.p999),
            ("max", "#8a929e", "5 4", \.max),
        ]
        let filled = buckets.compactMap(\.worst)
        var svg = SVG(width: frame.width, height: frame.height, title: title)
        guard !filled.isEmpty else {
            return "<figure>\n<figcaption>\(title)</figcaption>\n<p class=\"empty\">No \(metric) values in any "
                + "interval.</p>\n</figure>\n"
        }
        let lowest = filled.map { Double($0.p50) }.min() ?? 1
        let highest = filled.map { Double($0.max) }.max() ?? 1
        let x = LinearScale(low: 0, upTo: axisEnd, from: frame.left, to: frame.right, ticks: 10, exact: true)
        let y = LogScale(covering: lowest, highest, from: frame.bottom, to: frame.top)
        for tick in y.ticks {
            let py = y(tick.value)
            svg.line(frame.left, py, frame.right, py, stroke: tick.labelled ? "#dde1e6" : "#eef0f3")
            if tick.labelled {
                svg.text(frame.left - 8, py + 4, HTMLText.tickDuration(tick.value), anchor: .end, size: 12)
            }
        }
        var lx = frame.left
        for (name, color, dash, value) in lines {
            // Steps: each interval's value held across the interval; gaps where it has no values.
            var points: [(Double, Double)?] = []
            for b in buckets {
                guard let worst = b.worst else {
                    points.append(nil)
                    continue
                }
                let v = worst[keyPath: value]
                let py = y(Double(max(v, 1)))
                points += [(x(b.start), py), (x(b.end), py)]
            }
            svg.path(points, stroke: color, width: dash == nil ? 2.2 : 1.5, dash: dash, tooltip: "\(metric) \(name)")
            svg.line(lx, 16, lx + 24, 16, stroke: color, width: 3, dash: dash)
            svg.text(lx + 30, 20, "\(metric) \(name)", size: 12.5, fill: "#1d2330")
            // 150 px a label, more for a long metric name (scheduleLag p99.9), so the labels never overlap.
            lx += max(150, Double("\(metric) \(name)".count) * 7.5 + 40)
        }
        timeAxis(&svg, x, top: frame.top, bottom: frame.bottom, unit: unit, height: frame.height)
        svg.text(
            18, (frame.top + frame.bottom) / 2, "latency (log scale)", anchor: .middle, size: 13, fill: "#1d2330",
            rotated: true)
        return "<figure>\n<figcaption>\(title)</figcaption>\n" + svg.text + "\n</figure>\n"
    }
}
