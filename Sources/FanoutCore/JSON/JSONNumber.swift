#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// JSON number grammar and exact value reading, without allocation.
public enum JSONNumber {
    /// Scans `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?` at `i`. Returns the end offset and
    /// whether a fraction or exponent is present, or nil when the token is not a JSON number or its
    /// magnitude is too large for a Double ("numbers too large for a Double are not strict JSON").
    @inline(__always)
    static func scan(_ p: UnsafePointer<UInt8>, _ start: Int, _ n: Int) -> (Int, Bool)? {
        var i = start
        if i < n && p[i] == UInt8(ascii: "-") { i += 1 }
        guard i < n else { return nil }
        let intStart = i
        if p[i] == UInt8(ascii: "0") {
            i += 1
        } else if p[i] >= UInt8(ascii: "1") && p[i] <= UInt8(ascii: "9") {
            while i < n && isDigit(p[i]) { i += 1 }
        } else {
            return nil
        }
        let intDigits = i - intStart
        var fractional = false
        if i < n && p[i] == UInt8(ascii: ".") {
            i += 1
            let fracStart = i
            while i < n && isDigit(p[i]) { i += 1 }
            guard i > fracStart else { return nil }
            fractional = true
        }
        var exponent = 0
        if i < n && (p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E")) {
            i += 1
            var negative = false
            if i < n && (p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-")) {
                negative = p[i] == UInt8(ascii: "-")
                i += 1
            }
            let expStart = i
            while i < n && isDigit(p[i]) {
                if exponent < 100_000 { exponent = exponent * 10 + Int(p[i] &- UInt8(ascii: "0")) }
                i += 1
            }
            guard i > expStart else { return nil }
            if negative { exponent = -exponent }
            fractional = true
        }
        // Only a number whose decimal magnitude can reach 10^308 needs the exact overflow check.
        if intDigits + exponent > 300 {
            let value = parseDouble(p + start, i - start)
            guard value.isFinite else { return nil }
        }
        return (i, fractional)
    }

    @inline(__always)
    static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    /// Whether a number token starts with its minus sign (its digits then start at 1).
    @inline(__always)
    static func isMinus(_ p: UnsafePointer<UInt8>) -> Bool { p[0] == UInt8(ascii: "-") }

    /// The value of an integral number that fits in Int64: `3`, `-7`, `3.0`, `1e3`; nil for `3.5`,
    /// `1e19` or anything else. `token` is a grammatically valid JSON number.
    @inline(__always)
    public static func int64(_ p: UnsafePointer<UInt8>, _ count: Int, fractional: Bool) -> Int64? {
        if !fractional {
            let negative = isMinus(p)
            var i = negative ? 1 : 0
            if count &- i <= 18 {
                // At most 18 digits: below 10^18, no overflow to check.
                var value: Int64 = 0
                while i < count {
                    value = value &* 10 &+ Int64(p[i] &- UInt8(ascii: "0"))
                    i &+= 1
                }
                return negative ? 0 &- value : value
            }
            // Accumulate negatively so that Int64.min parses.
            var value: Int64 = 0
            while i < count {
                let digit = Int64(p[i] &- UInt8(ascii: "0"))
                let (m, o1) = value.multipliedReportingOverflow(by: 10)
                let (s, o2) = m.subtractingReportingOverflow(digit)
                if o1 || o2 { return nil }
                value = s
                i += 1
            }
            if negative { return value }
            return value == Int64.min ? nil : -value
        }
        let d = parseDouble(p, count)
        guard d.isFinite, d == d.rounded(.towardZero), d >= -9.223372036854775808e18, d < 9.223372036854775808e18
        else { return nil }
        return Int64(d)
    }

    /// Powers of ten exactly representable as Double.
    private static let exactPowers:
        (
            Double, Double, Double, Double, Double, Double, Double, Double, Double, Double, Double, Double,
            Double, Double, Double, Double, Double, Double, Double, Double, Double, Double, Double
        ) = (
            1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
            1e17, 1e18, 1e19, 1e20, 1e21, 1e22
        )

    @inline(__always)
    private static func power(_ k: Int) -> Double {
        withUnsafeBytes(of: exactPowers) { $0.load(fromByteOffset: k * 8, as: Double.self) }
    }

    /// The correctly rounded Double of a grammatically valid JSON number token.
    /// Fast path (Clinger): at most 15 significant digits and a decimal exponent within ±22, where
    /// one exact multiplication or division rounds correctly. Otherwise libc's `strtod`.
    public static func parseDouble(_ p: UnsafePointer<UInt8>, _ count: Int) -> Double {
        let negative = isMinus(p)
        var i = negative ? 1 : 0
        // The common token first: at most 15 digits (leading zeros counted), a fraction, no exponent. The
        // mantissa is below 10^15 and the scale within 10^-15: one exact division, as the Clinger path below
        // computes it (the same mantissa and power of ten), without its per-digit bookkeeping.
        if count &- i <= 17 {
            var mantissa: UInt64 = 0
            var j = i
            while j < count && isDigit(p[j]) {
                mantissa = mantissa &* 10 &+ UInt64(p[j] &- UInt8(ascii: "0"))
                j &+= 1
            }
            var fractionDigits = 0
            if j < count && p[j] == UInt8(ascii: ".") {
                j &+= 1
                let fractionStart = j
                while j < count && isDigit(p[j]) {
                    mantissa = mantissa &* 10 &+ UInt64(p[j] &- UInt8(ascii: "0"))
                    j &+= 1
                }
                fractionDigits = j &- fractionStart
            }
            if j == count && j &- i &- (fractionDigits > 0 ? 1 : 0) <= 15 {
                // 10^fractionDigits by products of ten, each exact (every power of ten to 10^22 is a Double): a
                // read of `power`'s table would copy it to the stack.
                var scale = 1.0
                for _ in 0..<fractionDigits { scale *= 10 }
                let value = fractionDigits == 0 ? Double(mantissa) : Double(mantissa) / scale
                return negative ? -value : value
            }
        }
        var mantissa: UInt64 = 0
        var digits = 0
        var scale = 0
        var sawNonZero = false
        while i < count && isDigit(p[i]) {
            let d = p[i] &- UInt8(ascii: "0")
            if d != 0 || sawNonZero {
                sawNonZero = true
                digits += 1
                if digits <= 19 { mantissa = mantissa &* 10 &+ UInt64(d) } else { scale += 1 }
            }
            i += 1
        }
        if i < count && p[i] == UInt8(ascii: ".") {
            i += 1
            while i < count && isDigit(p[i]) {
                let d = p[i] &- UInt8(ascii: "0")
                if d != 0 || sawNonZero {
                    sawNonZero = true
                    digits += 1
                    if digits <= 19 {
                        mantissa = mantissa &* 10 &+ UInt64(d)
                        scale -= 1
                    }
                } else {
                    scale -= 1
                }
                i += 1
            }
        }
        var exponent = 0
        if i < count && (p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E")) {
            i += 1
            var expNegative = false
            if p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-") {
                expNegative = p[i] == UInt8(ascii: "-")
                i += 1
            }
            while i < count {
                if exponent < 100_000 { exponent = exponent * 10 + Int(p[i] &- UInt8(ascii: "0")) }
                i += 1
            }
            if expNegative { exponent = -exponent }
        }
        if !sawNonZero { return negative ? -0.0 : 0.0 }
        let e = scale + exponent
        if digits <= 15 && e >= -22 && e <= 22 {
            var value = Double(mantissa)
            value = e >= 0 ? value * power(e) : value / power(-e)
            return negative ? -value : value
        }
        return slowParse(p, count)
    }

    private static func slowParse(_ p: UnsafePointer<UInt8>, _ count: Int) -> Double {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: count + 1) { buffer in
            let raw = UnsafeMutableRawPointer(buffer.baseAddress!)
            raw.copyMemory(from: p, byteCount: count)
            buffer[count] = 0
            return strtod(buffer.baseAddress!, nil)
        }
    }
}
