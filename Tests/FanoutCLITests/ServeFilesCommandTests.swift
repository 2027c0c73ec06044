import Foundation
import Testing

/// The files `fanout serve` writes at start and at shutdown: what --state puts in state.jsonl (and says in
/// summary.json and summary.md), no progress line for a start under a second, and a folder that cannot be written: a
/// clear error, a non-zero exit, nothing under the final names.
@Suite("fanout serve: state.jsonl as --state says, the run folder written whole or not at all")
struct ServeFilesCommandTests {
    static func serve(_ more: [String]) throws -> (result: CLI.Result, folder: URL) {
        let folder = try CLI.temporaryDirectory().appendingPathComponent("run")
        let result = try CLI.run(
            ["serve", "smoke", "--h2c", "--listen", "127.0.0.1:0", "--duration", "0.5", "--out", folder.path] + more)
        return (result, folder)
    }

    static func summary(_ folder: URL) throws -> [String: Any] {
        let data = try Data(contentsOf: folder.appendingPathComponent("summary.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("default (500 devices): the whole dump; summary.json says full; no progress line for a start under 1 s")
    func full() throws {
        let (result, folder) = try Self.serve([])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try Self.summary(folder)["state"] as? String == "full")
        let state = try String(contentsOf: folder.appendingPathComponent("state.jsonl"), encoding: .utf8)
        let lines = state.split(separator: "\n")
        #expect(lines.count > 500 && lines.last?.hasPrefix("{\"totals\": ") == true)
        #expect(!result.stderr.contains("building population") && !result.stderr.contains("writing state.jsonl"))
        #expect(result.stdout.contains("state.jsonl: full"))
    }

    @Test("--state summary: the totals line alone, said in summary.json and summary.md")
    func summaryOnly() throws {
        let (result, folder) = try Self.serve(["--state", "summary"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try Self.summary(folder)["state"] as? String == "summary")
        let state = try String(contentsOf: folder.appendingPathComponent("state.jsonl"), encoding: .utf8)
        #expect(state.hasPrefix("{\"totals\": {\"pushes\": 0, ") && state.split(separator: "\n").count == 1)
        let md = try String(contentsOf: folder.appendingPathComponent("summary.md"), encoding: .utf8)
        #expect(md.contains("state.jsonl (the totals line only: --state summary)"))
    }

    @Test("--state none: no state.jsonl; every other file is written")
    func none() throws {
        let (result, folder) = try Self.serve(["--state", "none"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try Self.summary(folder)["state"] as? String == "none")
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("state.jsonl").path))
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("population.jsonl").path))
    }

    @Test("--state with another value: a clear error before anything is built")
    func badState() throws {
        let (result, folder) = try Self.serve(["--state", "partial"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("--state: expected full, summary or none, got partial"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path))
    }

    @Test("a run folder that cannot be made (a file in the way): a clear error, a non-zero exit, nothing written")
    func unwritableFolder() throws {
        let dir = try CLI.temporaryDirectory()
        let blocker = dir.appendingPathComponent("file")
        try Data("x".utf8).write(to: blocker)
        let result = try CLI.run(
            ["serve", "smoke", "--h2c", "--listen", "127.0.0.1:0", "--duration", "0.5", "--out",
                blocker.appendingPathComponent("run").path])
        #expect(result.status != 0)
        #expect(result.stderr.contains("cannot create \(blocker.path)/run"), "\(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["file"])
    }

    @Test("population.jsonl cannot be written whole (a file size limit): a clear error, a non-zero exit, no file")
    func populationWriteFails() throws {
        let folder = try CLI.temporaryDirectory().appendingPathComponent("run")
        // SIGXFSZ ignored (inherited across exec): a write past the limit fails with EFBIG instead of killing.
        // dash counts `ulimit -f` in 512-byte blocks, bash in 1024: either way 100–200 KB, under smoke's ~440 KB.
        let result = try CLI.launch(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c", "trap '' XFSZ; ulimit -f 200; exec \"$0\" \"$@\"", CLI.binary.path, "serve", "smoke", "--h2c",
                "--listen", "127.0.0.1:0", "--duration", "0.5", "--out", folder.path,
            ])
        #expect(result.status != 0)
        #expect(
            result.stderr.contains("cannot write \(folder.path)/population.jsonl: File too large"), "\(result.stderr)")
        #expect(!result.stderr.contains("listening on"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty, "nothing half-written")
    }
}
