import FanoutCore
import Foundation
import Testing

@testable import FanoutTrace

/// `TracePushes`: a trace's push lines as `fanout push` sends them, read by the replay's own rules.
@Suite("Trace push lines")
struct TracePushesTests {
    static let header = #"{"trace": 1, "epoch": 1700000000, "schemas": {"S": {"n": "int"}}}"#

    static func push(_ at: Int, _ target: String, priority: String, expiration: String, apnsId: String) -> String {
        #"{"at": \#(at), "op": "push", \#(target), "pushType": "liveactivity", "#
            + #""topic": "com.example.a.push-type.liveactivity", "priority": \#(priority), "#
            + #""expiration": \#(expiration), "collapseId": null, "apnsId": \#(apnsId), "#
            + #""payload": "{\"aps\":{\"event\":\"upd\u00e9"}"#
    }

    @Test("header values as wire text: a string as it is, an integral number as an integer, others as JSON text")
    func values() throws {
        let text = [
            Self.header,
            #"{"at": 0, "op": "startToken", "device": "d1", "app": "com.example.a", "token": "bb02"}"#,
            Self.push(5, #""token": "aa01""#, priority: "10.0", expiration: "true", apnsId: "null"),
            Self.push(7, #""channel": "Y2g=""#, priority: "\"5\"", expiration: "1e3", apnsId: #""id-1""#),
            Self.push(9, #""startToken": "bb02", "newActivity": "a9", "newToken": "cc09""#, priority: "3.5",
                expiration: "{}", apnsId: "null"),
            #"{"at": 10, "op": "advance"}"#,
        ].joined(separator: "\n")
        let t = try TracePushes.read(text: text)
        #expect(t.lineCount == 6 && t.epochSeconds == 1_700_000_000)
        #expect(t.otherOps == ["startToken": 1, "advance": 1])
        #expect(t.pushes.map(\.line) == [3, 4, 5] && t.pushes.map(\.atMillis) == [5, 7, 9])
        #expect(t.pushes.map(\.target) == [.token, .channel, .startToken])
        func s(_ r: Range<Int>?) -> String? { r.map { String(decoding: t[$0], as: UTF8.self) } }
        #expect(t.pushes.map { s($0.address) } == ["aa01", "Y2g=", "bb02"])
        #expect(t.pushes.map { s($0.priority) } == ["10", "5", "3.5"])
        #expect(t.pushes.map { s($0.expiration) } == ["true", "1000", "{}"])
        #expect(t.pushes.map { s($0.apnsId) } == [nil, "id-1", nil])
        #expect(t.pushes.allSatisfy { s($0.collapseId) == nil && s($0.pushType) == "liveactivity" })
        // The payload unescaped to its exact bytes, malformed as it is.
        #expect(t.pushes.allSatisfy { Array(t[$0.payload]) == Array(#"{"aps":{"event":"updé"#.utf8) })
    }

    @Test("every fixture: the push lines are the trace's; an unreadable one fails at the replay's line")
    func fixtures() throws {
        for name in Fixtures.names("replay", suffix: ".trace.jsonl") {
            let path = Fixtures.path("replay", name + ".trace.jsonl")
            let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
            let pushes = lines.filter {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["op"] as? String == "push"
            }.count
            let t = try TracePushes.read(path: path)
            #expect(t.pushes.count == pushes, "\(name)")
        }
        for name in Fixtures.names("unreadable", suffix: ".trace.jsonl") {
            let path = Fixtures.path("unreadable", name + ".trace.jsonl")
            var replayError: TraceError?
            do { _ = try TraceReplay.replay(path: path) } catch let error as TraceError { replayError = error }
            #expect(throws: replayError!, "\(name)") { _ = try TracePushes.read(path: path) }
        }
    }
}
