@testable import FanoutServe
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

    static func token(_ keys: Keys, key: String, kid: String, iss: String, iat: String) throws -> [UInt8] {
        let signed = b64url(Array(#"{"alg":"ES256","kid":"\#(kid)"}"#.utf8)) + "."
            + b64url(Array(#"{"iss":"\#(iss)","iat":\#(iat)}"#.utf8))
        let der = try openssl(["dgst", "-sha256", "-sign", keys.path("\(key).pem")], input: Data(signed.utf8))
        return Array("bearer \(signed).\(b64url(Array(der)))".utf8)
    }

    @Test("valid, tampered, foreign, expired, refreshed too often, another key id")
    func rules() throws {
        let keys = try Self.makeKeys()
        let auth = ProviderAuth(
            team: "TEAM000001",
            keys: [
                "KEYA": try ES256Key(pem: Array(try Data(contentsOf: URL(fileURLWithPath: keys.path("a.pub")))), name: "a"),
                "KEYB": try ES256Key(pem: Array(try Data(contentsOf: URL(fileURLWithPath: keys.path("b.pem")))), name: "b"),
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

    @Test("a key that is not P-256 is refused with its name")
    func badKeys() throws {
        #expect(throws: TLSError.self) { try ES256Key(pem: Array("not a key".utf8), name: "x.pem") }
        let keys = try Self.makeKeys()
        _ = try Self.openssl(["genrsa", "-out", keys.path("rsa.pem"), "2048"])
        let rsa = Array(try Data(contentsOf: URL(fileURLWithPath: keys.path("rsa.pem"))))
        #expect(throws: TLSError.self) { try ES256Key(pem: rsa, name: "rsa.pem") }
    }
}
