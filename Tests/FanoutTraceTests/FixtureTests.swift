import FanoutCore
import Foundation
import Testing

@testable import FanoutTrace

/// The hand-written traces under Fixtures/: each replay must produce its expected dump byte for byte,
/// and each unreadable trace must stop at its line. The expected files were written from the specs,
/// not produced by this code (see Fixtures/README.md).
enum Fixtures {
    static let root = Bundle.module.resourceURL!.appendingPathComponent("Fixtures")

    static func names(_ folder: String, suffix: String) -> [String] {
        let url = root.appendingPathComponent(folder)
        let files = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return files.filter { $0.hasSuffix(suffix) }.map { String($0.dropLast(suffix.count)) }.sorted()
    }

    static func path(_ folder: String, _ file: String) -> String {
        root.appendingPathComponent(folder).appendingPathComponent(file).path
    }
}

@Suite("Replay fixtures")
struct FixtureTests {
    @Test("fixtures are present", .tags(.fixtures))
    func present() {
        #expect(Fixtures.names("replay", suffix: ".trace.jsonl").count >= 12)
        #expect(Fixtures.names("unreadable", suffix: ".trace.jsonl").count >= 12)
    }

    @Test(
        "replay matches the hand-written dump byte for byte", .tags(.fixtures),
        arguments: Fixtures.names("replay", suffix: ".trace.jsonl"))
    func replay(name: String) throws {
        let replay = try TraceReplay.replay(path: Fixtures.path("replay", "\(name).trace.jsonl"))
        let dump = String(decoding: StateDump.render(replay.pipeline!, nowMillis: replay.nowMillis), as: UTF8.self)
        let expected = try String(contentsOfFile: Fixtures.path("replay", "\(name).dump.jsonl"), encoding: .utf8)
        let got = dump.split(separator: "\n", omittingEmptySubsequences: false)
        let want = expected.split(separator: "\n", omittingEmptySubsequences: false)
        for (k, (g, w)) in zip(got, want).enumerated() where g != w {
            Issue.record("\(name) dump line \(k + 1):\n  got:  \(g)\n  want: \(w)")
        }
        #expect(got.count == want.count, "\(name): \(got.count) dump lines, expected \(want.count)")
        #expect(replay.pipeline!.accounting.identitiesHold)
    }

    @Test(
        "an unreadable trace stops at its line", .tags(.fixtures),
        arguments: Fixtures.names("unreadable", suffix: ".trace.jsonl"))
    func unreadable(name: String) throws {
        let expectedLine = Int(
            try String(contentsOfFile: Fixtures.path("unreadable", "\(name).line"), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines))!
        do {
            _ = try TraceReplay.replay(path: Fixtures.path("unreadable", "\(name).trace.jsonl"))
            Issue.record("\(name): replayed without error, expected a stop at line \(expectedLine)")
        } catch let error as TraceError {
            #expect(error.line == expectedLine, "\(name): \(error)")
        }
    }
}

extension Tag {
    @Tag static var fixtures: Self
}
