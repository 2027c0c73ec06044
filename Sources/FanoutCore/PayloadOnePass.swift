/// What the one-pass judgement of a token push's payload read (`PayloadOnePass.parse`): the members of `aps`
/// that validation and the device's decode need, decoded.
struct OnePassPayload {
    var event: PushEvent = .update
    var timestamp: Int64 = 0
    var staleDate: Int64?
    var dismissalDate: Int64?
    var relevance: Double = 0
}

/// Validation and the device-side decode of an update or end in one pass over the payload, for the form
/// encoders write (`PayloadEncoder`): `{"aps":{…}}` with no whitespace, `aps` holding `timestamp`, `event`
/// (`update` or `end`), `content-state` and optionally `stale-date`, `dismissal-date`, `relevance-score`, each
/// once, in any order; the content-state's keys in the schema's order, written as the schema's compact keys
/// (`ContentLayout.compactKeys`: one comparison per member, no lookup), each value of its field's type.
///
/// The pass only ever *accepts*: it returns nil at the first byte it does not expect, whatever the reason
/// (whitespace, an escape, another key, a duplicate, a number it does not read plainly, a value that does not
/// decode, bad JSON), and the caller then judges the payload the general way (`JSONTape`, `PayloadValidator`,
/// `ContentSchema.decodeRecord`). What it accepts, the general way accepts too, with the same event and
/// timestamp, and decodes to the same record, dates and relevance (`PayloadOnePassTests` compares the two on
/// mutated payloads).
enum PayloadOnePass {
    /// Judges and decodes `payload` under the schema of `layout`, the content record written to `record`
    /// (emptied first). Nil: not of the form above; judge it the general way.
    static func parse(
        _ payload: UnsafeRawBufferPointer, layout: ContentLayout, into record: inout ByteBuffer
    ) -> OnePassPayload? {
        withExtendedLifetime(layout) { parse(payload, layout: LayoutView(layout), into: &record) }
    }

    /// `parse` with the layout read out (`SchemaSet.layoutView`): the pipeline's path.
    @inline(__always)
    static func parse(
        _ payload: UnsafeRawBufferPointer, layout: LayoutView, into record: inout ByteBuffer
    ) -> OnePassPayload? {
        let n = payload.count
        guard n >= 12, let base = payload.baseAddress else { return nil }
        let p = base.assumingMemoryBound(to: UInt8.self)
        // `{"aps":{` is one word; the payload ends with the two closing braces.
        guard base.loadUnaligned(as: UInt64.self) == apsPrefix, p[n &- 2] == close, p[n &- 1] == close else {
            return nil
        }
        let limit = n &- 2  // the closing brace of `aps`
        var result = OnePassPayload()
        var seen: UInt8 = 0
        var i = 8
        while true {
            // A key: its first letter picks the one member it can be, whose whole `"name":` is compared at once (a
            // key that is that name and nothing more); no other key is read here.
            guard i &+ 1 < limit, p[i] == quote else { return nil }
            let bit: UInt8
            switch p[i &+ 1] {
            case UInt8(ascii: "e"):
                guard skip(p, &i, limit, "\"event\":") else { return nil }
                bit = 1
                if i &+ 8 <= limit && UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self) == updateWord {
                    result.event = .update
                    i &+= 8
                } else if skip(p, &i, limit, "\"end\"") {
                    result.event = .end
                } else {
                    return nil
                }
            case UInt8(ascii: "t"):
                guard skip(p, &i, limit, "\"timestamp\":"), let value = plainInt(p, &i, limit) else { return nil }
                bit = 2
                result.timestamp = value
            case UInt8(ascii: "c"):
                guard skip(p, &i, limit, "\"content-state\":"),
                    decodeContent(p, &i, limit, layout: layout, into: &record)
                else { return nil }
                bit = 4
            case UInt8(ascii: "s"):
                guard skip(p, &i, limit, "\"stale-date\":") else { return nil }
                bit = 8
                if !skip(p, &i, limit, "null") {
                    guard let value = plainInt(p, &i, limit) else { return nil }
                    result.staleDate = value
                }
            case UInt8(ascii: "d"):
                guard skip(p, &i, limit, "\"dismissal-date\":") else { return nil }
                bit = 16
                if !skip(p, &i, limit, "null") {
                    guard let value = plainInt(p, &i, limit) else { return nil }
                    result.dismissalDate = value
                }
            case UInt8(ascii: "r"):
                guard skip(p, &i, limit, "\"relevance-score\":") else { return nil }
                bit = 32
                if !skip(p, &i, limit, "null") {
                    guard let value = plainDouble(p, &i, limit) else { return nil }
                    result.relevance = value
                }
            default:
                return nil
            }
            guard seen & bit == 0 else { return nil }  // a duplicate: the general way decides which one wins
            seen |= bit
            if i == limit { break }
            guard p[i] == comma else { return nil }
            i &+= 1
        }
        // event, timestamp and content-state are required here (an end without content goes the general way).
        guard seen & 7 == 7 else { return nil }
        return result
    }

    // MARK: Content-state

    /// The content-state object at `i` decoded into `record` in one pass (`ContentSchema.decodeInOrder`'s
    /// record: absent optional fields skipped over are written absent). False for anything else.
    @inline(__always)
    private static func decodeContent(
        _ p: UnsafePointer<UInt8>, _ i: inout Int, _ limit: Int, layout: LayoutView, into record: inout ByteBuffer
    ) -> Bool {
        guard i < limit, p[i] == open else { return false }
        i &+= 1
        record.removeAll()
        let count = layout.count
        let keys = UnsafeRawPointer(layout.compactKeys)
        let offsets = layout.compactKeyOffsets
        let kinds = layout.kinds
        var next = 0  // the first field not written yet
        var comma = 1  // the first member's key is compared without the comma before it
        while true {
            guard i < limit else { return false }
            if p[i] == close { break }
            // The member's key is the next field's compact key, or a later optional field's.
            var k = next
            var keyLength = 0
            while k < count {
                let start = offsets[k] &+ comma
                keyLength = offsets[k &+ 1] &- start
                if keyLength <= limit &- i && memoryEqual(UnsafeRawPointer(p + i), keys + start, keyLength) { break }
                k &+= 1
            }
            guard k < count else { return false }
            while next < k {
                guard kinds[next] & 0x80 != 0 else { return false }
                record.append(ContentRecord.Tag.absent.rawValue)
                next &+= 1
            }
            i &+= keyLength
            // The value, of field k's kind.
            guard i < limit else { return false }
            let kind = kinds[k]
            if p[i] == UInt8(ascii: "n") {
                guard kind & 0x80 != 0, skip(p, &i, limit, "null") else { return false }
                record.append(ContentRecord.Tag.absent.rawValue)
            } else {
                switch kind & 0x7F {
                case FieldType.string.rawValue:
                    guard p[i] == quote else { return false }
                    // Scanned and copied in one pass: room for the rest of the payload, the length written after.
                    let start = i &+ 1
                    record.reserve(5 &+ (limit &- start))
                    record.appendReserved(ContentRecord.Tag.string.rawValue)
                    let lengthAt = record.count
                    record.appendReservedUInt32(0)
                    guard let end = copyString(p, start, limit, to: record.base + record.count) else { return false }
                    record.appendedReserved(end &- start)
                    record.storeUInt32(UInt32(truncatingIfNeeded: end &- start), at: lengthAt)
                    i = end &+ 1
                case FieldType.int.rawValue:
                    guard let value = plainInt(p, &i, limit) else { return false }
                    record.appendRecordWord(ContentRecord.Tag.int.rawValue, UInt64(bitPattern: value))
                case FieldType.double.rawValue:
                    guard let value = plainDouble(p, &i, limit) else { return false }
                    record.appendRecordWord(ContentRecord.Tag.double.rawValue, value.bitPattern)
                default:  // bool
                    if skip(p, &i, limit, "true") {
                        record.append(ContentRecord.Tag.boolTrue.rawValue)
                    } else if skip(p, &i, limit, "false") {
                        record.append(ContentRecord.Tag.boolFalse.rawValue)
                    } else {
                        return false
                    }
                }
            }
            next = k &+ 1
            comma = 0
        }
        i &+= 1
        while next < count {
            guard kinds[next] & 0x80 != 0 else { return false }
            record.append(ContentRecord.Tag.absent.rawValue)
            next &+= 1
        }
        return true
    }

    // MARK: Tokens

    /// The offset of the quote closing a string whose contents start at `start`, the contents copied to `out` on
    /// the way (which has room for `limit - start` bytes; a few past the quote may be written too): plain ASCII
    /// eight bytes at a time, well-formed UTF-8 (`JSONTape.utf8SequenceLength`). Nil at an escape, a control
    /// byte, bad UTF-8 or no quote before `limit`.
    @inline(__always)
    static func copyString(
        _ p: UnsafePointer<UInt8>, _ start: Int, _ limit: Int, to out: UnsafeMutablePointer<UInt8>
    ) -> Int? {
        var i = start
        let target = UnsafeMutableRawPointer(out)  // byte i goes to target + (i - start)
        while true {
            while i &+ 8 <= limit {
                let w = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
                target.storeBytes(of: w, toByteOffset: i &- start, as: UInt64.self)
                let mask = JSONScan.scanningMask(UInt64(littleEndian: w))
                if mask != 0 {
                    i &+= mask.trailingZeroBitCount >> 3
                    break
                }
                i &+= 8
            }
            guard i < limit else { return nil }
            let c = p[i]
            if c == quote { return i }
            if c == backslash || c < 0x20 { return nil }
            if c < 0x80 {
                target.storeBytes(of: c, toByteOffset: i &- start, as: UInt8.self)
                i &+= 1
                continue
            }
            guard let length = JSONTape.utf8SequenceLength(p, i, limit) else { return nil }
            for k in 0..<length { target.storeBytes(of: p[i &+ k], toByteOffset: i &- start &+ k, as: UInt8.self) }
            i &+= length
        }
    }

    /// `literal` at `i` (then skipped).
    @inline(__always)
    static func skip(_ p: UnsafePointer<UInt8>, _ i: inout Int, _ limit: Int, _ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard count <= limit &- i, memoryEqual(UnsafeRawPointer(p + i), literal.utf8Start, count) else { return false }
        i &+= count
        return true
    }

    /// `-?(0|[1-9][0-9]*)` of at most 18 digits, not followed by a fraction or an exponent: its value (no
    /// overflow below 10^18), `i` moved past it. Nil for anything else (the general way reads `3.0` or `1e3`).
    @inline(__always)
    static func plainInt(_ p: UnsafePointer<UInt8>, _ i: inout Int, _ limit: Int) -> Int64? {
        var j = i
        let negative = j < limit && p[j] == minus
        if negative { j &+= 1 }
        guard j < limit else { return nil }
        let digitsStart = j
        var value: Int64 = 0
        if p[j] == zero {
            j &+= 1
        } else {
            // Eight digits in one word when there are (a timestamp's first eight), then one at a time.
            if j &+ 8 <= limit {
                let w = UInt64(littleEndian: UnsafeRawPointer(p + j).loadUnaligned(as: UInt64.self))
                if let eight = eightDigits(w) {
                    value = Int64(eight)
                    j &+= 8
                }
            }
            while j < limit {
                let d = p[j] &- zero
                if d >= 10 { break }
                value = value &* 10 &+ Int64(d)
                j &+= 1
            }
            guard j > digitsStart, j &- digitsStart <= 18 else { return nil }
        }
        if j < limit && (p[j] == dot || p[j] | 0x20 == UInt8(ascii: "e") || p[j] &- zero < 10) { return nil }
        i = j
        return negative ? 0 &- value : value
    }

    /// The value of eight ASCII digits in a little-endian word (the first digit in its low byte), or nil when a
    /// byte is not a digit: two multiply-and-shift steps combine digit pairs, then quadruples (as fast_float does).
    @inline(__always)
    static func eightDigits(_ w: UInt64) -> UInt64? {
        let high: UInt64 = 0xF0F0_F0F0_F0F0_F0F0
        // Each byte 0x30...0x39: its high nibble is 3, and adding 6 does not carry out of its low nibble.
        guard w & high == 0x3030_3030_3030_3030, (w &+ 0x0606_0606_0606_0606) & high == 0x3030_3030_3030_3030 else {
            return nil
        }
        var v = w &- 0x3030_3030_3030_3030
        v = v &* 10 &+ (v >> 8)
        let mask: UInt64 = 0x0000_00FF_0000_00FF
        v = ((v & mask) &* 0x000F_4240_0000_0064 &+ ((v >> 16) & mask) &* 0x0000_2710_0000_0001) >> 32
        return v & 0xFFFF_FFFF
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?` of at most 24 bytes, no exponent: its value as the general way reads it
    /// (`JSONNumber.parseDouble` of the same token), `i` moved past it.
    @inline(__always)
    static func plainDouble(_ p: UnsafePointer<UInt8>, _ i: inout Int, _ limit: Int) -> Double? {
        let start = i
        var j = i
        if j < limit && p[j] == minus { j &+= 1 }
        guard j < limit else { return nil }
        if p[j] == zero {
            j &+= 1
        } else {
            let digitsStart = j
            while j < limit && p[j] &- zero < 10 { j &+= 1 }
            guard j > digitsStart else { return nil }
        }
        if j < limit && p[j] == dot {
            j &+= 1
            let fractionStart = j
            while j < limit && p[j] &- zero < 10 { j &+= 1 }
            guard j > fractionStart else { return nil }
        }
        if j < limit && (p[j] | 0x20 == UInt8(ascii: "e") || p[j] &- zero < 10 || p[j] == dot) { return nil }
        guard j &- start <= 24 else { return nil }
        i = j
        return JSONNumber.parseDouble(p + start, j &- start)
    }

    private static var quote: UInt8 { 0x22 }
    private static var backslash: UInt8 { 0x5C }
    private static var colon: UInt8 { 0x3A }
    private static var comma: UInt8 { 0x2C }
    private static var open: UInt8 { 0x7B }
    private static var close: UInt8 { 0x7D }
    private static var minus: UInt8 { 0x2D }
    private static var zero: UInt8 { 0x30 }
    private static var dot: UInt8 { 0x2E }
    /// `{"aps":{` and `"update"` as little-endian words (`PayloadOnePassTests` checks them).
    static var apsPrefix: UInt64 { 0x7B3A_2273_7061_227B }
    static var updateWord: UInt64 { 0x2265_7461_6470_7522 }
}

