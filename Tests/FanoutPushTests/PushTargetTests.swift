import FanoutPush
import Testing

@Suite("fanout push: TARGET")
struct PushTargetTests {
    @Test("http:// is h2c, https:// is TLS; a port is required; IPv6 in brackets")
    func parse() throws {
        #expect(try PushTarget.parse("http://127.0.0.1:8080") == PushTarget(tls: false, host: "127.0.0.1", port: 8080))
        #expect(try PushTarget.parse("https://localhost:443/") == PushTarget(tls: true, host: "localhost", port: 443))
        #expect(try PushTarget.parse("https://[::1]:8443") == PushTarget(tls: true, host: "::1", port: 8443))
        #expect(try PushTarget.parse("https://[::1]:8443").description == "https://[::1]:8443")
        for bad in ["127.0.0.1:80", "http://host", "http://:80", "ftp://h:1", "http://h:0", "http://h:70000",
            "http://h:80/path"]
        {
            #expect(throws: PushTarget.ParseError.self, "\(bad)") { try PushTarget.parse(bad) }
        }
    }
}
