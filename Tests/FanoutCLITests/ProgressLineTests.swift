import Foundation
import Testing

/// The per-second progress line of `fanout serve` and `fanout run`: fitted to a terminal's width only. Written to a
/// file (stderr not a terminal) it is whole, even with a narrow `COLUMNS`: a log keeps every figure with its unit.
@Suite("Progress lines: whole when stderr is not a terminal")
struct ProgressLineTests {
    @Test("fanout serve --duration 2.5, stderr to a file, COLUMNS=40: every progress line whole")
    func serveWhole() throws {
        let serve = try ServeProcess(["--h2c", "--duration", "2.5"], environment: ["COLUMNS": "40"])
        #expect(exitStatus(of: serve, within: 60) == 0, "\(serve.stderr)")
        let lines = serve.stderr.split(separator: "\n").filter { $0.contains(" conns ") }
        #expect(lines.count >= 2, "\(serve.stderr)")
        for line in lines {
            #expect(line.count > 40 && !line.contains("…"), "\(line)")
            #expect(line.contains("deliveries ") && line.contains("svc p99 "), "\(line)")
        }
    }

    @Test("fanout run smoke --clock real --duration 2, stderr to a pipe, COLUMNS=40: every progress line whole")
    func runWhole() throws {
        let out = try CLI.temporaryDirectory().appendingPathComponent("run")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["COLUMNS=40", CLI.binary.path, "run", "smoke", "--clock", "real", "--duration", "2",
            "--out", out.path]
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        let lines = text.split(separator: "\n").filter { $0.contains("deliveries/s") }
        #expect(!lines.isEmpty, "\(text)")
        for line in lines {
            #expect(line.count > 40 && !line.contains("…") && line.contains(" p99.9 "), "\(line)")
        }
    }
}
