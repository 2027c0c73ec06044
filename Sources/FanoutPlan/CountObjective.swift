import Foundation

/// A bound on a count of the end-to-end judge (a plan of the user's backend, `fanout plan --trigger`):
/// `missing==0`, `staleAtEnd<=10`, `missing<=0.1%` (a share of the expected deliveries).
public struct CountObjective: Sendable, Equatable, CustomStringConvertible {
    /// The counts of `fanout serve --expect-events` (docs/INGEST.md §5) a backend plan can bound.
    public enum Name: String, CaseIterable, Sendable {
        case missing, staleAtEnd, duplicate, reordered, uncorrelated, wrongContent, wrongKind
    }

    public var name: Name
    /// The highest count allowed, or (`share`) the highest share of the expected deliveries.
    public var limit: Double
    public var share: Bool

    public init(name: Name, limit: Double, share: Bool = false) {
        self.name = name
        self.limit = limit
        self.share = share
    }

    /// Whether `text` is meant as a count objective (a known count's name, no percentile).
    public static func names(_ text: String) -> Bool {
        let head = text.trimmingSpaces.prefix { $0.isLetter }
        return Name(rawValue: String(head)) != nil
    }

    /// Parses `NAME==N`, `NAME<=N` or `NAME<=P%` (`≤` also accepted).
    public init(parsing text: String) throws(PlanInputError) {
        let trimmed = text.trimmingSpaces
        let names = Name.allCases.map(\.rawValue).joined(separator: ", ")
        let expected = "expected COUNT==N, COUNT<=N or COUNT<=P% with COUNT one of \(names), like missing==0"
        var op = ""
        for candidate in ["==", "<=", "≤"] where trimmed.contains(candidate) {
            op = candidate
            break
        }
        guard !op.isEmpty else { throw PlanInputError("objective \"\(text)\": \(expected)") }
        let parts = trimmed.components(separatedBy: op)
        guard parts.count == 2, let name = Name(rawValue: parts[0].trimmingSpaces) else {
            throw PlanInputError("objective \"\(text)\": \(expected)")
        }
        var value = parts[1].trimmingSpaces
        let share = value.hasSuffix("%")
        if share { value.removeLast() }
        guard let v = Double(value.trimmingSpaces), v.isFinite, v >= 0, !share || v <= 100,
            share || v == v.rounded()
        else {
            throw PlanInputError(
                "objective \"\(text)\": expected a whole count ≥ 0 or a percentage from 0% to 100% after \(op)")
        }
        if op == "==" && (share || v != 0) {
            throw PlanInputError("objective \"\(text)\": == takes 0 only (missing==0); use <= for a bound")
        }
        self.init(name: name, limit: share ? v / 100 : v, share: share)
    }

    /// Met by `count` out of `expected` deliveries.
    public func met(count: Int, expected: Int) -> Bool {
        if share { return Double(count) <= limit * Double(max(expected, 0)) }
        return Double(count) <= limit
    }

    public var description: String {
        if share { return "\(name.rawValue)<=\(PlanText.percent(limit))" }
        return limit == 0 ? "\(name.rawValue)==0" : "\(name.rawValue)<=\(Int(limit))"
    }
}
