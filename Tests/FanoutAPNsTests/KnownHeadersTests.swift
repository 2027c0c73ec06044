import FanoutCore
@testable import FanoutAPNs
import Testing

/// The one-pass index of the headers APNs reads answers exactly as scanning the list does (the judge's verdicts
/// depend on it: a missing header, a repeated one, a name in another case).
@Suite("KnownHeaders: the index answers as a scan of the header list")
struct KnownHeadersTests {
    static let names = [
        "apns-id", "apns-request-id", "apns-push-type", "apns-topic", "apns-priority", "apns-collapse-id",
        "apns-expiration", "apns-channel-id", "authorization",
    ]

    func list(_ pairs: [(String, String)]) -> HeaderList {
        HeaderList(pairs.map { (name: Array($0.0.utf8), value: Array($0.1.utf8)) })
    }

    /// Every known name's value and the duplicate verdict, through the index and through the list's own scan.
    func expectSame(_ pairs: [(String, String)], sourceLocation: SourceLocation = #_sourceLocation) {
        let headers = list(pairs)
        let known = KnownHeaders(headers)
        #expect(known.hasDuplicates == headers.hasDuplicates, "\(pairs)", sourceLocation: sourceLocation)
        for name in KnownHeaders.Name.allCases {
            let scanned: ArraySlice<UInt8>? = headers.value(name.text)
            #expect(
                known.value(name, in: headers).map(Array.init) == scanned.map(Array.init), "\(name) in \(pairs)",
                sourceLocation: sourceLocation)
        }
    }

    @Test("each name found, missing ones absent, the first of a repeated header is its value")
    func lookups() {
        expectSame([])
        expectSame(Self.names.enumerated().map { ($0.element, "v\($0.offset)") })
        expectSame(Self.names.reversed().enumerated().map { ($0.element, "v\($0.offset)") })
        expectSame([("apns-topic", "a"), ("apns-topic", "b")])
        expectSame([("apns-id", ""), ("apns-push-type", "liveactivity")])
        let headers = list([("apns-topic", "first"), ("user-agent", "x"), ("apns-topic", "second")])
        #expect(KnownHeaders(headers).value(.apnsTopic, in: headers).map(Array.init) == Array("first".utf8))
        #expect(KnownHeaders(headers).hasDuplicates)
        #expect(KnownHeaders(headers).value(.apnsId, in: headers) == nil)
    }

    @Test("names compared byte for byte: another case, a prefix, a near miss of the same length is not the name")
    func nearMisses() {
        expectSame([("APNS-ID", "x"), ("Apns-Topic", "t"), ("apns-topic", "u")])
        expectSame([("apns-i", "x"), ("apns-idd", "y"), ("apns-ie", "z")])
        expectSame([("apns-xequest-id", "x"), ("apns-expiratiom", "y"), ("apns-channel-ie", "z")])
        expectSame([("authorizatioN", "x"), ("apns-priorit", "y"), ("apns-priority ", "z")])
        expectSame([("apns-request-ix", "1"), ("apns-request-id", "2"), ("apns-request-id", "3")])
    }

    @Test("duplicates: of a known name, of other names, same length but different names are not")
    func duplicates() {
        expectSame([("user-agent", "a"), ("apns-topic", "t")])  // both 10 bytes: no duplicate
        expectSame([("user-agent", "a"), ("apns-topic", "t"), ("user-agent", "b")])
        expectSame([("x-a", "1"), ("x-b", "2"), ("x-c", "3"), ("x-b", "4")])
        expectSame([("authorization", "1"), ("apns-priority", "10"), ("authorization", "2")])
        expectSame([("apns-push-type", "alert"), ("content-length", "10"), ("apns-push-type", "alert")])
        expectSame([("apns-id", "1"), ("APNS-ID", "2")])  // another case: another name, as the scan has it
        expectSame([("", "1"), ("", "2")])
        expectSame([("", "1"), ("a", "2")])
    }

    @Test("a list longer than the index holds: found and judged as the scan does")
    func longList() {
        var pairs = (0..<300).map { ("x-\($0)", "\($0)") }
        pairs.append(("apns-topic", "late"))
        expectSame(pairs)
        pairs.append(("apns-topic", "later"))
        expectSame(pairs)
        pairs.insert(("apns-id", "early"), at: 3)
        expectSame(pairs)
        expectSame((0..<260).map { ("x-\($0)", "\($0)") } + [("x-7", "again")])
    }

    @Test("RequestInput keeps the index in step with its headers")
    func inputIndex() {
        var input = RequestInput(
            method: "POST", path: "/3/device/ab", headers: [("apns-topic", "a")], body: [1])
        #expect(input.header(.apnsTopic).map(Array.init) == Array("a".utf8))
        input.headers = list([("apns-id", "i"), ("apns-id", "j")])
        #expect(input.header(.apnsTopic) == nil)
        #expect(input.header(.apnsId).map(Array.init) == Array("i".utf8))
        #expect(input.known.hasDuplicates)
    }
}

@Suite("RequestCheck.allHexDigits: eight bytes at a time, as a byte-by-byte check")
struct HexDigitsTests {
    @Test("every byte value at every position of tokens of 0 to 19 bytes")
    func everyByte() {
        let hex = Array("0123456789abcdefABCDEF".utf8)
        for length in 0..<20 {
            let base = (0..<length).map { hex[$0 % hex.count] }
            #expect(RequestCheck.allHexDigits(base[...]), "\(length)")
            var differing: [(Int, Int)] = []
            for position in 0..<length {
                for byte in 0...255 {
                    var token = base
                    token[position] = UInt8(byte)
                    let expected = token.allSatisfy(RequestCheck.isHexDigit)
                    if RequestCheck.allHexDigits(token[...]) != expected { differing.append((position, byte)) }
                }
            }
            #expect(differing.isEmpty, "length \(length): (position, byte) \(differing.prefix(8))")
        }
        // A slice not starting at its array's start (the token is the path after "/3/device/").
        let path = Array("/3/device/0123456789abcdefABCDEF0123456789".utf8)
        #expect(RequestCheck.allHexDigits(path[10...]))
        #expect(!RequestCheck.allHexDigits(path[9...]))
    }
}
