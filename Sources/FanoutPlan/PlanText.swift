import FanoutReport
import Foundation

/// Numbers as people read them, for the progress lines and the reports.
public enum PlanText {
    /// 5 ms, 250 µs, 1.5 s, 812 ns (trailing zeros dropped).
    public static func duration(_ nanos: UInt64) -> String {
        let v = Double(nanos)
        let (scaled, unit): (Double, String) =
            v < 1e3 ? (v, "ns") : v < 1e6 ? (v / 1e3, "µs") : v < 1e9 ? (v / 1e6, "ms") : (v / 1e9, "s")
        return trimmed(scaled, digits: scaled < 10 ? 2 : scaled < 100 ? 1 : 0) + " " + unit
    }

    static func trimmed(_ v: Double, digits: Int) -> String {
        var s = String(format: "%.\(digits)f", v)
        if s.contains(".") {
            while s.hasSuffix("0") { s.removeLast() }
            if s.hasSuffix(".") { s.removeLast() }
        }
        return s
    }

    public static func fixed(_ v: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", v) }

    public static func percent(_ share: Double) -> String {
        let p = share * 100
        return trimmed(p, digits: p == 0 ? 0 : abs(p) < 1 ? 3 : 1) + "%"
    }

    /// A rate factor: ×4, ×5.66, ×0.125.
    public static func factor(_ f: Double) -> String { trimmed(f, digits: f < 10 ? 3 : 2) }

    /// 1234567 → 1.23M; 45600 → 45.6k.
    public static func rate(_ v: Double) -> String {
        switch abs(v) {
        case 1e9...: return trimmed(v / 1e9, digits: 2) + "G"
        case 1e6...: return trimmed(v / 1e6, digits: 2) + "M"
        case 1e3...: return trimmed(v / 1e3, digits: 1) + "k"
        default: return trimmed(v, digits: 1)
        }
    }

    public static func list(_ values: [Int]) -> String {
        values.map(String.init).joined(separator: ", ")
    }

    /// One line per step on stderr.
    public static func progress(_ s: Step, index: Int, criteria: PlanCriteria) -> String {
        var parts = [
            (s.backend == nil ? "plan \(s.workers)w" : "plan backend") + " step \(index)" + (s.repeated ? " (repeat)" : ""),
            "×\(factor(s.factor))",
            "\(rate(s.offeredEventsPerSecond)) events/s",
            "\(trimmed(s.scheduledSeconds, digits: 1)) s",
            "\(rate(s.deliveriesPerSecond)) deliveries/s",
        ]
        for (k, slo) in criteria.slos.enumerated() {
            parts.append("\(slo.name) \(duration(s.sloValues[k]))")
        }
        if let b = s.backend {
            parts.append("missing \(b[.missing]) of \(b.expected)")
            parts.append("stale \(b[.staleAtEnd])")
            parts.append("trigger lag p99 \(duration(s.scheduleLag.p99))")
        } else {
            parts.append("lag p99 \(duration(s.scheduleLag.p99))")
            parts.append("achieved \(percent(min(s.achievedRatio, 1)))")
        }
        if let load = s.loadAverage { parts.append("load \(fixed(load, 1))") }
        parts.append(s.passed ? "pass" : "FAIL (" + s.failures.joined(separator: "; ") + ")")
        return parts.joined(separator: "  ")
    }
}
