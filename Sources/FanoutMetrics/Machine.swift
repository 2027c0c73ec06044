import Foundation

/// Facts about the machine for a report.
public enum Machine {
    public static var cpu: String {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return "unknown" }
        for line in text.split(separator: "\n") where line.hasPrefix("model name") {
            return line.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) }
                ?? "unknown"
        }
        return "unknown"
    }

    public static var os: String {
        if let text = try? String(contentsOfFile: "/etc/os-release", encoding: .utf8) {
            for line in text.split(separator: "\n") where line.hasPrefix("PRETTY_NAME=") {
                return String(line.dropFirst("PRETTY_NAME=".count)).trimmingCharacters(
                    in: CharacterSet(charactersIn: "\""))
            }
        }
        return ProcessInfo.processInfo.operatingSystemVersionString
    }

    /// The fanout build that is running, never the working directory's commit (run from a backend's repository, that
    /// is the backend's): the git revision of the checkout the executable was built in (`git describe --always
    /// --dirty`: the commit, `-dirty` when tracked files differed), else `fanout.revision` next to the executable
    /// (written where the binary leaves its checkout: the container image's build, `deploy/Dockerfile`), else
    /// "unknown". Read once per process.
    public static func gitRevision() -> String { revision }

    static let revision: String = {
        guard let exe = Bundle.main.executableURL?.resolvingSymlinksInPath() else { return "unknown" }
        let dir = exe.deletingLastPathComponent()
        if let text = run(["git", "-C", dir.path, "describe", "--always", "--dirty", "--abbrev=12"]), !text.isEmpty {
            return text
        }
        if let text = try? String(contentsOf: dir.appendingPathComponent("fanout.revision"), encoding: .utf8) {
            let line = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if !line.isEmpty { return line }
        }
        return "unknown"
    }()

    /// A command's trimmed standard output when it exits 0.
    static func run(_ arguments: [String]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return nil
        }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
