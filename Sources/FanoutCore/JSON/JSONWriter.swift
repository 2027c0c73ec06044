/// Appending JSON text to a byte buffer, without allocation once the buffer has grown.
public enum JSONWriter {
    public enum Escaping: Sendable {
        /// `\"`, `\\`, and every control character as `\u00XX` (the payload encoder).
        case unicodeControls
        /// As Python's `json.dumps(ensure_ascii=False)`: `\n \r \t \b \f` short forms, other controls
        /// as lowercase `\u00xx` (the state dump, so that outside tools can diff it byte for byte).
        case pythonStyle
    }

    @inline(__always)
    public static func append(_ literal: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends `"…"` with the UTF-8 `bytes` escaped; the bytes must be valid UTF-8.
    @inline(__always)
    public static func appendString(
        _ bytes: UnsafeRawBufferPointer, to out: inout [UInt8], escaping: Escaping = .unicodeControls
    ) {
        out.append(UInt8(ascii: "\""))
        var runStart = 0
        let n = bytes.count
        var i = 0
        while i < n {
            let c = bytes[i]
            if c >= 0x20 && c != UInt8(ascii: "\"") && c != UInt8(ascii: "\\") {
                i += 1
                continue
            }
            if i > runStart { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<i])) }
            appendEscape(c, to: &out, escaping: escaping)
            i += 1
            runStart = i
        }
        if n > runStart { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<n])) }
        out.append(UInt8(ascii: "\""))
    }

    @inline(__always)
    public static func appendString(_ literal: StaticString, to out: inout [UInt8]) {
        appendString(UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount), to: &out)
    }

    public static func appendString(_ string: String, to out: inout [UInt8], escaping: Escaping = .unicodeControls) {
        var copy = string
        copy.withUTF8 { appendString(UnsafeRawBufferPointer($0), to: &out, escaping: escaping) }
    }

    private static func appendEscape(_ c: UInt8, to out: inout [UInt8], escaping: Escaping) {
        out.append(UInt8(ascii: "\\"))
        switch c {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"):
            out.append(c)
            return
        default: break
        }
        if escaping == .pythonStyle {
            let letter: UInt8? =
                switch c {
                case 0x0A: UInt8(ascii: "n")
                case 0x0D: UInt8(ascii: "r")
                case 0x09: UInt8(ascii: "t")
                case 0x08: UInt8(ascii: "b")
                case 0x0C: UInt8(ascii: "f")
                default: nil
                }
            if let letter {
                out.append(letter)
                return
            }
        }
        let hex: StaticString = "0123456789abcdef"
        out.append(UInt8(ascii: "u"))
        out.append(UInt8(ascii: "0"))
        out.append(UInt8(ascii: "0"))
        out.append(hex.utf8Start[Int(c >> 4)])
        out.append(hex.utf8Start[Int(c & 0xF)])
    }

    @inline(__always)
    public static func appendInt(_ value: Int64, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        if magnitude < 10 {
            out.append(UInt8(ascii: "0") &+ UInt8(magnitude))
            return
        }
        // 20 digits hold UInt64.max.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var k = 20
            while magnitude > 0 {
                k -= 1
                digits[k] = UInt8(ascii: "0") &+ UInt8(magnitude % 10)
                magnitude /= 10
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[k..<20]))
        }
    }

    /// Text that reads back to the same Double, without allocation (finite values only).
    ///
    /// Fast path: the fewest fractional digits k ≤ 17 such that `m = round(v·10^k)` with
    /// |m| < 2^53 gives back `v` as `m / 10^k` (both exact operands, so the division is correctly
    /// rounded exactly as a reader's is): `0.61`, `2.5`, `1700000000`. Otherwise 17 significant
    /// digits computed exactly with 128-bit integers, which always read back. Values beyond that
    /// range (|v| ≥ 2^63 or < 2^-60) fall back to `description` (this allocates; a content-state
    /// seldom holds them).
    @inline(__always)
    public static func appendDouble(_ value: Double, to out: inout [UInt8]) {
        precondition(value.isFinite, "JSON has no representation for \(value)")
        if value == 0 {
            append(value.sign == .minus ? "-0.0" : "0.0", to: &out)
            return
        }
        let magnitude = abs(value)
        if magnitude < 9.007199254740992e15 && magnitude >= 1e-17 {
            var k = 0
            while k <= 17 {
                let scale = exactPowerOfTen(k)
                let m = (magnitude * scale).rounded()
                if m < 9.007199254740992e15 && m / scale == magnitude {
                    if value < 0 { out.append(UInt8(ascii: "-")) }
                    appendDecimal(UInt64(m), fractionDigits: k, to: &out)
                    return
                }
                k += 1
            }
        }
        if magnitude < 9.2e18 && magnitude >= 8.673617379884035e-19 {
            if value < 0 { out.append(UInt8(ascii: "-")) }
            appendSeventeenDigits(magnitude, to: &out)
            return
        }
        out.append(contentsOf: value.description.utf8)
    }

    /// `m / 10^fractionDigits` in plain decimal notation (`61, 2` → `0.61`; `5, 0` → `5.0`).
    @inline(__always)
    static func appendDecimal(_ m: UInt64, fractionDigits k: Int, to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { digits in
            var n = m
            var count = 0
            repeat {
                digits[count] = UInt8(ascii: "0") &+ UInt8(n % 10)
                n /= 10
                count += 1
            } while n > 0
            while count <= k {  // at least one digit before the point
                digits[count] = UInt8(ascii: "0")
                count += 1
            }
            var i = count - 1
            while i >= k {
                out.append(digits[i])
                i -= 1
            }
            out.append(UInt8(ascii: "."))
            if k == 0 {
                out.append(UInt8(ascii: "0"))
                return
            }
            while i >= 0 {
                out.append(digits[i])
                i -= 1
            }
        }
    }

    /// 17 significant digits of `v` (2^-60 ≤ v < 2^63), correctly rounded from its exact binary
    /// value, in exponent form `d.dddddddddddddddde±XX`.
    static func appendSeventeenDigits(_ v: Double, to out: inout [UInt8]) {
        // v = significand × 2^exponent exactly: an integer part, and a fraction numerator over 2^shift
        // (shift ≤ 112, so ten times the numerator still fits in 128 bits).
        let exponent = Int(v.exponent) - 52
        let significand = UInt128(v.significandBitPattern | (1 << 52))
        var integer: UInt64
        var fraction: UInt128 = 0
        var shift: UInt128 = 0
        if exponent >= 0 {
            integer = UInt64(significand << UInt128(exponent))
        } else {
            shift = UInt128(-exponent)
            integer = UInt64(significand >> shift)
            fraction = significand & ((1 << shift) - 1)
        }
        let mask: UInt128 = (1 << shift) &- 1
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 48) { digits in
            // Integer digits (most significant first), then fraction digits, until 18 significant.
            var count = 0
            var decimalPoint = 0
            if integer > 0 {
                var reversed = 0
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { tmp in
                    while integer > 0 {
                        tmp[reversed] = UInt8(integer % 10)
                        integer /= 10
                        reversed += 1
                    }
                    for j in stride(from: reversed - 1, through: 0, by: -1) {
                        digits[count] = tmp[j]
                        count += 1
                    }
                }
                decimalPoint = count
            }
            var significant = count
            while significant < 18 {
                let wide = fraction * 10
                let digit = UInt8(wide >> shift)
                fraction = wide & mask
                if significant == 0 && digit == 0 {
                    decimalPoint -= 1
                    continue
                }
                digits[count] = digit
                count += 1
                significant += 1
            }
            // Round half to even at 17 significant digits: digit 18 and everything after decide.
            let keep = 17
            var rest = fraction != 0
            if count > keep + 1 { for j in (keep + 1)..<count where digits[j] != 0 { rest = true } }
            let next = digits[keep]
            let roundUp = next > 5 || (next == 5 && (rest || digits[keep - 1] & 1 == 1))
            if roundUp {
                var j = keep - 1
                while j >= 0 {
                    if digits[j] == 9 {
                        digits[j] = 0
                        j -= 1
                    } else {
                        digits[j] += 1
                        break
                    }
                }
                if j < 0 {
                    // 99…9 rounded up to 100…0
                    digits[0] = 1
                    for z in 1..<keep { digits[z] = 0 }
                    decimalPoint += 1
                }
            }
            out.append(UInt8(ascii: "0") &+ digits[0])
            out.append(UInt8(ascii: "."))
            for j in 1..<keep { out.append(UInt8(ascii: "0") &+ digits[j]) }
            let e = decimalPoint - 1
            out.append(UInt8(ascii: "e"))
            if e < 0 { out.append(UInt8(ascii: "-")) }
            appendInt(Int64(abs(e)), to: &out)
        }
    }

    @inline(__always)
    static func exactPowerOfTen(_ k: Int) -> Double {
        switch k {
        case 0: 1
        case 1: 1e1
        case 2: 1e2
        case 3: 1e3
        case 4: 1e4
        case 5: 1e5
        case 6: 1e6
        case 7: 1e7
        case 8: 1e8
        case 9: 1e9
        case 10: 1e10
        case 11: 1e11
        case 12: 1e12
        case 13: 1e13
        case 14: 1e14
        case 15: 1e15
        case 16: 1e16
        default: 1e17
        }
    }

    /// A Double as Python's `repr` writes it (`50.0`, `0.61`, `1e+16`, `1e-05`, `1234567890123456.0`):
    /// the same shortest digits, exponent form when the decimal exponent is below -4 or above 15.
    public static func appendPythonFloat(_ value: Double, to out: inout [UInt8]) {
        precondition(value.isFinite, "JSON has no representation for \(value)")
        // `description` is Swift's shortest round-trip text (closest when several are shortest), the
        // same digits as Python's repr; only the layout differs. The dump is not on the hot path.
        var text = value.description
        text.withUTF8 { buffer in
            let length = buffer.count
            // Split Swift's text into sign, significant digits and the decimal point position.
            var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of digit storage
            withUnsafeMutableBytes(of: &digits) { store in
                var count = 0
                var pointPosition = -1
                var exponent = 0
                var negative = false
                var i = 0
                if buffer[0] == UInt8(ascii: "-") {
                    negative = true
                    i = 1
                }
                while i < length {
                    let c = buffer[i]
                    if c == UInt8(ascii: ".") {
                        pointPosition = count
                    } else if c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
                        var j = i + 1
                        var expNegative = false
                        if buffer[j] == UInt8(ascii: "-") || buffer[j] == UInt8(ascii: "+") {
                            expNegative = buffer[j] == UInt8(ascii: "-")
                            j += 1
                        }
                        while j < length {
                            exponent = exponent * 10 + Int(buffer[j] &- UInt8(ascii: "0"))
                            j += 1
                        }
                        if expNegative { exponent = -exponent }
                        break
                    } else {
                        store[count] = c
                        count += 1
                    }
                    i += 1
                }
                if pointPosition < 0 { pointPosition = count }
                // Strip leading zeros (0.001 -> digits "0001"), adjusting the point.
                var first = 0
                while first < count - 1 && store[first] == UInt8(ascii: "0") {
                    first += 1
                    pointPosition -= 1
                }
                var last = count
                while last > first + 1 && store[last - 1] == UInt8(ascii: "0") { last -= 1 }
                let significant = UnsafeRawBufferPointer(rebasing: store[first..<last])
                // Value = 0.d1d2... × 10^decimalPoint
                let decimalPoint = pointPosition + exponent
                if negative { out.append(UInt8(ascii: "-")) }
                if significant.count == 1 && significant[0] == UInt8(ascii: "0") {
                    append("0.0", to: &out)
                    return
                }
                if decimalPoint < -3 || decimalPoint > 16 {
                    out.append(significant[0])
                    if significant.count > 1 {
                        out.append(UInt8(ascii: "."))
                        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: significant[1...]))
                    }
                    let e = decimalPoint - 1
                    out.append(UInt8(ascii: "e"))
                    out.append(e < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+"))
                    if abs(e) < 10 { out.append(UInt8(ascii: "0")) }
                    appendInt(Int64(abs(e)), to: &out)
                } else if decimalPoint <= 0 {
                    append("0.", to: &out)
                    for _ in 0 ..< -decimalPoint { out.append(UInt8(ascii: "0")) }
                    out.append(contentsOf: significant)
                } else if decimalPoint >= significant.count {
                    out.append(contentsOf: significant)
                    for _ in 0..<(decimalPoint - significant.count) { out.append(UInt8(ascii: "0")) }
                    append(".0", to: &out)
                } else {
                    out.append(contentsOf: UnsafeRawBufferPointer(rebasing: significant[0..<decimalPoint]))
                    out.append(UInt8(ascii: "."))
                    out.append(contentsOf: UnsafeRawBufferPointer(rebasing: significant[decimalPoint...]))
                }
            }
        }
    }
}
