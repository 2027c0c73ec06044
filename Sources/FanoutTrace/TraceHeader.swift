import FanoutCore

/// Line 1 of a trace: epoch, content-state schemas, limits and budget (TRACE.md).
public struct TraceHeader: Sendable {
    public var epochSeconds: Int64
    public var schemas: SchemaSet
    public var rules: DeviceRules

    /// Reads the header from a scanned line. Limits default to DOMAIN's (5 per app, 10 per device)
    /// and the budget to unlimited when the header leaves them out.
    init(tape: JSONDocument) throws(TraceError) {
        func fail(_ message: String) -> TraceError { TraceError(line: 1, "header: \(message)") }
        guard tape[0].kind == .object else { throw fail("not a JSON object") }
        let version = tape.member(0, "trace")
        guard version >= 0 else { throw fail("missing field trace") }
        guard tape.int64(version) == 1 else { throw fail("field trace: expected 1") }
        let epoch = tape.member(0, "epoch")
        guard epoch >= 0 else { throw fail("missing field epoch") }
        guard let epochSeconds = tape.int64(epoch), abs(epochSeconds) < 9_000_000_000_000 else {
            throw fail("field epoch: expected integral UNIX seconds")
        }
        self.epochSeconds = epochSeconds

        let schemasIndex = tape.member(0, "schemas")
        guard schemasIndex >= 0 else { throw fail("missing field schemas") }
        guard tape[schemasIndex].kind == .object else { throw fail("field schemas: expected an object") }
        var schemas = SchemaSet()
        var member = schemasIndex + 1
        while member < Int(tape[schemasIndex].next) {
            let typeName = TraceHeader.string(tape, member)
            let fieldsIndex = member + 1
            guard tape[fieldsIndex].kind == .object else {
                throw fail("field schemas.\(typeName): expected an object of field types")
            }
            var fields: [ContentSchema.Field] = []
            var names = Set<String>()
            var f = fieldsIndex + 1
            while f < Int(tape[fieldsIndex].next) {
                let fieldName = TraceHeader.string(tape, f)
                guard tape[f + 1].kind == .string else {
                    throw fail("field schemas.\(typeName).\(fieldName): expected a type string")
                }
                let typeText = TraceHeader.string(tape, f + 1)
                guard let (type, optional) = ContentSchema.parseType(typeText) else {
                    throw fail(
                        "field schemas.\(typeName).\(fieldName): unknown type \"\(typeText)\" "
                            + "(expected int, double, string or bool, optionally with ?)")
                }
                // A repeated field name: the last declaration wins, as for any JSON object.
                if names.contains(fieldName) { fields.removeAll { $0.name == fieldName } }
                names.insert(fieldName)
                fields.append(ContentSchema.Field(name: fieldName, type: type, optional: optional))
                f = Int(tape[f + 1].next)
            }
            schemas.add(ContentSchema(name: typeName, fields: fields))
            member = Int(tape[fieldsIndex].next)
        }
        self.schemas = schemas

        var rules = DeviceRules()
        let limits = tape.member(0, "limits")
        if limits >= 0 && tape[limits].kind != .null {
            guard tape[limits].kind == .object else { throw fail("field limits: expected an object") }
            for (key, keyPath) in [("perApp", \DeviceRules.perAppLimit), ("perDevice", \DeviceRules.perDeviceLimit)] {
                let index = key.utf8.withContiguousStorageIfAvailable {
                    tape.member(limits, UnsafeRawBufferPointer($0))
                }!
                if index < 0 { continue }
                guard let value = tape.int64(index), value >= 0, value <= Int64(Int32.max) else {
                    throw fail("field limits.\(key): expected a non-negative integer")
                }
                rules[keyPath: keyPath] = Int(value)
            }
        }
        let budget = tape.member(0, "budgetPerHour")
        if budget >= 0 && tape[budget].kind != .null {
            guard let value = tape.int64(budget), value >= 0, value <= 1_000_000 else {
                throw fail("field budgetPerHour: expected null or an integer from 0 to 1000000")
            }
            rules.budgetPerHour = Int(value)
        }
        self.rules = rules
    }

    static func string(_ tape: JSONDocument, _ index: Int) -> String {
        var bytes: [UInt8] = []
        tape.appendUnescaped(index, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
