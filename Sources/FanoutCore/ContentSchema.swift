/// The field types of a content-state (DOMAIN §1, TRACE rule 13).
public enum FieldType: UInt8, Sendable {
    /// An integral number in Int64 range (`3.0` yes; `3.5`, `true`, `"3"` no).
    case int
    /// Any finite number.
    case double
    case string
    /// `true` / `false` only.
    case bool

    public var name: String {
        switch self {
        case .int: "int"
        case .double: "double"
        case .string: "string"
        case .bool: "bool"
        }
    }
}

/// The content-state schema of one `attributes-type`: field names and types in declaration order.
///
/// Decoded content is kept as a *content record*: for each field, in schema order, a tag byte
/// (`ContentRecord.Tag`) and its value (8 little-endian bytes for int and double, a 32-bit length
/// and the UTF-8 bytes for a string, nothing for bool and absent). Records are flat bytes, so
/// storing, copying and comparing content allocates nothing.
public struct ContentSchema: Sendable {
    public struct Field: Sendable {
        public var name: String
        public var type: FieldType
        public var optional: Bool

        public init(name: String, type: FieldType, optional: Bool = false) {
            self.name = name
            self.type = type
            self.optional = optional
        }
    }

    public let name: String
    public let fields: [Field]
    private let nameBytes: [UInt8]
    private let nameOffsets: [Int]
    /// The field names, kinds and compact keys in flat memory for the hot paths (decode, compact encode): reached
    /// through one reference, read with no closure, no copy of the schema and no bounds check per field.
    let layout: ContentLayout

    public init(name: String, fields: [Field]) {
        self.name = name
        self.fields = fields
        var bytes: [UInt8] = []
        var offsets = [0]
        var keys: [UInt8] = []
        var keyOffsets = [0]
        for field in fields {
            bytes.append(contentsOf: field.name.utf8)
            offsets.append(bytes.count)
            keys.append(UInt8(ascii: ","))
            JSONWriter.appendString(field.name, to: &keys)
            keys.append(UInt8(ascii: ":"))
            keyOffsets.append(keys.count)
        }
        nameBytes = bytes
        nameOffsets = offsets
        layout = ContentLayout(
            names: bytes, nameOffsets: offsets, kinds: fields.map { $0.type.rawValue | ($0.optional ? 0x80 : 0) },
            compactKeys: keys, compactKeyOffsets: keyOffsets)
    }

    /// Parses a type string of a trace header: `int`, `double`, `string`, `bool`, optionally with `?`.
    public static func parseType(_ text: String) -> (FieldType, optional: Bool)? {
        var base = Substring(text)
        var optional = false
        if base.hasSuffix("?") {
            optional = true
            base = base.dropLast()
        }
        switch base {
        case "int": return (.int, optional)
        case "double": return (.double, optional)
        case "string": return (.string, optional)
        case "bool": return (.bool, optional)
        default: return nil
        }
    }

    /// Index of the field whose name equals the (possibly escaped) key at `keyIndex`, or -1.
    /// Tries `expected` first: encoders write keys in schema order, so that is usually one comparison.
    @inline(__always)
    func fieldIndex(tape: JSONDocument, keyIndex: Int, expected: Int) -> Int {
        nameBytes.withUnsafeBytes { names in
            let count = fields.count
            if count == 0 { return -1 }
            var k = expected < count ? expected : 0
            for _ in 0..<count {
                let name = UnsafeRawBufferPointer(rebasing: names[nameOffsets[k]..<nameOffsets[k + 1]])
                if tape.stringEquals(keyIndex, name) { return k }
                k = k + 1 == count ? 0 : k + 1
            }
            return -1
        }
    }

    public func withFieldName<R>(_ k: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        nameBytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[nameOffsets[k]..<nameOffsets[k + 1]])) }
    }
}

public enum ContentRecord {
    public enum Tag: UInt8 {
        case absent = 0, int, double, string, boolFalse, boolTrue
    }

    @inline(__always)
    static func appendWord(_ value: UInt64, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
    }

    public static func appendInt(_ value: Int64, to out: inout [UInt8]) {
        out.append(Tag.int.rawValue)
        appendWord(UInt64(bitPattern: value), to: &out)
    }

    public static func appendDouble(_ value: Double, to out: inout [UInt8]) {
        out.append(Tag.double.rawValue)
        appendWord(value.bitPattern, to: &out)
    }

    public static func appendBool(_ value: Bool, to out: inout [UInt8]) {
        out.append(value ? Tag.boolTrue.rawValue : Tag.boolFalse.rawValue)
    }

    public static func appendAbsent(to out: inout [UInt8]) {
        out.append(Tag.absent.rawValue)
    }

    public static func appendString(_ utf8: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(Tag.string.rawValue)
        withUnsafeBytes(of: UInt32(utf8.count).littleEndian) { out.append(contentsOf: $0) }
        out.append(contentsOf: utf8)
    }

    /// Reads field values of a record in order.
    public struct Reader {
        public enum Value {
            case absent
            case int(Int64)
            case double(Double)
            case string(UnsafeRawBufferPointer)
            case bool(Bool)
        }

        let bytes: UnsafeRawBufferPointer
        var offset = 0

        public init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        public mutating func next() -> Value {
            let tag = Tag(rawValue: bytes[offset])!
            offset += 1
            switch tag {
            case .absent: return .absent
            case .boolFalse: return .bool(false)
            case .boolTrue: return .bool(true)
            case .int, .double:
                let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                offset += 8
                return tag == .int ? .int(Int64(bitPattern: word)) : .double(Double(bitPattern: word))
            case .string:
                let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                offset += 4
                let value = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
                offset += length
                return .string(value)
            }
        }
    }
}

extension ContentSchema {
    /// Decodes the content-state object at `index` of `tape` into a content record appended to `out`
    /// (TRACE rule 13). Returns false when it does not decode; `out` then holds garbage past its
    /// original count. `slots` is scratch storage reused across calls.
    public func decode(
        tape: JSONDocument, object index: Int, into out: inout [UInt8], slots: inout [Int32]
    ) -> Bool {
        guard tape[index].kind == .object else { return false }
        slots.removeAll(keepingCapacity: true)
        for _ in 0..<fields.count { slots.append(-1) }
        let end = Int(tape[index].next)
        var member = index + 1
        var expected = 0
        while member < end {
            let k = fieldIndex(tape: tape, keyIndex: member, expected: expected)
            if k >= 0 {
                slots[k] = Int32(member + 1)  // duplicates: the last one wins
                expected = k + 1
            }
            member = Int(tape[member + 1].next)
        }
        for k in 0..<fields.count {
            let field = fields[k]
            let v = Int(slots[k])
            if v < 0 || tape[v].kind == .null {
                guard field.optional else { return false }
                ContentRecord.appendAbsent(to: &out)
                continue
            }
            switch field.type {
            case .int:
                guard let value = tape.int64(v) else { return false }
                ContentRecord.appendInt(value, to: &out)
            case .double:
                guard let value = tape.double(v) else { return false }
                ContentRecord.appendDouble(value, to: &out)
            case .string:
                guard tape[v].kind == .string else { return false }
                out.append(ContentRecord.Tag.string.rawValue)
                let lengthAt = out.count
                withUnsafeBytes(of: UInt32(0)) { out.append(contentsOf: $0) }  // length, patched below
                let before = out.count
                tape.appendUnescaped(v, to: &out)
                let length = UInt32(out.count - before)
                out.withUnsafeMutableBytes {
                    $0.storeBytes(of: length.littleEndian, toByteOffset: lengthAt, as: UInt32.self)
                }
            case .bool:
                guard tape[v].kind == .bool else { return false }
                ContentRecord.appendBool(tape[v].flag, to: &out)
            }
        }
        return true
    }

    /// `decode(tape:object:into:slots:)` into a byte buffer, with scratch on the stack: the apply
    /// path. Writes the same record bytes after the buffer's current contents.
    @inline(__always)
    func decodeRecord(tape: JSONDocument, object index: Int, into out: inout ByteBuffer) -> Bool {
        ContentSchema.decodeRecord(tape: tape, object: index, layout: layout, into: &out)
    }

    @inline(__always)
    static func decodeRecord(
        tape: JSONDocument, object index: Int, layout: ContentLayout, into out: inout ByteBuffer
    ) -> Bool {
        guard tape[index].kind == .object else { return false }
        // Members in schema order (what encoders write) are decoded as they come, in one walk; anything else
        // (a key out of order, repeated or unknown) starts again with the general walk below.
        let start = out.count
        switch decodeInOrder(tape: tape, object: index, layout: layout, into: &out) {
        case .decoded: return true
        case .failed: return false
        case .notInOrder: out.truncate(to: start)
        }
        return withUnsafeTemporaryAllocation(of: Int32.self, capacity: max(layout.count, 1)) { slots in
            slots.initialize(repeating: -1)
            return decodeRecord(tape: tape, object: index, layout: layout, slots: slots.baseAddress!, into: &out)
        }
    }

    enum InOrder {
        case decoded, failed, notInOrder
    }

    /// The members of the object at `index` decoded in one walk when each names a field after the previous
    /// member's (fields in between: absent, so optional). Then the record is the general walk's: no key repeats
    /// (the last one would win) and fields come in schema order. `.notInOrder` when a key names no later field
    /// (out of order, repeated or unknown) or a value fails before the walk ends (a later member might name its
    /// field again): the caller starts over. `.failed` only when all members were in order and a required field
    /// after the last one is absent.
    @inline(__always)
    private static func decodeInOrder(
        tape: JSONDocument, object index: Int, layout: ContentLayout, into out: inout ByteBuffer
    ) -> InOrder {
        let count = layout.count
        let names = layout.names
        let offsets = layout.nameOffsets
        let end = Int(tape[index].next)
        var member = index + 1
        var next = 0  // the first field not written yet
        while member < end {
            var k = next
            while k < count {
                let start = offsets[k]
                let name = UnsafeRawBufferPointer(start: names + start, count: offsets[k &+ 1] &- start)
                if tape.stringEquals(member, name) { break }
                k &+= 1
            }
            if k == count { return .notInOrder }
            // A failure here may be undone by a later member naming the field again: the general walk decides.
            while next < k {
                guard layout.kinds[next] & 0x80 != 0 else { return .notInOrder }
                out.append(ContentRecord.Tag.absent.rawValue)
                next &+= 1
            }
            guard appendValue(tape: tape, value: member &+ 1, kind: layout.kinds[k], into: &out) else {
                return .notInOrder
            }
            next = k &+ 1
            member = Int(tape[member &+ 1].next)
        }
        while next < count {
            guard layout.kinds[next] & 0x80 != 0 else { return .failed }
            out.append(ContentRecord.Tag.absent.rawValue)
            next &+= 1
        }
        return .decoded
    }

    /// Appends field value `v` (a tape index, -1 = absent) of kind `kind` (see `ContentLayout.kinds`) to a record;
    /// false when it does not decode.
    @inline(__always)
    private static func appendValue(tape: JSONDocument, value v: Int, kind: UInt8, into out: inout ByteBuffer) -> Bool {
        if v < 0 || tape[v].kind == .null {
            guard kind & 0x80 != 0 else { return false }
            out.append(ContentRecord.Tag.absent.rawValue)
            return true
        }
        switch kind & 0x7F {
        case FieldType.int.rawValue:
            guard let value = tape.int64(v) else { return false }
            out.appendRecordWord(ContentRecord.Tag.int.rawValue, UInt64(bitPattern: value))
        case FieldType.double.rawValue:
            guard let value = tape.double(v) else { return false }
            out.appendRecordWord(ContentRecord.Tag.double.rawValue, value.bitPattern)
        case FieldType.string.rawValue:
            let e = tape[v]
            guard e.kind == .string else { return false }
            if !e.flag {
                // No escape: the bytes as they are, their length known (one reserve, no length patched after).
                let length = Int(e.end) &- Int(e.start)
                out.reserve(5 &+ length)
                out.appendReserved(ContentRecord.Tag.string.rawValue)
                out.appendReservedUInt32(UInt32(truncatingIfNeeded: length))
                out.appendReserved(tape.bytes.baseAddress! + Int(e.start), count: length)
                return true
            }
            out.reserve(5)
            out.appendReserved(ContentRecord.Tag.string.rawValue)
            let lengthAt = out.count
            out.appendReservedUInt32(0)  // length, patched below
            tape.appendUnescaped(v, to: &out)
            out.storeUInt32(UInt32(truncatingIfNeeded: out.count &- lengthAt &- 4), at: lengthAt)
        default:  // bool
            let e = tape[v]
            guard e.kind == .bool else { return false }
            out.append(e.flag ? ContentRecord.Tag.boolTrue.rawValue : ContentRecord.Tag.boolFalse.rawValue)
        }
        return true
    }

    @inline(__always)
    private static func decodeRecord(
        tape: JSONDocument, object index: Int, layout: ContentLayout, slots: UnsafeMutablePointer<Int32>,
        into out: inout ByteBuffer
    ) -> Bool {
        let count = layout.count
        let names = layout.names
        let offsets = layout.nameOffsets
        let end = Int(tape[index].next)
        var member = index + 1
        var expected = 0
        while member < end {
            // Keys usually come in schema order: try the expected field first.
            if count > 0 {
                var k = expected < count ? expected : 0
                for _ in 0..<count {
                    let start = offsets[k]
                    let name = UnsafeRawBufferPointer(start: names + start, count: offsets[k &+ 1] &- start)
                    if tape.stringEquals(member, name) {
                        slots[k] = Int32(truncatingIfNeeded: member &+ 1)  // duplicates: the last one wins
                        expected = k &+ 1
                        break
                    }
                    k = k &+ 1 == count ? 0 : k &+ 1
                }
            }
            member = Int(tape[member &+ 1].next)
        }
        for k in 0..<count {
            guard appendValue(tape: tape, value: Int(slots[k]), kind: layout.kinds[k], into: &out) else { return false }
        }
        return true
    }

    /// Writes a record as a JSON object. `.compact` for payloads (`{"home":2}`); `.python` for the
    /// state dump (`{"home": 2}`, Python float repr, absent optional fields left out).
    public func appendJSON(record: UnsafeRawBufferPointer, style: JSONStyle, to out: inout [UInt8]) {
        var reader = ContentRecord.Reader(record)
        out.append(UInt8(ascii: "{"))
        var first = true
        let escaping: JSONWriter.Escaping = style == .compact ? .unicodeControls : .pythonStyle
        for k in 0..<fields.count {
            let value = reader.next()
            if case .absent = value { continue }
            if !first { JSONWriter.append(style == .compact ? "," : ", ", to: &out) }
            first = false
            withFieldName(k) { JSONWriter.appendString($0, to: &out, escaping: escaping) }
            JSONWriter.append(style == .compact ? ":" : ": ", to: &out)
            switch value {
            case .absent: break
            case .int(let v): JSONWriter.appendInt(v, to: &out)
            case .double(let v):
                if style == .compact {
                    JSONWriter.appendDouble(v, to: &out)
                } else {
                    JSONWriter.appendPythonFloat(v, to: &out)
                }
            case .string(let s): JSONWriter.appendString(s, to: &out, escaping: escaping)
            case .bool(let b): JSONWriter.append(b ? "true" : "false", to: &out)
            }
        }
        out.append(UInt8(ascii: "}"))
    }
}

extension ContentSchema {
    /// `appendJSON(record:style: .compact, to:)` into a byte buffer: the payload encoder's path.
    /// The record must be a record of this schema.
    @inline(__always)
    /// A content record of this schema as the compact JSON object a payload's `content-state` carries (the
    /// trigger of `fanout serve --trigger` sends it). Allocates; not for the hot path.
    public func appendCompactJSON(record: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        var buffer = ByteBuffer(capacity: 256)
        appendCompactJSON(record: record, to: &buffer)
        out.append(contentsOf: buffer.bytes)
    }

    func appendCompactJSON(record: UnsafeRawBufferPointer, to out: inout ByteBuffer) {
        out.reserve(compactJSONBytes(record: record))
        appendCompactJSONReserved(record: record, to: &out)
    }

    /// The most bytes `appendCompactJSON` writes for `record` with no check of the buffer's capacity: six per
    /// record byte (a value's JSON text is at most six times its bytes in the record: an int's 9 bytes give at
    /// most 20 digits, a double's at most `ByteBuffer.jsonDoubleBytes`, a string's 5 + n bytes its n bytes and
    /// two quotes, a bool's 1 byte `false`), every key, and the braces. Escapes and a double's slow path go on
    /// with checked appends.
    @inline(__always)
    func compactJSONBytes(record: UnsafeRawBufferPointer) -> Int {
        6 &* record.count &+ layout.compactKeyBytes &+ 2
    }

    /// `appendCompactJSON` when the caller reserved `compactJSONBytes(record:)`: no capacity check per write.
    @inline(__always)
    func appendCompactJSONReserved(record: UnsafeRawBufferPointer, to out: inout ByteBuffer) {
        let layout = layout
        appendCompactJSON(
            record: record, keys: UnsafeRawBufferPointer(start: layout.compactKeys, count: layout.compactKeyBytes),
            keyOffsets: UnsafeBufferPointer(start: layout.compactKeyOffsets, count: layout.count &+ 1),
            count: layout.count, to: &out)
    }

    @inline(__always)
    private func appendCompactJSON(
        record: UnsafeRawBufferPointer, keys: UnsafeRawBufferPointer, keyOffsets: UnsafeBufferPointer<Int>,
        count: Int, to out: inout ByteBuffer
    ) {
        out.appendReserved(UInt8(ascii: "{"))
        var offset = 0
        var comma = 1  // each key is written with the comma before it, but for the first field written
        for k in 0..<count {
            precondition(offset < record.count, "content record shorter than its schema")
            let tag = record[offset]
            offset &+= 1
            if tag == ContentRecord.Tag.absent.rawValue { continue }
            let keyStart = keyOffsets[k] &+ comma
            out.appendReserved(keys.baseAddress! + keyStart, count: keyOffsets[k &+ 1] &- keyStart)
            comma = 0
            switch tag {
            case ContentRecord.Tag.int.rawValue:
                precondition(offset &+ 8 <= record.count, "content record truncated")
                let word = UInt64(littleEndian: record.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                offset &+= 8
                out.appendJSONIntReserved(Int64(bitPattern: word))
            case ContentRecord.Tag.double.rawValue:
                precondition(offset &+ 8 <= record.count, "content record truncated")
                let word = UInt64(littleEndian: record.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                offset &+= 8
                out.appendJSONDoubleReserved(Double(bitPattern: word))
            case ContentRecord.Tag.string.rawValue:
                precondition(offset &+ 4 <= record.count, "content record truncated")
                let length = Int(UInt32(littleEndian: record.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                offset &+= 4
                precondition(length <= record.count &- offset, "content record truncated")
                out.appendJSONStringReserved(UnsafeRawBufferPointer(start: record.baseAddress! + offset, count: length))
                offset &+= length
            case ContentRecord.Tag.boolFalse.rawValue:
                out.appendReserved("false")
            case ContentRecord.Tag.boolTrue.rawValue:
                out.appendReserved("true")
            default:
                preconditionFailure("not a content record tag: \(tag)")
            }
        }
        out.appendReserved(UInt8(ascii: "}"))
    }
}
