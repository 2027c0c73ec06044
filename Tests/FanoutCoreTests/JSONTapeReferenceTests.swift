import Testing

@testable import FanoutCore

/// The scanner as it was before its state moved into registers and its steps into one loop (f73176a), kept here
/// as the reference: the tape's scan must give the same verdict, the same stop offset and the same entries on
/// any bytes.
private struct ReferenceTape {
    typealias Entry = JSONTape.Entry
    typealias Kind = JSONTape.Kind
    var entries: [Entry] = []

    mutating func scan(_ bytes: UnsafeRawBufferPointer) -> Int? {
        entries.removeAll()
        guard let start = bytes.baseAddress, bytes.count > 0 else { return 0 }
        let p = start.assumingMemoryBound(to: UInt8.self)
        let n = bytes.count
        // The innermost open container, or -1. While a container is open its `next` holds the index
        // of the container around it (its final value is set when it closes), so no stack is needed.
        var top = -1
        var i = skipWhitespace(p, 0, n)
        // State machine: expectValue, after a value: expect ',' or a closing bracket.
        var expectingKeyOrClose = false  // just after '{'
        var expectingValueOrClose = false  // just after '['
        while true {
            // --- parse one value (or a key when inside an object awaiting a key) ---
            if i >= n { return i }
            var c = p[i]
            if expectingKeyOrClose {
                expectingKeyOrClose = false
                if c == UInt8(ascii: "}") {
                    closeContainer(&top, at: i + 1)
                    i += 1
                    if let stop = afterValue(p, &i, n, &top, &expectingKeyOrClose) { return stop == -1 ? nil : stop }
                    continue
                }
                guard c == UInt8(ascii: "\"") else { return i }
                guard scanKeyAndColon(p, &i, n) else { return i }
                guard i < n else { return i }  // `{"a":` ends at the colon: no value to read
                c = p[i]
            } else if expectingValueOrClose {
                expectingValueOrClose = false
                if c == UInt8(ascii: "]") {
                    closeContainer(&top, at: i + 1)
                    i += 1
                    if let stop = afterValue(p, &i, n, &top, &expectingKeyOrClose) { return stop == -1 ? nil : stop }
                    continue
                }
            }
            switch c {
            case UInt8(ascii: "{"):
                openContainer(.object, &top, at: i)
                i = skipWhitespace(p, i + 1, n)
                expectingKeyOrClose = true
                continue
            case UInt8(ascii: "["):
                openContainer(.array, &top, at: i)
                i = skipWhitespace(p, i + 1, n)
                expectingValueOrClose = true
                continue
            case UInt8(ascii: "\""):
                var hasEscape = false
                guard let end = JSONTape.scanString(p, i + 1, n, hadEscape: &hasEscape) else { return i }
                appendLeaf(.string, flag: hasEscape, start: i + 1, end: end)
                i = end + 1
            case UInt8(ascii: "t"):
                guard matchLiteral(p, i, n, "true") else { return i }
                appendLeaf(.bool, flag: true, start: i, end: i + 4)
                i += 4
            case UInt8(ascii: "f"):
                guard matchLiteral(p, i, n, "false") else { return i }
                appendLeaf(.bool, flag: false, start: i, end: i + 5)
                i += 5
            case UInt8(ascii: "n"):
                guard matchLiteral(p, i, n, "null") else { return i }
                appendLeaf(.null, flag: false, start: i, end: i + 4)
                i += 4
            default:
                guard let (end, fractional) = JSONNumber.scan(p, i, n) else { return i }
                appendLeaf(.number, flag: fractional, start: i, end: end)
                i = end
            }
            if let stop = afterValue(p, &i, n, &top, &expectingKeyOrClose) { return stop == -1 ? nil : stop }
        }
    }

    /// After a complete value: either the document ends (returns -1 = success), a separator or a
    /// closing bracket follows (continues the loop, returns nil), or the bytes are wrong (offset).
    @inline(__always)
    private mutating func afterValue(
        _ p: UnsafePointer<UInt8>, _ i: inout Int, _ n: Int, _ top: inout Int, _ expectingKey: inout Bool
    ) -> Int? {
        while true {
            i = skipWhitespace(p, i, n)
            guard top >= 0 else {
                return i == n ? -1 : i
            }
            guard i < n else { return i }
            let c = p[i]
            let isObject = entries[top].kind == .object
            if c == UInt8(ascii: ",") {
                i = skipWhitespace(p, i + 1, n)
                if isObject {
                    guard i < n, p[i] == UInt8(ascii: "\"") else { return i }
                    guard scanKeyAndColon(p, &i, n) else { return i }
                }
                return nil
            }
            if c == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                closeContainer(&top, at: i + 1)
                i += 1
                continue
            }
            return i
        }
    }

    /// Scans a key string at `i` and the colon after it; leaves `i` at the value.
    @inline(__always)
    private mutating func scanKeyAndColon(_ p: UnsafePointer<UInt8>, _ i: inout Int, _ n: Int) -> Bool {
        var hasEscape = false
        guard let end = JSONTape.scanString(p, i + 1, n, hadEscape: &hasEscape) else { return false }
        appendLeaf(.string, flag: hasEscape, start: i + 1, end: end)
        i = skipWhitespace(p, end + 1, n)
        guard i < n, p[i] == UInt8(ascii: ":") else { return false }
        i = skipWhitespace(p, i + 1, n)
        return true
    }

    @inline(__always)
    private mutating func openContainer(_ kind: Kind, _ top: inout Int, at start: Int) {
        let index = entries.count
        append(
            Entry(
                kind: kind, flag: false, start: Int32(truncatingIfNeeded: start), end: 0,
                next: Int32(truncatingIfNeeded: top)))
        top = index
    }

    @inline(__always)
    private mutating func closeContainer(_ top: inout Int, at end: Int) {
        let index = top
        top = Int(entries[index].next)
        entries[index].end = Int32(truncatingIfNeeded: end)
        entries[index].next = Int32(truncatingIfNeeded: entries.count)
    }

    @inline(__always)
    private mutating func appendLeaf(_ kind: Kind, flag: Bool, start: Int, end: Int) {
        append(
            Entry(
                kind: kind, flag: flag, start: Int32(truncatingIfNeeded: start),
                end: Int32(truncatingIfNeeded: end), next: Int32(truncatingIfNeeded: entries.count &+ 1)))
    }

    private mutating func append(_ entry: Entry) { entries.append(entry) }

    @inline(__always)
    private func skipWhitespace(_ p: UnsafePointer<UInt8>, _ start: Int, _ n: Int) -> Int {
        var i = start
        while i < n {
            let c = p[i]
            if c > 0x20 { break }
            if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { i += 1 } else { break }
        }
        return i
    }

    @inline(__always)
    private func matchLiteral(_ p: UnsafePointer<UInt8>, _ i: Int, _ n: Int, _ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard i + count <= n else { return false }
        let l = literal.utf8Start
        for k in 0..<count where p[i + k] != l[k] { return false }
        return true
    }

}

@Suite("JSONTape against the reference scanner")
struct JSONTapeReferenceTests {
    static let seeds = [
        #"{"aps":{"timestamp":1700000001,"event":"update","content-state":{"homeTeam":"Real Sociedad","#
            + #""homeScore":1,"period":null,"possession":0.49,"final":false,"list":[1,[],{},"x"]},"#
            + #""stale-date":1700003600,"relevance-score":50.0}}"#,
        #" { "a" : [ 1 , -2.5e3 , 0 , true , false , null , "x\u00e9\n" ] , "b" : { } , "c" : [ ] } "#,
        #"[{"k":"v"},{"k\"":"é😀"},[[[]]],"\ud83d\ude00",1e-400,-0]"#,
    ]

    /// What a mutation puts in: structural bytes, whitespace, escapes, digits and bytes that break UTF-8.
    static let alphabet: [UInt8] =
        Array(#"{}[]:,"\ u0123456789eE.+-tfnrl"#.utf8) + [0x09, 0x0A, 0x01, 0x80, 0xC3, 0xE9]

    func same(_ bytes: [UInt8]) -> Bool {
        var tape = JSONTape()
        var reference = ReferenceTape()
        let (stop, expectedStop) = bytes.withUnsafeBytes { (tape.scan($0), reference.scan($0)) }
        guard stop == expectedStop else { return false }
        if stop != nil { return true }  // a rejected document's entries are not read
        let entries = tape.entries
        guard entries.count == reference.entries.count else { return false }
        for (a, b) in zip(entries, reference.entries)
        where a.kind != b.kind || a.flag != b.flag || a.start != b.start || a.end != b.end || a.next != b.next {
            return false
        }
        return true
    }

    @Test func mutatedDocumentsScanAsBefore() {
        var g = SplitMix64(seed: 32)
        var accepted = 0
        for seed in Self.seeds {
            let original = Array(seed.utf8)
            #expect(same(original), "\(seed)")
            for _ in 0..<4000 {
                var bytes = original
                for _ in 0..<(1 + Int(g.next() % 3)) {
                    let at = Int(g.next() % UInt64(bytes.count + 1))
                    let byte = Self.alphabet[Int(g.next() % UInt64(Self.alphabet.count))]
                    switch g.next() % 3 {
                    case 0: bytes.insert(byte, at: at)
                    case 1: if at < bytes.count { bytes.remove(at: at) }
                    default: if at < bytes.count { bytes[at] = byte }
                    }
                }
                // Every prefix too: documents cut anywhere, near the end of the bytes.
                let cut = Int(g.next() % UInt64(bytes.count + 1))
                #expect(same(bytes), "\(String(decoding: bytes, as: UTF8.self))")
                #expect(same(Array(bytes[0..<cut])), "\(String(decoding: bytes[0..<cut], as: UTF8.self))")
                var tape = JSONTape()
                if bytes.withUnsafeBytes({ tape.scan($0) }) == nil { accepted += 1 }
            }
        }
        #expect(accepted > 100, "the mutations keep some documents valid")
    }
}
