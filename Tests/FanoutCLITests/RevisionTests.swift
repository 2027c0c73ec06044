import Foundation
import Testing

/// A run folder names the fanout build that made it, never the commit of the directory fanout was started in (run
/// from a backend's repository, that was the backend's).
@Suite struct RevisionTests {
    /// `git` in `dir`, its trimmed output.
    static func git(_ dir: URL, _ arguments: [String]) throws -> String {
        let r = try CLI.launch(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["git", "-C", dir.path, "-c", "user.name=t", "-c", "user.email=t@example.com"] + arguments)
        #expect(r.status == 0, "git \(arguments): \(r.stderr)")
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("run from another git repository: summary.json names fanout's checkout, not the working directory's")
    func buildNotWorkingDirectory() throws {
        let other = try CLI.temporaryDirectory()
        _ = try Self.git(other, ["init", "-q"])
        _ = try Self.git(other, ["commit", "-q", "--allow-empty", "-m", "a backend"])
        let backendCommit = try Self.git(other, ["rev-parse", "--short=12", "HEAD"])
        let checkout = CLI.binary.deletingLastPathComponent()
        let fanout = try Self.git(checkout, ["describe", "--always", "--dirty", "--abbrev=12"])
        let process = Process()
        process.executableURL = CLI.binary
        process.arguments = ["run", "smoke", "--clock", "virtual", "--duration", "1", "--out", other.path + "/run"]
        process.currentDirectoryURL = other
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let data = try Data(contentsOf: other.appendingPathComponent("run/summary.json"))
        let summary = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        let run = summary["run"] as? [String: Any] ?? summary
        let revision = run["gitRevision"] as? String
        #expect(revision == fanout, "fanout's checkout is \(fanout)")
        #expect(revision?.hasPrefix(backendCommit) == false, "not the working directory's \(backendCommit)")
    }
}
