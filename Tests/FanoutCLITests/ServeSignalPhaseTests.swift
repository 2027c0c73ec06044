import Foundation
import Testing

/// SIGINT in each phase of `fanout serve` — building the population, registering with a backend, serving, writing
/// the folder — is acted on: the process ends (a generous guard, not a timing assertion) with the exit status and
/// the folder its phase documents. Each phase is found from serve's own stderr lines, never from a sleep.
@Suite("fanout serve: SIGINT in every phase")
struct ServeSignalPhaseTests {
    /// `fanout serve` started without waiting for its start line (the build comes before it).
    final class Serve {
        let process = Process()
        let folder: URL
        let errors: URL

        init(_ arguments: [String]) throws {
            let directory = try CLI.temporaryDirectory()
            folder = directory.appendingPathComponent("run")
            errors = directory.appendingPathComponent("serve.err")
            let output = directory.appendingPathComponent("serve.out")
            _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            process.executableURL = CLI.binary
            process.arguments = ["serve", "smoke", "--listen", "127.0.0.1:0", "--h2c", "--out", folder.path] + arguments
            process.standardError = try FileHandle(forWritingTo: errors)
            process.standardOutput = try FileHandle(forWritingTo: output)
            try process.run()
        }

        deinit {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }

        var stderr: String { CLI.text(of: errors) }

        /// Waits until stderr holds `marker` (true), or the process ended or 300 s passed without it (false).
        func await(_ marker: String) -> Bool {
            let deadline = Date().addingTimeInterval(300)
            while Date() < deadline {
                if stderr.contains(marker) { return true }
                if !process.isRunning { return stderr.contains(marker) }
                Thread.sleep(forTimeInterval: 0.02)
            }
            return false
        }

        /// SIGINT, then the exit status; nil when the process was still running 60 s later (then killed).
        func interrupt() -> Int32? {
            if process.isRunning { process.interrupt() }
            let deadline = Date().addingTimeInterval(60)
            while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
            let hung = process.isRunning
            if hung { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            return hung ? nil : process.terminationStatus
        }

        func exists(_ name: String) -> Bool {
            FileManager.default.fileExists(atPath: folder.appendingPathComponent(name).path)
        }

        func summary() throws -> [String: Any] {
            let data = try Data(contentsOf: folder.appendingPathComponent("summary.json"))
            return try JSONSerialization.jsonObject(with: data) as! [String: Any]
        }

        /// No temporary file left in the folder (every file renamed into place or removed).
        var leftovers: [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.contains(".tmp") }
        }
    }

    @Test("building: the build stops, exit 130, nothing written (no folder)")
    func building() throws {
        // Large enough that the build's progress line (from its first second on) comes while it builds.
        let serve = try Serve(["--workers", "2", "--devices", "200000", "--state", "none"])
        #expect(serve.await("fanout serve: building population:"), "\(serve.stderr)")
        let status = serve.interrupt()
        #expect(status == 130, "\(serve.stderr)")
        #expect(serve.stderr.contains("fanout serve: interrupted while building the population; nothing written"))
        #expect(!serve.stderr.contains("listening on"))
        #expect(!FileManager.default.fileExists(atPath: serve.folder.path), "the folder was created by serve: removed")
    }

    @Test("registering (while population.jsonl's lines are counted too): registration and serving end, folder, exit 2")
    func registering() throws {
        // A backend that never answers: registration cannot end before the signal.
        let backend = try TriggerBackend("hang", script: "hostile_backend")
        let serve = try Serve([
            "--workers", "1", "--devices", "20000", "--state", "none", "--register", backend.url,
            "--register-rate", "200", "--trigger-timeout", "120",
        ])
        // The registrar counts population.jsonl's lines after this line: the signal may come then (the window
        // where it used to be ignored, registration going on for minutes) or once requests are out.
        #expect(serve.await("fanout serve: registering "), "\(serve.stderr)")
        let status = serve.interrupt()
        #expect(status == 2, "unregistered activities: \(serve.stderr)")
        let g = try #require(try serve.summary()["registration"] as? [String: Any], "\(serve.stderr)")
        #expect(g["interrupted"] as? Bool == true, "\(g)")
        let activities = try #require(g["activities"] as? Int)
        #expect(activities > 0 && g["unregisteredAtDeadline"] as? Int == activities, "\(g)")
        #expect(g["identityHolds"] as? Bool == true)
        #expect(serve.exists("summary.md") && serve.exists("population.jsonl") && serve.leftovers.isEmpty)
    }

    @Test("serving: graceful shutdown, folder written, exit 0")
    func serving() throws {
        let serve = try Serve(["--workers", "2", "--devices", "2000", "--state", "full"])
        #expect(serve.await("fanout serve: listening on"), "\(serve.stderr)")
        let status = serve.interrupt()
        #expect(status == 0, "\(serve.stderr)")
        #expect(serve.stderr.contains("fanout serve: serving ended; writing"))
        #expect(try serve.summary()["requests"] != nil)
        #expect(serve.exists("state.jsonl") && serve.exists("summary.md") && serve.leftovers.isEmpty)
    }

    @Test("writing: the signal is noted, the folder is finished, exit 0")
    func writing() throws {
        // --duration ends serving; a full state.jsonl of 50,000 devices takes a while to write.
        let serve = try Serve(["--workers", "2", "--devices", "50000", "--state", "full", "--duration", "0.5"])
        #expect(serve.await("fanout serve: serving ended; writing"), "\(serve.stderr)")
        let status = serve.interrupt()  // the process may have ended already: then the signal is moot
        #expect(status == 0, "\(serve.stderr)")
        #expect(try serve.summary()["requests"] != nil, "\(serve.stderr)")
        let state = CLI.text(of: serve.folder.appendingPathComponent("state.jsonl"))
        #expect(state.split(separator: "\n").count > 50_000, "state.jsonl complete: a line per device and activity")
        #expect(serve.exists("summary.md") && serve.leftovers.isEmpty)
    }
}
