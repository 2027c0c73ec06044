import FanoutCore

/// A small pretty JSON writer for canonical scenario text.
public struct JSONTextWriter {
    public init() {}
    public var text = ""
    private var depth = 0
    private var first = [true]

    public mutating func open() {
        text += "{"
        depth += 1
        first.append(true)
    }

    public mutating func close() {
        depth -= 1
        first.removeLast()
        text += "\n" + String(repeating: "  ", count: depth) + "}"
    }

    public mutating func key(_ name: String) {
        if !first[first.count - 1] { text += "," }
        first[first.count - 1] = false
        text += "\n" + String(repeating: "  ", count: depth) + JSONTextWriter.quote(name) + ": "
    }

    public mutating func inline(_ raw: String) { text += raw }
    public mutating func field(_ name: String, string: String) {
        key(name)
        inline(JSONTextWriter.quote(string))
    }
    public mutating func field(_ name: String, int: Int) {
        key(name)
        inline(String(int))
    }
    public mutating func field(_ name: String, number: Double) {
        key(name)
        inline(JSONTextWriter.number(number))
    }
    public mutating func field(_ name: String, bool: Bool) {
        key(name)
        inline(bool ? "true" : "false")
    }

    public static func quote(_ s: String) -> String {
        var out: [UInt8] = []
        JSONWriter.appendString(s, to: &out, escaping: .pythonStyle)
        return String(decoding: out, as: UTF8.self)
    }

    public static func number(_ v: Double?) -> String {
        guard let v else { return "null" }
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        var out: [UInt8] = []
        JSONWriter.appendDouble(v, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
