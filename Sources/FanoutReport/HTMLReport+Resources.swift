import FanoutMetrics
import Foundation

/// Resident memory and open descriptors over the run (sampled every 10 s while the workers run),
/// with the soak's verdict: the band is ±5% of the level after warm-up.
extension HTMLReport {
    static func resources(_ r: RunReport) -> String {
        guard r.resources.count >= 3, let trend = ResourceTrend(r.resources) else { return "" }
        let mib = { (b: Int) in String(format: "%.1f MiB", Double(b) / 1_048_576) }
        let verdict = { (flat: Bool) in flat ? "flat" : "not flat" }
        var out = "<section>\n<h2>Resources over time</h2>\n"
        out +=
            "<p class=\"note\">Sampled every \(Int(ResourceSample.intervalSeconds)) s while the workers run. "
            + "Resident memory: \(verdict(trend.rssFlat)), \(mib(trend.rssFirstAfterWarmUp)) after warm-up "
            + "(the first 20% of the run), \(mib(trend.rssLast)) last, \(mib(trend.rssMax)) max; the band is "
            + "±5% of the level after warm-up. Open file descriptors: \(verdict(trend.fdsFlat)), "
            + "\(trend.fdsFirst) after warm-up, \(trend.fdsLast) last, \(trend.fdsMax) max.</p>\n"
        out += residentChart(r.resources, level: Double(trend.rssFirstAfterWarmUp))
        out += "</section>\n"
        return out
    }

    static func residentChart(_ samples: [ResourceSample], level: Double) -> String {
        let title = "Resident memory over time"
        let frame = ChartFrame(height: 260, top: 16)
        let mib = samples.map { Double($0.residentBytes) / 1_048_576 }
        let levelMiB = level / 1_048_576
        let end = samples.last?.elapsedSeconds ?? 1
        let x = LinearScale(low: 0, upTo: max(end, 1), from: frame.left, to: frame.right, ticks: 10, exact: true)
        let y = LinearScale(
            low: 0, upTo: max(mib.max() ?? 1, levelMiB * 1.05, 1), from: frame.bottom, to: frame.top, ticks: 5)
        var svg = SVG(width: frame.width, height: frame.height, title: title)
        valueGrid(&svg, y, left: frame.left, right: frame.right, label: HTMLText.short)
        let warmUp = end * 0.2
        svg.rect(
            x(warmUp), y(levelMiB * 1.05), x(end) - x(warmUp), y(levelMiB * 0.95) - y(levelMiB * 1.05),
            fill: "#d8ebd9", tooltip: "±5% of \(String(format: "%.1f", levelMiB)) MiB")
        svg.line(x(warmUp), frame.top, x(warmUp), frame.bottom, stroke: "#5b6472", dash: "4 3")
        svg.text(x(warmUp) + 4, frame.top + 12, "end of warm-up", size: 11.5, fill: "#5b6472")
        svg.path(
            zip(samples, mib).map { (x($0.elapsedSeconds), y($1)) }, stroke: "#3f8fc9",
            tooltip: "resident memory (MiB)")
        timeAxis(&svg, x, top: frame.top, bottom: frame.bottom, unit: "seconds of run time", height: frame.height)
        svg.text(18, (frame.top + frame.bottom) / 2, "MiB", anchor: .middle, size: 13, fill: "#1d2330", rotated: true)
        return "<figure>\n<figcaption>\(title)</figcaption>\n" + svg.text + "\n</figure>\n"
    }
}
