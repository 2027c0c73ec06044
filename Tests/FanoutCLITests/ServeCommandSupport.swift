import Foundation
import Testing

/// `fanout serve` started by the test on 127.0.0.1 (a free port), driven by clients nobody here wrote: curl,
/// h2load (nghttp2) and Python's `h2` library; stopped with SIGTERM, which must end it with status 0 and a
/// complete run folder.
final class ServeProcess {
    let process = Process()
    let directory: URL
    let folder: URL
    let errors: URL
    private(set) var port = 0

    init(_ arguments: [String], scenario: String = "smoke", environment: [String: String] = [:]) throws {
        directory = try CLI.temporaryDirectory()
        folder = directory.appendingPathComponent("run")
        errors = directory.appendingPathComponent("serve.err")
        let output = directory.appendingPathComponent("serve.out")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        process.executableURL = CLI.binary
        process.arguments = ["serve", scenario, "--listen", "127.0.0.1:0", "--out", folder.path] + arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardError = try FileHandle(forWritingTo: errors)
        process.standardOutput = try FileHandle(forWritingTo: output)
        try process.run()
        // A bound, not a measure: under ThreadSanitizer on a loaded machine (load 9 on 2 cores) serve smoke built its
        // 10,000 devices in 28 s and wrote population.jsonl for 30 s more before it listened.
        let deadline = Date().addingTimeInterval(180)
        while Date() < deadline {
            let text = CLI.text(of: errors)
            if let range = text.range(of: #"listening on 127\.0\.0\.1:[0-9]+"#, options: .regularExpression) {
                port = Int(text[range].split(separator: ":").last!)!
                return
            }
            if !process.isRunning { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        if process.isRunning { process.terminate() }
        throw CLIFailure("fanout serve did not start: \(CLI.text(of: errors))")
    }

    /// SIGTERM, then the exit status; a server still running after 30 s is killed (and the status shows it).
    func stop() -> Int32 {
        if process.isRunning { process.terminate() }
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    var stderr: String { CLI.text(of: errors) }

    func summary() throws -> [String: Any] {
        let data = try Data(contentsOf: folder.appendingPathComponent("summary.json"))
        return try JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    func population() throws -> [[String: Any]] {
        let text = try String(contentsOf: folder.appendingPathComponent("population.jsonl"), encoding: .utf8)
        return try text.split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
    }
}

struct CLIFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A program found on PATH (curl, h2load, python3, openssl).
enum Tool {
    /// A tool found on PATH (curl, h2load, openssl, python3), run to its end.
    static func run(_ name: String, _ arguments: [String]) throws -> CLI.Result {
        try CLI.launch(URL(fileURLWithPath: "/usr/bin/env"), [name] + arguments)
    }

    static var script: String { Bundle.module.url(forResource: "Resources/serve_client", withExtension: "py")!.path }
    static var boundsScript: String {
        Bundle.module.url(forResource: "Resources/serve_bounds", withExtension: "py")!.path
    }
}

/// A curl answer: status, headers, body.
struct CurlAnswer {
    var status: Int
    var headers: [String: String]
    var body: String

    init(_ text: String) {
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        body = parts.dropFirst().joined(separator: "\r\n\r\n")
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        status = Int(statusLine.split(separator: " ").dropFirst().first ?? "0") ?? 0
        headers = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
    }
}

func curl(_ port: Int, _ method: String, _ path: String, headers: [(String, String)], body: String?, tls: String? = nil)
    throws -> CurlAnswer
{
    var arguments = ["-s", "-i", "-X", method]
    if let tls {
        arguments += ["--http2", "--cacert", tls, "https://localhost:\(port)\(path)", "--resolve", "localhost:\(port):127.0.0.1"]
    } else {
        arguments += ["--http2-prior-knowledge", "http://127.0.0.1:\(port)\(path)"]
    }
    for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
    if let body { arguments += ["--data-binary", body] }
    let result = try Tool.run("curl", arguments)
    guard result.status == 0 else { throw CLIFailure("curl failed (\(result.status)): \(result.stderr)") }
    return CurlAnswer(result.stdout)
}

func livePayload(timestamp: Int, event: String = "update") -> String {
    #"{"aps":{"event":"\#(event)","timestamp":\#(timestamp),"content-state":{"home":3,"away":1,"clock":"88:00","# +
        #""winProbability":0.9,"final":false,"lastEvent":"goal"}}}"#
}

/// The small scenario of the lifecycle tests (rotation, app events, kickoff against a Python backend): token sources
/// only, one app, `faults` as given, written to `directory`/`file`; returns its path.
enum LifecycleScenario {
    static func write(
        _ directory: URL, _ file: String, name: String, seed: Int, seconds: Int, faults: String, devices: Int = 40,
        activities: ClosedRange<Int> = 1...1, sources: Int = 4, rate: Int = 4
    ) throws -> String {
        let text = """
            {"name": "\(name)", "seed": \(seed), "durationSeconds": \(seconds),
             "population": {"devices": \(devices),
                            "activitiesPerDevice": {"min": \(activities.lowerBound), "max": \(activities.upperBound)},
                            "appsPerDevice": {"min": 1, "max": 1}},
             "apps": [{"bundle": "com.example.scores", "schema": "GameAttributes", "weight": 1}],
             "schemas": {"GameAttributes": {"home": "int", "away": "int", "clock": "string",
                                            "winProbability": "double", "final": "bool", "lastEvent": "string"}},
             "sources": {"count": \(sources), "zipfExponent": 0.5, "broadcastShare": 0},
             "arrival": {"process": "constant", "ratePerSecond": \(rate)},
             "faults": \(faults),
             "priority10Share": 0}
            """
        let path = directory.appendingPathComponent(file).path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
