import FanoutAPNs
import FanoutWire
import Foundation
import Testing

/// A P-256 key made with openssl (as Apple's `.p8`: PKCS#8 PEM) and its public half.
func makeP8(in directory: URL) throws -> (p8: String, pub: String) {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let ec = directory.appendingPathComponent("key.pem").path
    let p8 = directory.appendingPathComponent("key.p8").path
    let pub = directory.appendingPathComponent("key.pub").path
    for arguments in [
        ["ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", ec],
        ["pkcs8", "-topk8", "-nocrypt", "-in", ec, "-out", p8],
        ["ec", "-in", ec, "-pubout", "-out", pub],
    ] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["openssl"] + arguments
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw HTTPClientError("openssl \(arguments[0]) failed") }
    }
    return (p8, pub)
}

/// PyJWT (nobody here wrote it) decodes `token` with the public key, ES256 only; prints header and claims.
func pyjwtDecode(_ token: String, publicKey: String) throws -> (status: Int32, output: String) {
    let p = Process()
    let out = Pipe()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = [
        "python3", "-c",
        """
        import jwt, json, sys
        key = open(sys.argv[2]).read()
        claims = jwt.decode(sys.argv[1], key, algorithms=["ES256"], options={"verify_iat": False})
        print(json.dumps([jwt.get_unverified_header(sys.argv[1]), claims], sort_keys=True))
        """, token, publicKey,
    ]
    p.standardOutput = out
    p.standardError = out
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

@Suite("ES256 signing and APNs provider tokens")
struct ProviderTokenTests {
    @Test("tokens signed from a .p8 verify with PyJWT (R‖S, 64 bytes) and with the server's ES256Key")
    func pyjwtVerifies() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-jwt-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (p8, pub) = try makeP8(in: dir)
        let signer = try ES256Signer(pem: Array(try Data(contentsOf: URL(fileURLWithPath: p8))), name: p8)
        let verifier = try ES256Key(pem: Array(try Data(contentsOf: URL(fileURLWithPath: pub))), name: pub)
        for k in 0..<20 {  // R or S with a leading zero byte comes up now and then: the padding must hold
            let message = Array("message \(k)".utf8)
            let signature = try signer.sign(message)
            #expect(signature.count == 64)
            #expect(message.withUnsafeBytes { verifier.verify(message: $0, signature: signature) })
        }
        let token = try ProviderToken.sign(keyId: "KEY1234567", team: "TEAM123456", iat: 1_700_000_000, signer: { try signer.sign($0) })
        let decoded = try pyjwtDecode(String(decoding: token, as: UTF8.self), publicKey: pub)
        #expect(decoded.status == 0, "\(decoded.output)")
        #expect(
            decoded.output.trimmingCharacters(in: .whitespacesAndNewlines)
                == #"[{"alg": "ES256", "kid": "KEY1234567", "typ": null}, {"iat": 1700000000, "iss": "TEAM123456"}]"#
                || decoded.output.trimmingCharacters(in: .whitespacesAndNewlines)
                == #"[{"alg": "ES256", "kid": "KEY1234567"}, {"iat": 1700000000, "iss": "TEAM123456"}]"#,
            "\(decoded.output)")
        let signatureText = token.split(separator: UInt8(ascii: ".")).last!
        #expect(signatureText.count == 86, "64 bytes in base64url without padding")
    }

    @Test("base64url: RFC 4648 test vectors, URL alphabet, no padding")
    func base64url() {
        let cases: [(String, String)] = [
            ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ]
        for (input, expected) in cases {
            #expect(ProviderToken.base64url(Array(input.utf8)) == Array(expected.utf8))
        }
        #expect(ProviderToken.base64url([0xfb, 0xff]) == Array("-_8".utf8))
    }

    @Test("the token is kept until refreshSeconds, then replaced with a new iat; 20–59 minutes only")
    func refresh() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-jwt-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (p8, _) = try makeP8(in: dir)
        let signer = try ES256Signer(pem: Array(try Data(contentsOf: URL(fileURLWithPath: p8))), name: p8)
        let token = ProviderToken(keyId: "K", team: "T", signer: { try signer.sign($0) }, refreshSeconds: 30 * 60)
        let t0: Int64 = 1_700_000_000
        let first = try token.authorization(nowSeconds: t0)
        #expect(first.starts(with: Array("bearer ".utf8)))
        #expect(try token.authorization(nowSeconds: t0 + 29 * 60 + 59) == first)
        #expect(token.tokensIssued == 1 && token.issuedAt == t0)
        let second = try token.authorization(nowSeconds: t0 + 30 * 60)
        #expect(second != first && token.issuedAt == t0 + 30 * 60 && token.tokensIssued == 2)
        #expect(ProviderToken.minRefreshSeconds == 1200 && ProviderToken.maxRefreshSeconds == 3540)
    }

    @Test("a key that is not P-256, or not a private key, is refused with a reason")
    func badKeys() throws {
        #expect(throws: TLSError.self) { try ES256Signer(pem: Array("not a key".utf8), name: "x") }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-jwt-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (_, pub) = try makeP8(in: dir)
        #expect(throws: TLSError.self) {
            try ES256Signer(pem: Array(try Data(contentsOf: URL(fileURLWithPath: pub))), name: pub)
        }
    }
}
