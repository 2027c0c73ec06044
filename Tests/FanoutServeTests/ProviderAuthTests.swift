import FanoutCore
@testable import FanoutAPNs
@testable import FanoutServe
import FanoutSim
import FanoutWire
import Foundation
import Testing

/// Provider tokens signed by `openssl` (a P-256 key made by the test; DER signatures as openssl writes them).
@Suite("ProviderAuth: ES256 tokens, their age and their refresh rate")
struct ProviderAuthTests {
    struct Keys {
        var dir: URL
        func path(_ name: String) -> String { dir.appendingPathComponent(name).path }
    }

    static func openssl(_ arguments: [String], input: Data? = nil) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        let out = Pipe()
        let inPipe = Pipe()
        process.standardOutput = out
        process.standardInput = inPipe
        try process.run()
        if let input { inPipe.fileHandleForWriting.write(input) }
        try inPipe.fileHandleForWriting.close()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CLIError(description: "openssl \(arguments) failed") }
        return data
    }

    struct CLIError: Error { var description: String }

    static func makeKeys() throws -> Keys {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-jwt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let keys = Keys(dir: dir)
        for k in ["a", "b"] {
            _ = try openssl(["ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", keys.path("\(k).pem")])
            _ = try openssl(["ec", "-in", keys.path("\(k).pem"), "-pubout", "-out", keys.path("\(k).pub")])
        }
        return keys
    }

    static func b64url(_ bytes: [UInt8]) -> String {
        Base64.encode(bytes).replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// How a test token is signed.
    enum Signature {
        /// ES256 as openssl writes it (DER), or converted to JWS R‖S.
        case der, raw
        /// HMAC-SHA256 with the given secret (an `HS256` token).
        case hmac(String)
        /// No signature (`alg: none`).
        case none
    }

    static func token(
        _ keys: Keys, key: String, kid: String, iss: String, iat: String, alg: String = "ES256",
        signature: Signature = .der
    ) throws -> [UInt8] {
        let signed = b64url(Array(#"{"alg":"\#(alg)","kid":"\#(kid)"}"#.utf8)) + "."
            + b64url(Array(#"{"iss":"\#(iss)","iat":\#(iat)}"#.utf8))
        let bytes: [UInt8]
        switch signature {
        case .der, .raw:
            let der = Array(
                try openssl(["dgst", "-sha256", "-sign", keys.path("\(key).pem")], input: Data(signed.utf8)))
            if case .raw = signature { bytes = rawFromDER(der) } else { bytes = der }
        case .hmac(let secret):
            bytes = Array(try openssl(["dgst", "-sha256", "-binary", "-hmac", secret], input: Data(signed.utf8)))
        case .none:
            bytes = []
        }
        return Array("bearer \(signed).\(b64url(bytes))".utf8)
    }

    /// R‖S (32 bytes each) from a DER ECDSA signature `30 len 02 lr R 02 ls S` (P-256: short lengths).
    static func rawFromDER(_ der: [UInt8]) -> [UInt8] {
        precondition(der[0] == 0x30 && der[1] < 0x80)
        var i = 2
        func integer() -> [UInt8] {
            precondition(der[i] == 0x02)
            let n = Int(der[i + 1])
            var value = Array(der[(i + 2)..<(i + 2 + n)])
            i += 2 + n
            while value.count > 32 { value.removeFirst() }
            return [UInt8](repeating: 0, count: 32 - value.count) + value
        }
        return integer() + integer()
    }

    @Test("valid, tampered, foreign, expired, refreshed too often, another key id")
    func rules() throws {
        let keys = try Self.makeKeys()
        let auth = ProviderAuth(
            team: "TEAM000001",
            keys: [
                "KEYA": ProviderKey(try ES256Key(pem: Array(try Data(contentsOf: URL(fileURLWithPath: keys.path("a.pub")))), name: "a")),
                "KEYB": ProviderKey(try ES256Key(pem: Array(try Data(contentsOf: URL(fileURLWithPath: keys.path("b.pem")))), name: "b")),
            ])
        let now: Int64 = 1_800_000_000
        func check(_ token: [UInt8]?, _ state: ProviderAuth.ConnectionState, at t: Int64 = now) -> APNsReason? {
            var became = false
            return auth.check(authorization: token, state: state, nowSeconds: t, becameValid: &became)
        }
        let state = ProviderAuth.ConnectionState()
        #expect(check(nil, state) == .missingProviderToken)
        #expect(check(Array("basic abc".utf8), state) == .missingProviderToken)
        let good = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(now)")
        var tampered = good
        tampered[tampered.count - 5] = tampered[tampered.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(check(tampered, state) == .invalidProviderToken)
        #expect(check(try Self.token(keys, key: "b", kid: "KEYA", iss: "TEAM000001", iat: "\(now)"), state)
            == .invalidProviderToken, "signed by another key")
        #expect(check(try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000002", iat: "\(now)"), state)
            == .invalidProviderToken, "another team")
        #expect(check(try Self.token(keys, key: "a", kid: "NOPE", iss: "TEAM000001", iat: "\(now)"), state)
            == .invalidProviderToken, "unknown key id")
        #expect(check(try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(now - 3601)"), state)
            == .expiredProviderToken)
        var became = false
        #expect(auth.check(authorization: good, state: state, nowSeconds: now, becameValid: &became) == nil && became)
        #expect(check(good, state, at: now + 3600) == nil, "the same token, an hour old")
        #expect(check(good, state, at: now + 3601) == .expiredProviderToken)
        let later = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\"\(now + 600)\"")
        #expect(check(later, state, at: now + 600) == .tooManyProviderTokenUpdates)
        #expect(check(later, state, at: now + 1201) == nil, "after 20 minutes, iat as a numeric string")
        let b = try Self.token(keys, key: "b", kid: "KEYB", iss: "TEAM000001", iat: "\(now + 3000)")
        #expect(check(b, state, at: now + 3000) == .unrelatedKeyIdInToken)
        #expect(check(b, ProviderAuth.ConnectionState(), at: now + 3000) == nil, "a private .pem key verifies too")
    }

    static func auth(_ keys: Keys) throws -> ProviderAuth {
        ProviderAuth(
            team: "TEAM000001",
            keys: ["KEYA": ProviderKey(try ES256Key(pem: Array(try Data(contentsOf: URL(fileURLWithPath: keys.path("a.pub")))), name: "a"))])
    }

    static let now: Int64 = 1_800_000_000

    static func check(
        _ auth: ProviderAuth, _ token: [UInt8], _ state: ProviderAuth.ConnectionState, at t: Int64 = now
    ) -> APNsReason? {
        var notes = ProviderAuth.Notes()
        return auth.check(authorization: token[...], state: state, nowSeconds: t, notes: &notes)
    }

    @Test("alg none and HS256 (signed with the public key as the HMAC secret) are refused")
    func algorithmConfusion() throws {
        let keys = try Self.makeKeys()
        let auth = try Self.auth(keys)
        let pem = String(decoding: try Data(contentsOf: URL(fileURLWithPath: keys.path("a.pub"))), as: UTF8.self)
        let none = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now)", alg: "none",
            signature: .none)
        #expect(Self.check(auth, none, ProviderAuth.ConnectionState()) == .invalidProviderToken)
        let noneSigned = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now)", alg: "none")
        #expect(Self.check(auth, noneSigned, ProviderAuth.ConnectionState()) == .invalidProviderToken,
            "alg none, even with a valid ES256 signature")
        for secret in [pem, "KEYA"] {
            let hs = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now)", alg: "HS256",
                signature: .hmac(secret))
            #expect(Self.check(auth, hs, ProviderAuth.ConnectionState()) == .invalidProviderToken)
        }
        let es = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now)", signature: .raw)
        #expect(Self.check(auth, es, ProviderAuth.ConnectionState()) == nil, "the same claims signed ES256 pass")
    }

    @Test("iat: at most 60 s in the future (InvalidProviderToken beyond), at most an hour old (Expired)")
    func iatWindow() throws {
        let keys = try Self.makeKeys()
        let auth = try Self.auth(keys)
        let skew = ProviderAuth.maxFutureSkewSeconds
        #expect(skew == 60)
        func at(_ iat: Int64) throws -> [UInt8] {
            try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(iat)", signature: .raw)
        }
        #expect(Self.check(auth, try at(Self.now + skew + 1), ProviderAuth.ConnectionState()) == .invalidProviderToken)
        #expect(Self.check(auth, try at(Self.now + 86_400 * 365), ProviderAuth.ConnectionState()) == .invalidProviderToken)
        #expect(Self.check(auth, try at(Self.now + skew), ProviderAuth.ConnectionState()) == nil, "within the skew")
        #expect(Self.check(auth, try at(Self.now + 1), ProviderAuth.ConnectionState()) == nil)
        #expect(Self.check(auth, try at(Self.now - 3600), ProviderAuth.ConnectionState()) == nil)
        #expect(Self.check(auth, try at(Self.now - 3601), ProviderAuth.ConnectionState()) == .expiredProviderToken)
    }

    @Test("extreme iat values are refused without trapping")
    func extremeIat() throws {
        let keys = try Self.makeKeys()
        let auth = try Self.auth(keys)
        let extremes = [
            #""-9223372036854775808""#, #""9223372036854775807""#, "-9223372036854775808", "9223372036854775807",
            "9e18", "-9e18", "1e300", "-1e300", "1800000000.5", "true", "null", #""""#, #""1e3""#,
            "1000000000000001", #""-1000000000000001""#,
        ]
        for iat in extremes {
            let token = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: iat, signature: .raw)
            let state = ProviderAuth.ConnectionState()
            let verdict = Self.check(auth, token, state)
            #expect(verdict == .invalidProviderToken || verdict == .expiredProviderToken, "iat \(iat): \(String(describing: verdict))")
            #expect(Self.check(auth, token, state, at: .max) != nil && Self.check(auth, token, state, at: .min) != nil)
        }
        // The age itself is clamped at both ends of the range.
        #expect(ProviderAuth.age(Self.now, .min) == .max && ProviderAuth.age(Self.now, .max) < -(1 << 62))
        #expect(ProviderAuth.age(.min, .max) == .min && ProviderAuth.age(.max, .min) == .max)
        #expect(ProviderAuth.iat(NSNumber(value: 1e300)) == nil && ProviderAuth.iat("-9223372036854775808") == nil)
        #expect(ProviderAuth.iat("1800000000") == 1_800_000_000 && ProviderAuth.iat(1_800_000_000) == 1_800_000_000)
    }

    @Test("the last refused token is answered from the connection's cache: no parse, no ECDSA")
    func rejectedCache() throws {
        let keys = try Self.makeKeys()
        let auth = try Self.auth(keys)
        let state = ProviderAuth.ConnectionState()
        var tampered = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now)", signature: .raw)
        tampered[tampered.count - 3] = tampered[tampered.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        for _ in 0..<100 { #expect(Self.check(auth, tampered, state) == .invalidProviderToken) }
        #expect(state.verifications == 1)
        let expired = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now - 4000)")
        for _ in 0..<10 { #expect(Self.check(auth, expired, state) == .expiredProviderToken) }
        #expect(state.verifications == 2, "another refused token is verified once, then cached")
        // A token from 90 s in the future is refused, then accepted from the cache once the clock reaches it.
        let early = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now + 90)")
        #expect(Self.check(auth, early, state) == .invalidProviderToken)
        #expect(Self.check(auth, early, state, at: Self.now + 10) == .invalidProviderToken)
        #expect(state.verifications == 3)
        var notes = ProviderAuth.Notes()
        #expect(auth.check(authorization: early[...], state: state, nowSeconds: Self.now + 30, notes: &notes) == nil)
        #expect(notes.becameValid && notes.derSignature && state.verifications == 3)
        for _ in 0..<10 { #expect(Self.check(auth, early, state, at: Self.now + 40) == nil) }
        #expect(Self.check(auth, tampered, state, at: Self.now + 40) == .invalidProviderToken)
        #expect(state.verifications == 4, "the accepted token took the cache's place")
    }

    @Test("DER signatures are accepted and noted (a finding); JWS R‖S is the documented form")
    func derSignatures() throws {
        let keys = try Self.makeKeys()
        let auth = try Self.auth(keys)
        var notes = ProviderAuth.Notes()
        let raw = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now)", signature: .raw)
        #expect(auth.check(authorization: raw[...], state: .init(), nowSeconds: Self.now, notes: &notes) == nil)
        #expect(notes.becameValid && !notes.derSignature)
        notes = ProviderAuth.Notes()
        let der = try Self.token(keys, key: "a", kid: "KEYA", iss: "TEAM000001", iat: "\(Self.now)", signature: .der)
        let state = ProviderAuth.ConnectionState()
        #expect(auth.check(authorization: der[...], state: state, nowSeconds: Self.now, notes: &notes) == nil)
        #expect(notes.derSignature && notes.keyId == "KEYA")
        notes = ProviderAuth.Notes()
        #expect(auth.check(authorization: der[...], state: state, nowSeconds: Self.now, notes: &notes) == nil)
        #expect(!notes.derSignature, "noted once per token, not per request")

        // Served: the finding is counted once per accepted token, with an example.
        var scenario = BuiltinScenarios.named("smoke")!
        scenario.population.devices = 20
        let service = APNsService(scenario: scenario, auth: auth, nowSeconds: Self.now) { 1 }
        let connection = ProviderAuth.ConnectionState()
        for _ in 0..<3 {
            var became = false
            _ = service.handle(
                RequestInput(method: "POST", path: "/3/device/00", headers: [("authorization", String(decoding: der, as: UTF8.self))], body: []),
                auth: connection, wallMillis: Self.now * 1000, becameAuthenticated: &became)
        }
        #expect(service.stats.findings[.derSignature] == 1)
        #expect(service.stats.examples[.derSignature]?.first?.contains("KEYA") == true)
        #expect(connection.verifications == 1)
    }

    @Test("the scheme is bearer in any case, followed by exactly a space")
    func bearer() {
        for ok in ["bearer x", "Bearer x", "BEARER x", "bEaReR x"] { #expect(ProviderAuth.isBearer(Array(ok.utf8)[...])) }
        for bad in ["bearer\0x", "bearer\tx", "beare x", "basic xx", "bearer-x", "Bearer:x"] {
            #expect(!ProviderAuth.isBearer(Array(bad.utf8)[...]), "\(bad)")
        }
    }

    @Test("a key that is not P-256 is refused with its name")
    func badKeys() throws {
        #expect(throws: TLSError.self) { try ES256Key(pem: Array("not a key".utf8), name: "x.pem") }
        let keys = try Self.makeKeys()
        _ = try Self.openssl(["genrsa", "-out", keys.path("rsa.pem"), "2048"])
        let rsa = Array(try Data(contentsOf: URL(fileURLWithPath: keys.path("rsa.pem"))))
        #expect(throws: TLSError.self) { try ES256Key(pem: rsa, name: "rsa.pem") }
    }
}
