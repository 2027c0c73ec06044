import FanoutCore
import FanoutMetrics
import Foundation

/// The stage waterfall: where the time of an update goes, stage by stage, against end to end.
extension HTMLReport {
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
}
