/// Counts indexed by an enum's cases: `counts[.accepted] += 1` on the loop, and one `+=` adds another loop's,
/// shard's or worker's whole set, whatever cases the enum grows (no hand-written sum to forget a field in).
///
/// `Key`'s raw values must be 0, 1, 2, … in case order (an `Int` enum without explicit raw values is).
public struct Counts<Key: CaseIterable & RawRepresentable & Sendable>: Sendable, Equatable where Key.RawValue == Int {
    private var values: [Int]

    public init() {
        values = Array(repeating: 0, count: Key.allCases.count)
    }

    @inline(__always)
    public subscript(_ key: Key) -> Int {
        get { values[key.rawValue] }
        set { values[key.rawValue] = newValue }
    }

    /// Every case with its count, in case order.
    public var all: [(key: Key, count: Int)] { Key.allCases.map { ($0, values[$0.rawValue]) } }

    public static func += (a: inout Counts, b: Counts) {
        for i in a.values.indices { a.values[i] += b.values[i] }
    }
}
