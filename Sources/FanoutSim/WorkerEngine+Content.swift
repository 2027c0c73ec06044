import FanoutCore
import FanoutMetrics

/// The generated content-state of each event.
extension WorkerEngine {
    /// The content-state of an event: scores from the event, strings of the scenario's length.
    func makeContent(schema: Int32, event: Int, source: Int, final: Bool) {
        content.removeAll(keepingCapacity: true)
        let seed = world.scenario.seed
        let fields = world.schemas[schema].fields
        for (f, field) in fields.enumerated() {
            let h = Mix.hash(seed, UInt64(bitPattern: Int64(event)), UInt64(source), UInt64(f))
            switch field.type {
            case .int: ContentRecord.appendInt(Int64(h % 10), to: &content)
            case .double: ContentRecord.appendDouble(Double(h % 1000) / 1000, to: &content)
            case .bool: ContentRecord.appendBool(final, to: &content)
            case .string:
                content.append(ContentRecord.Tag.string.rawValue)
                let length = world.scenario.stringBytes
                withUnsafeBytes(of: UInt32(length).littleEndian) { content.append(contentsOf: $0) }
                var x = h
                for _ in 0..<length {
                    content.append(UInt8(ascii: "a") &+ UInt8(x % 26))
                    x = x / 26 == 0 ? Mix.hash(x, 1) : x / 26
                }
            }
        }
    }
}
