import FanoutMetrics
import FanoutSim

/// A JSON document built as a value and printed with two-space indentation (objects keep their key
/// order). Numbers are written as `JSONTextWriter.number` writes them.
public indirect enum JSONValue: Sendable {
    case object([(String, JSONValue)])
    case array([JSONValue])
    case string(String)
    case number(Double)
    case int(Int)
    case bool(Bool)
    case null

    public static func optional(_ v: Double?) -> JSONValue { v.map { .number($0) } ?? .null }
    public static func optional(_ v: Int?) -> JSONValue { v.map { .int($0) } ?? .null }
    public static func optional(_ v: String?) -> JSONValue { v.map { .string($0) } ?? .null }

    public var text: String {
        var out = ""
        write(to: &out, depth: 0)
        return out + "\n"
    }

    private func write(to out: inout String, depth: Int) {
        let pad = String(repeating: "  ", count: depth + 1)
        let end = String(repeating: "  ", count: depth)
        switch self {
        case .object(let members):
            if members.isEmpty {
                out += "{}"
                return
            }
            out += "{"
            for (k, (key, value)) in members.enumerated() {
                out += (k == 0 ? "\n" : ",\n") + pad + JSONTextWriter.quote(key) + ": "
                value.write(to: &out, depth: depth + 1)
            }
            out += "\n" + end + "}"
        case .array(let items):
            if items.isEmpty {
                out += "[]"
                return
            }
            let scalars = items.allSatisfy {
                if case .object = $0 { return false }
                if case .array = $0 { return false }
                return true
            }
            if scalars {
                out += "["
                for (k, item) in items.enumerated() {
                    if k > 0 { out += ", " }
                    item.write(to: &out, depth: depth + 1)
                }
                out += "]"
                return
            }
            out += "["
            for (k, item) in items.enumerated() {
                out += (k == 0 ? "\n" : ",\n") + pad
                item.write(to: &out, depth: depth + 1)
            }
            out += "\n" + end + "]"
        case .string(let s): out += JSONTextWriter.quote(s)
        case .number(let v): out += v.isFinite ? JSONTextWriter.number(v) : "null"
        case .int(let v): out += String(v)
        case .bool(let b): out += b ? "true" : "false"
        case .null: out += "null"
        }
    }
}
