import Foundation
import Testing

/// Runs the built `fanout` executable as a user would.
enum CLI {
    static var binary: URL {
        // The test bundle sits next to the products in .build/<triple>/<config>/.
        var url = Bundle.module.bundleURL.deletingLastPathComponent()
        url.appendPathComponent("fanout")
        return url
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func run(_ arguments: [String]) throws -> Result {
        try launch(binary, arguments)
    }

    /// Runs `executable` to its end, with its output and errors collected.
    static func launch(_ executable: URL, _ arguments: [String]) throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Both pipes drained at once: a child that fills one while the test waits on the other would hang.
        final class Box: @unchecked Sendable { var data = Data() }
        let errors = Box()
        let done = DispatchSemaphore(value: 0)
        Thread {
            errors.data = err.fileHandleForReading.readDataToEndOfFile()
            done.signal()
        }.start()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        done.wait()
        let stderr = errors.data
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// A file that may still be being written (a server's stderr, polled), as text: read with plain POSIX
    /// calls, and a read cut in the middle of a multi-byte character decodes with a replacement character.
    /// (FoundationEssentials' file reading, under `String(contentsOf:)` and `FileManager.contents(atPath:)`,
    /// leaks its buffer when the file grows while it reads: LeakSanitizer saw 237 KB to 2.5 MB under the serve
    /// tests' polling.)
    static func text(of url: URL) -> String {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

let header =
    #"{"trace": 1, "epoch": 1700000000, "schemas": {"S": {"n": "int"}}, "limits": {"perApp": 5, "perDevice": 10}, "budgetPerHour": null}"#
let request =
    #"{"at": 0, "op": "request", "device": "d1", "app": "com.x", "activity": "a1", "type": "S", "attributes": {}, "state": {"n": 1}, "staleDate": null, "relevance": 0, "token": "aa01", "channel": null}"#
let push =
    #"{"at": 5, "op": "push", "token": "aa01", "pushType": "liveactivity", "topic": "com.x.push-type.liveactivity", "priority": 10, "expiration": 0, "collapseId": null, "apnsId": null, "payload": "{\"aps\":{\"timestamp\":10,\"event\":\"update\",\"content-state\":{\"n\":2}}}"}"#

@Suite("fanout replay (the executable)")
struct ReplayCommandTests {
    @Test("replays, prints the summary and writes the dump")
    func replays() throws {
        let dir = try CLI.temporaryDirectory()
        let trace = dir.appendingPathComponent("t.jsonl")
        try [header, request, push].joined(separator: "\n").write(to: trace, atomically: true, encoding: .utf8)
        let dump = dir.appendingPathComponent("out.jsonl")
        let result = try CLI.run(["replay", trace.path, "--dump", dump.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("pushes      1 = rejected 0 + unroutable 0 + routed 1"))
        #expect(result.stdout.contains("deliveries  1: applied 1"))
        #expect(result.stdout.contains("identities  hold"))
        #expect(result.stdout.contains("lines/s"))
        let written = try String(contentsOf: dump, encoding: .utf8)
        #expect(
            written.hasPrefix(
                #"{"activity": "a1", "device": "d1", "app": "com.x", "state": "active", "timestamp": 10, "content": {"n": 2}, "staleDate": null, "relevance": 0.0, "outcomes": {"applied": 1}}"#
            ))
    }

    @Test("an unreadable line: `line N: …` on stderr, exit 1, no dump file")
    func unreadable() throws {
        let dir = try CLI.temporaryDirectory()
        let trace = dir.appendingPathComponent("bad.jsonl")
        try [header, request, #"{"at": 7, "op": "launch"}"#, push].joined(separator: "\n")
            .write(to: trace, atomically: true, encoding: .utf8)
        let dump = dir.appendingPathComponent("out.jsonl")
        let result = try CLI.run(["replay", trace.path, "--dump", dump.path])
        #expect(result.status == 1)
        #expect(result.stderr.contains("bad.jsonl: line 3: field op: unknown op \"launch\""), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dump.path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["bad.jsonl"])
    }

    @Test("a missing trace file is named in the error")
    func missingFile() throws {
        let result = try CLI.run(["replay", "/nonexistent/trace.jsonl"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("/nonexistent/trace.jsonl: No such file or directory"), "\(result.stderr)")
    }

    @Test("a bad flag is a usage error")
    func badFlag() throws {
        let result = try CLI.run(["replay", "--dumpp", "x"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("Unknown option '--dumpp'"), "\(result.stderr)")
    }
}
