import Foundation

/// Where a chart of report.html draws: its canvas, 960 wide as every chart's, and the plot area inside it (the
/// canvas less the margins its axis labels, captions and legend take). One value, so that each chart names only
/// the margins it changes, in points of the canvas.
struct ChartFrame {
    let width = 960.0
    let height: Double
    let left: Double
    let right: Double
    let top: Double
    let bottom: Double

    /// `rightMargin` and `bottomMargin` are counted from the canvas's right and bottom edges.
    init(height: Double, left: Double = 78, rightMargin: Double = 24, top: Double, bottomMargin: Double = 52) {
        self.height = height
        self.left = left
        right = width - rightMargin
        self.top = top
        bottom = height - bottomMargin
    }
}

/// Inline SVG, built as text: the few shapes the report's charts draw. Every coordinate goes
/// through `HTMLText.coordinate`, so a degenerate input (no values, one interval) never puts NaN
/// or infinity into the document.
struct SVG {
    let width: Double
    let height: Double
    let title: String
    private var parts: [String] = []

    init(width: Double, height: Double, title: String) {
        self.width = width
        self.height = height
        self.title = title
    }

    var text: String {
        let w = HTMLText.coordinate(width)
        let h = HTMLText.coordinate(height)
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(w) \(h)\" width=\"\(w)\" "
            + "height=\"\(h)\" role=\"img\" aria-label=\"\(HTMLText.escape(title))\">\n"
            + "<title>\(HTMLText.escape(title))</title>\n" + parts.joined(separator: "\n") + "\n</svg>"
    }

    mutating func add(_ element: String) { parts.append(element) }

    mutating func line(
        _ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, stroke: String,
        width: Double = 1, dash: String? = nil
    ) {
        let c = HTMLText.coordinate
        let dashed = dash.map { " stroke-dasharray=\"\($0)\"" } ?? ""
        add(
            "<line x1=\"\(c(x1))\" y1=\"\(c(y1))\" x2=\"\(c(x2))\" y2=\"\(c(y2))\" stroke=\"\(stroke)\" "
                + "stroke-width=\"\(c(width))\"\(dashed)/>")
    }

    mutating func rect(_ x: Double, _ y: Double, _ w: Double, _ h: Double, fill: String, tooltip: String? = nil) {
        let c = HTMLText.coordinate
        let open =
            "<rect x=\"\(c(x))\" y=\"\(c(y))\" width=\"\(c(max(w, 0)))\" height=\"\(c(max(h, 0)))\" "
            + "fill=\"\(fill)\""
        if let tooltip {
            add(open + "><title>\(HTMLText.escape(tooltip))</title></rect>")
        } else {
            add(open + "/>")
        }
    }

    enum Anchor: String { case start, middle, end }

    mutating func text(
        _ x: Double, _ y: Double, _ s: String, anchor: Anchor = .start, size: Double = 12,
        fill: String = "#3b4350", bold: Bool = false, rotated: Bool = false
    ) {
        let c = HTMLText.coordinate
        let weight = bold ? " font-weight=\"600\"" : ""
        let rotate = rotated ? " transform=\"rotate(-90 \(c(x)) \(c(y)))\"" : ""
        add(
            "<text x=\"\(c(x))\" y=\"\(c(y))\" font-size=\"\(c(size))\" fill=\"\(fill)\" "
                + "text-anchor=\"\(anchor.rawValue)\"\(weight)\(rotate)>\(HTMLText.escape(s))</text>")
    }

    /// A polyline through `points`, broken where a point is nil.
    mutating func path(
        _ points: [(Double, Double)?], stroke: String, width: Double = 2, dash: String? = nil,
        tooltip: String? = nil
    ) {
        let c = HTMLText.coordinate
        var d: [String] = []
        var previous: String?
        var penDown = false
        for point in points {
            guard let (x, y) = point else {
                penDown = false
                continue
            }
            let xy = "\(c(x)) \(c(y))"
            if penDown && xy == previous { continue }
            d.append((penDown ? "L" : "M") + xy)
            previous = xy
            penDown = true
        }
        guard !d.isEmpty else { return }
        let dashed = dash.map { " stroke-dasharray=\"\($0)\"" } ?? ""
        let body =
            "<path d=\"\(d.joined(separator: " "))\" fill=\"none\" stroke=\"\(stroke)\" "
            + "stroke-width=\"\(c(width))\" stroke-linejoin=\"round\" stroke-linecap=\"round\"\(dashed)"
        if let tooltip {
            add(body + "><title>\(HTMLText.escape(tooltip))</title></path>")
        } else {
            add(body + "/>")
        }
    }
}

/// A logarithmic axis: values (clamped into `low...high`) to pixels.
struct LogScale {
    let low: Double
    let high: Double
    let from: Double
    let to: Double

    /// Whole decades around `minimum...maximum` (at least one decade; values below 1 count as 1).
    init(covering minimum: Double, _ maximum: Double, from: Double, to: Double) {
        let lo = max(minimum.isFinite ? minimum : 1, 1)
        let hi = max(maximum.isFinite ? maximum : 1, lo)
        var low = pow(10, (log10(lo) + 1e-9).rounded(.down))
        var high = pow(10, (log10(hi) - 1e-9).rounded(.up))
        if high <= low { high = low * 10 }
        if high / low < 100 && low >= 10 {
            low /= 10
        } else if high / low < 100 {
            high *= 10
        }
        self.init(low: low, high: high, from: from, to: to)
    }

    init(low: Double, high: Double, from: Double, to: Double) {
        self.low = low
        self.high = high
        self.from = from
        self.to = to
    }

    func callAsFunction(_ v: Double) -> Double {
        let l0 = log10(low)
        let l1 = log10(high)
        guard l1 > l0 else { return from }
        let lv = log10(min(max(v.isNaN ? low : v, low), high))
        return from + (lv - l0) / (l1 - l0) * (to - from)
    }

    /// Decades, and 2× and 5× within them when the axis spans few decades: value, labelled.
    var ticks: [(value: Double, labelled: Bool)] {
        let decades = Int(log10(high / low).rounded())
        var out: [(Double, Bool)] = []
        var v = low
        for _ in 0...max(decades, 0) {
            out.append((v, true))
            if v < high * 0.999 {
                for m in [2.0, 5.0] where v * m < high { out.append((v * m, decades <= 3)) }
            }
            v *= 10
        }
        return out
    }
}

/// A linear axis from 0 (or `low`) to a rounded-up maximum, with 1-2-5 ticks.
struct LinearScale {
    let low: Double
    let high: Double
    let from: Double
    let to: Double
    let step: Double

    /// `exact`: the axis ends at `maximum` (a time axis), not at the next tick above it.
    init(low: Double = 0, upTo maximum: Double, from: Double, to: Double, ticks: Int = 5, exact: Bool = false) {
        let span = maximum.isFinite && maximum > low ? maximum - low : 1
        let step = LinearScale.niceStep(span, ticks: ticks)
        self.low = low
        self.high = exact ? low + span : low + (span / step - 1e-9).rounded(.up) * step
        self.from = from
        self.to = to
        self.step = step
    }

    static func niceStep(_ span: Double, ticks: Int) -> Double {
        guard span > 0, span.isFinite, ticks > 0 else { return 1 }
        let raw = span / Double(ticks)
        let magnitude = pow(10, log10(raw).rounded(.down))
        let n = raw / magnitude
        return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * magnitude
    }

    func callAsFunction(_ v: Double) -> Double {
        guard high > low, v.isFinite else { return from }
        return from + (v - low) / (high - low) * (to - from)
    }

    var ticks: [Double] {
        guard step > 0, high > low else { return [low] }
        let n = Int(((high - low) / step + 1e-9).rounded(.down))
        return (0...min(n, 1000)).map { low + Double($0) * step }
    }
}

/// Escaping and the number formats of the page.
public enum HTMLText {
    /// Text for HTML content and attribute values.
    public static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default:
                // Control characters other than tab and newline have no business on the page.
                if c.value < 0x20 && c != "\t" && c != "\n" || c.value == 0x7F {
                    out += " "
                } else {
                    out.unicodeScalars.append(c)
                }
            }
        }
        return out
    }

    /// An SVG coordinate: one decimal; never NaN or infinity.
    static func coordinate(_ v: Double) -> String {
        guard v.isFinite else { return "0" }
        let clamped = min(max(v, -1e6), 1e6)
        let s = String(format: "%.1f", clamped)
        return s == "-0.0" ? "0.0" : s
    }

    /// A tick label for nanoseconds: 500 ns, 2 µs, 10 ms, 1 s.
    static func tickDuration(_ nanos: Double) -> String {
        switch nanos {
        case ..<1e3: "\(short(nanos)) ns"
        case ..<1e6: "\(short(nanos / 1e3)) µs"
        case ..<1e9: "\(short(nanos / 1e6)) ms"
        default: "\(short(nanos / 1e9)) s"
        }
    }

    /// Up to 3 significant digits, trailing zeros dropped: 2, 2.5, 0.25, 150.
    static func short(_ v: Double) -> String {
        guard v.isFinite else { return "0" }
        var s = String(format: v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v)
        if s.contains(".") {
            while s.hasSuffix("0") { s.removeLast() }
            if s.hasSuffix(".") { s.removeLast() }
        }
        return s
    }

    /// A count in a few characters: 950, 1.2k, 205k, 3.4M.
    static func compact(_ v: Double) -> String {
        guard v.isFinite, v > 0 else { return "0" }
        for (scale, suffix) in [(1e9, "G"), (1e6, "M"), (1e3, "k")] where v >= scale * 0.9995 {
            return short(v / scale) + suffix
        }
        return short(v)
    }

    /// A share in percent, with more decimals for small shares.
    public static func percent(_ part: Double, of whole: Double) -> String {
        guard whole > 0, part.isFinite, whole.isFinite else { return "–" }
        let p = part * 100 / whole
        if p > 0 && p < 0.01 { return "<0.01%" }
        return String(format: "%.2f%%", p)
    }
}
