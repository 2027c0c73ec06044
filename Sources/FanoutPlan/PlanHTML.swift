import FanoutReport
import Foundation

/// `plan.html`: one self-contained page (inline SVG and CSS, no script): the saturation search
/// (SLO metric against delivered rate, the SLO line, the knees) and the scaling curve (measured
/// knees, the fitted USL, the target).
public enum PlanHTML {
    /// The plan page's own stylesheet (tables of steps, two charts), in the one page skeleton.
    static let css = """
        body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
        table{border-collapse:collapse;margin:.5em 0 1em;font-size:12px}
        td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:last-child{text-align:left}
        th{background:#f3f3f3}.warn{color:#a40}.note{color:#666;font-size:12px;margin:.2em 0}
        svg{background:#fff;border:1px solid #ddd}
        svg text{font:11px system-ui,sans-serif}
        footer{color:#666;font-size:12px;margin-top:2em}
        """

    static let colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]

    public static func text(_ plan: CapacityPlan) -> String {
        let s = plan.settings
        var body: [String] = []
        body.append("<h1>fanout plan: \(esc(s.scenario.name))</h1>")
        body.append("<p>\(inline(PlanReport.headline(plan)))</p>")
        body.append("<h2>Saturation search</h2>")
        body.append(
            "<p>Each point is one step: delivered rate against the first SLO's metric "
                + "(log scale). Filled: the step passed every criterion; hollow: it failed. Dashed line: the SLO; "
                + "vertical lines: the knee of each worker count.</p>")
        body.append(searchChart(plan))
        for w in plan.searches {
            body.append("<h3>\(w.workers) worker\(w.workers == 1 ? "" : "s")</h3><p>\(esc(w.outcome.conclusion))</p>")
            body.append(table(PlanReport.stepHeader(s.criteria, backend: s.backend != nil), PlanReport.stepRows(w)))
            for n in PlanReport.stepNotes(w, s.criteria) { body.append("<p class=note>\(esc(n))</p>") }
        }
        body.append("<h2>Scaling</h2>")
        if s.backend != nil {
            body.append("<p>Not measured: the backend's own scaling is not fanout's to vary.</p>")
        } else if let fit = plan.fit {
            let m = fit.model
            body.append(
                "<p>USL X(N) = λN / (1 + σ(N−1) + κN(N−1)): λ = \(PlanText.rate(m.lambda)) "
                    + "deliveries/s, "
                    + "σ = \(String(format: "%.4g", m.sigma)), κ = \(String(format: "%.4g", m.kappa)), "
                    + "R² = \(fit.rSquared.map { String(format: "%.4f", $0) } ?? "n/a"), N* = "
                    + "\(m.peakWorkers.map { PlanText.fixed($0, 1) } ?? "∞"); limited by "
                    + "\(m.dominantTerm(at: Double(max(fit.distinctWorkers, 2)))).</p>")
            if fit.underdetermined { body.append("<p class=warn><b>Underdetermined:</b> \(esc(fit.note)).</p>") }
            body.append(scalingChart(plan, fit))
        } else {
            body.append("<p>No knee at any worker count: nothing to fit.</p>")
        }
        if let p = plan.prediction {
            body.append(
                "<h2>Prediction</h2><p>\(inline(PlanReport.predictionText(p)))</p><ul>"
                    + p.notes.map { "<li>\(esc($0))</li>" }.joined() + "</ul>")
        }
        body.append("<h2>Method and caveats</h2><ul>")
        body.append("<li>\(inline(PlanReport.criteriaText(plan)))</li>")
        if let b = s.backend { body.append("<li>\(inline(PlanReport.backendMethod(b))).</li>") }
        body.append(
            "<li>Steady scenario: \(esc(PlanReport.steadyText(plan.steadyScenario.clock))); factor 1 = "
                + "\(PlanText.fixed(plan.baseEventsPerSecond, 1)) events/s.</li>")
        body.append("<li>\(esc(PlanReport.stepRule(plan))).</li>")
        if s.backend == nil { body.append("<li>\(esc(PlanReport.lossDefinition)).</li>") }
        body.append("<li>Little's law: \(esc(PlanReport.littleText)).</li>")
        for n in PlanReport.notes(plan) { body.append("<li>\(esc(n))</li>") }
        body.append("</ul>")
        return HTMLPage.start(title: "fanout plan: \(s.scenario.name)", css: css) + body.joined(separator: "\n")
            + "\n" + HTMLPage.end(maker: "fanout plan", histograms: false)
    }

    // MARK: Charts

    static let width = 860.0
    static let height = 380.0
    static let left = 80.0
    static let right = 20.0
    static let top = 20.0
    static let bottom = 50.0

    struct Axis {
        var lo: Double
        var hi: Double
        var log: Bool
        var from: Double
        var to: Double

        func map(_ v: Double) -> Double {
            let t: Double
            if log {
                let l = Foundation.log10(lo)
                t = (Foundation.log10(max(v, lo)) - l) / (Foundation.log10(hi) - l)
            } else {
                t = (v - lo) / (hi - lo)
            }
            return from + (to - from) * min(max(t, -0.02), 1.02)
        }

        func ticks() -> [Double] {
            if log {
                var out: [Double] = []
                var v = pow(10, floor(Foundation.log10(lo)))
                while v <= hi * 1.0001 {
                    for m in [1.0, 2, 5] where v * m >= lo * 0.9999 && v * m <= hi * 1.0001 { out.append(v * m) }
                    v *= 10
                }
                return out
            }
            let raw = (hi - lo) / 6
            let p = pow(10, floor(Foundation.log10(raw)))
            let step = [1.0, 2, 2.5, 5, 10].map { $0 * p }.first { $0 >= raw } ?? raw
            var out: [Double] = []
            var v = ceil(lo / step) * step
            while v <= hi + step * 1e-9 {
                out.append(v)
                v += step
            }
            return out
        }
    }

    /// A tick's grid line, from (x1, y1) to (x2, y2), and its label at (x, y) anchored as `anchor` says.
    static func gridLine(
        _ line: (x1: Double, x2: Double, y1: Double, y2: Double), label: (x: Double, y: Double, anchor: String),
        _ text: String
    ) -> String {
        "<line x1=\"\(f(line.x1))\" x2=\"\(f(line.x2))\" y1=\"\(f(line.y1))\" y2=\"\(f(line.y2))\" "
            + "stroke=\"#eee\"/><text x=\"\(f(label.x))\" y=\"\(f(label.y))\" text-anchor=\"\(label.anchor)\">"
            + "\(esc(text))</text>"
    }

    /// A vertical line at `px` over the plot's height (dashed as `dash` says), and its label (HTML) 4 px right of it
    /// at `label.y`, in `label.fill`.
    static func verticalMarker(
        _ px: Double, stroke: String, dash: String?, label: (y: Double, fill: String), _ html: String
    ) -> String {
        "<line x1=\"\(f(px))\" x2=\"\(f(px))\" y1=\"\(f(top))\" y2=\"\(f(height - bottom))\" stroke=\"\(stroke)\""
            + (dash.map { " stroke-dasharray=\"\($0)\"" } ?? "") + "/><text x=\"\(f(px + 4))\" y=\"\(f(label.y))\" "
            + "fill=\"\(label.fill)\">\(html)</text>"
    }

    static func frame(
        _ x: Axis, _ y: Axis, xLabel: String, yLabel: String, xText: (Double) -> String,
        yText: (Double) -> String
    ) -> [String] {
        var out: [String] = []
        for t in y.ticks() {
            let py = y.map(t)
            out.append(gridLine((left, width - right, py, py), label: (left - 6, py + 4, "end"), yText(t)))
        }
        for t in x.ticks() {
            let px = x.map(t)
            out.append(gridLine((px, px, top, height - bottom), label: (px, height - bottom + 16, "middle"), xText(t)))
        }
        out.append(
            "<rect x=\"\(f(left))\" y=\"\(f(top))\" width=\"\(f(width - left - right))\" "
                + "height=\"\(f(height - top - bottom))\" fill=\"none\" stroke=\"#999\"/>")
        out.append(
            "<text x=\"\(f((left + width - right) / 2))\" y=\"\(f(height - 10))\" text-anchor=\"middle\">"
                + "\(esc(xLabel))</text>")
        out.append(
            "<text transform=\"translate(16 \(f((top + height - bottom) / 2))) rotate(-90)\" "
                + "text-anchor=\"middle\">\(esc(yLabel))</text>")
        return out
    }

    static func searchChart(_ plan: CapacityPlan) -> String {
        guard let slo = plan.settings.criteria.slos.first else { return "" }
        let steps = plan.searches.flatMap(\.steps)
        guard !steps.isEmpty else { return "" }
        let xs = steps.map(\.deliveriesPerSecond)
        let ys = steps.map { Double(max($0.sloValues[0], 1)) } + [Double(slo.limitNanos)]
        let x = Axis(lo: 0, hi: (xs.max() ?? 1) * 1.08, log: false, from: left, to: width - right)
        let y = Axis(
            lo: max((ys.min() ?? 1) / 2, 1), hi: (ys.max() ?? 2) * 2, log: true, from: height - bottom,
            to: top)
        var out = frame(
            x, y, xLabel: "deliveries/s", yLabel: "\(slo.name) (log)", xText: PlanText.rate,
            yText: { PlanText.duration(UInt64($0)) })
        let ly = y.map(Double(slo.limitNanos))
        out.append(
            "<line x1=\"\(f(left))\" x2=\"\(f(width - right))\" y1=\"\(f(ly))\" y2=\"\(f(ly))\" "
                + "stroke=\"#000\" stroke-dasharray=\"6 4\"/><text x=\"\(f(width - right - 4))\" y=\"\(f(ly - 5))\" "
                + "text-anchor=\"end\">SLO \(esc(slo.description))</text>")
        for (k, w) in plan.searches.enumerated() {
            let color = colors[k % colors.count]
            let sorted = w.steps.sorted { $0.factor < $1.factor }
            let path = sorted.map { "\(f(x.map($0.deliveriesPerSecond))),\(f(y.map(Double(max($0.sloValues[0], 1)))))" }
            out.append(
                "<polyline points=\"\(path.joined(separator: " "))\" fill=\"none\" stroke=\"\(color)\" "
                    + "stroke-opacity=\".35\"/>")
            for step in w.steps {
                let px = x.map(step.deliveriesPerSecond)
                let py = y.map(Double(max(step.sloValues[0], 1)))
                out.append(
                    "<circle cx=\"\(f(px))\" cy=\"\(f(py))\" r=\"4.5\" stroke=\"\(color)\" stroke-width=\"1.5\" "
                        + "fill=\"\(step.passed ? color : "#fff")\"><title>"
                        + "\(w.workers)w ×\(PlanText.factor(step.factor)): "
                        + "\(esc(step.passed ? "pass" : step.failures.joined(separator: "; ")))</title></circle>")
            }
            if let knee = w.knee {
                let px = x.map(knee.deliveriesPerSecond)
                out.append(
                    verticalMarker(
                        px, stroke: color, dash: "3 3", label: (top + 14 + Double(k) * 14, color),
                        "knee \(w.workers)w: \(PlanText.rate(knee.deliveriesPerSecond))/s"))
            }
        }
        return svg(out)
    }

    static func scalingChart(_ plan: CapacityPlan, _ fit: USLFit) -> String {
        let m = fit.model
        let points = plan.points
        let maxMeasured = Double(points.map(\.workers).max() ?? 1)
        var nMax = max(maxMeasured + 1, 4)
        if let need = plan.prediction?.workersNeeded { nMax = max(nMax, min(Double(need) * 1.25, 256)) }
        if let peak = m.peakWorkers, peak < 256 { nMax = max(nMax, min(peak * 1.3, 256)) }
        if plan.prediction?.beyondPeak == true { nMax = max(nMax, 8) }
        nMax = nMax.rounded(.up)
        let curve = stride(from: 1.0, through: nMax, by: max(nMax / 200, 0.05)).map { ($0, m.throughput($0)) }
        var yMax = max(curve.map(\.1).max() ?? 1, points.map(\.deliveriesPerSecond).max() ?? 1)
        if let r = plan.prediction?.requiredPerSecond { yMax = max(yMax, r) }
        let x = Axis(lo: 0, hi: nMax, log: false, from: left, to: width - right)
        let y = Axis(lo: 0, hi: yMax * 1.1, log: false, from: height - bottom, to: top)
        var out = frame(
            x, y, xLabel: "workers (cores)", yLabel: "knee deliveries/s",
            xText: { PlanText.trimmed($0, digits: 1) }, yText: PlanText.rate)
        out.append(
            verticalMarker(
                x.map(maxMeasured), stroke: "#bbb", dash: nil, label: (height - bottom - 6, "#888"),
                "measured ← → extrapolated"))
        let path = curve.map { "\(f(x.map($0.0))),\(f(y.map($0.1)))" }.joined(separator: " ")
        out.append("<polyline points=\"\(path)\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>")
        if m.peakWorkers == nil, let ceiling = m.maxThroughput, ceiling <= yMax * 1.1 {
            let cy = y.map(ceiling)
            out.append(
                "<line x1=\"\(f(left))\" x2=\"\(f(width - right))\" y1=\"\(f(cy))\" y2=\"\(f(cy))\" "
                    + "stroke=\"#1f77b4\" stroke-dasharray=\"2 4\"/><text x=\"\(f(width - right - 6))\" "
                    + "y=\"\(f(cy - 5))\" text-anchor=\"end\" fill=\"#1f77b4\">ceiling λ/σ = "
                    + "\(PlanText.rate(ceiling))/s (κ = 0)</text>")
        }
        if let peak = m.peakWorkers, peak <= nMax {
            out.append(
                verticalMarker(
                    x.map(peak), stroke: "#1f77b4", dash: "2 4", label: (top + 28, "#1f77b4"),
                    "N* = \(PlanText.fixed(peak, 1))"))
        }
        if let p = plan.prediction {
            let ry = y.map(p.requiredPerSecond)
            out.append(
                "<line x1=\"\(f(left))\" x2=\"\(f(width - right))\" y1=\"\(f(ry))\" y2=\"\(f(ry))\" "
                    + "stroke=\"#d62728\" stroke-dasharray=\"6 4\"/><text x=\"\(f(left + 6))\" y=\"\(f(ry - 5))\" "
                    + "fill=\"#d62728\">target \(esc(p.target.description)): \(PlanText.rate(p.requiredPerSecond))/s"
                    + "</text>")
            if let n = p.workersNeeded, Double(n) <= nMax {
                out.append(
                    "<circle cx=\"\(f(x.map(Double(n))))\" cy=\"\(f(y.map(m.throughput(Double(n)))))\" r=\"5\" "
                        + "fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\"><title>\(n) workers</title></circle>")
            }
        }
        let best = PlanReport.bestKnee(plan)?.workers
        for p in points {
            let px = x.map(Double(p.workers))
            let py = y.map(p.deliveriesPerSecond)
            out.append(
                "<circle cx=\"\(f(px))\" cy=\"\(f(py))\" r=\"\(p.workers == best ? 6 : 4.5)\" fill=\"#222\">"
                    + "<title>\(p.workers) workers: knee \(PlanText.rate(p.deliveriesPerSecond))/s</title></circle>")
            out.append("<text x=\"\(f(px + 8))\" y=\"\(f(py + 4))\">\(PlanText.rate(p.deliveriesPerSecond))</text>")
        }
        return svg(out)
    }

    static func svg(_ parts: [String]) -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(f(width))\" height=\"\(f(height))\" "
            + "viewBox=\"0 0 \(f(width)) \(f(height))\">\n" + parts.joined(separator: "\n") + "\n</svg>"
    }

    static func table(_ header: [String], _ rows: [[String]]) -> String {
        "<table><tr>" + header.map { "<th>\(esc($0))</th>" }.joined() + "</tr>"
            + rows.map { "<tr>" + $0.map { "<td>\(esc($0))</td>" }.joined() + "</tr>" }.joined() + "</table>"
    }

    static func f(_ v: Double) -> String { String(format: "%.1f", v) }

    static func esc(_ s: String) -> String { HTMLText.escape(s) }

    /// Markdown's **bold** and `code` as HTML, the rest escaped.
    static func inline(_ s: String) -> String {
        var out = ""
        var bold = false
        var code = false
        var chars = Array(esc(s))
        var i = 0
        while i < chars.count {
            if chars[i] == "*", i + 1 < chars.count, chars[i + 1] == "*" {
                out += bold ? "</b>" : "<b>"
                bold.toggle()
                i += 2
                continue
            }
            if chars[i] == "`" {
                out += code ? "</code>" : "<code>"
                code.toggle()
                i += 1
                continue
            }
            out.append(chars[i])
            i += 1
        }
        chars.removeAll()
        return out
    }
}
