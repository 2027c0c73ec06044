import Foundation
import Testing

/// Every kind of run folder, and what `fanout merge` and `fanout compare` make of them, against golden files: the
/// guard of the house re-cut (the code that writes these moves between targets; the files must not change).
///
/// Two ways of comparing, both line by line:
/// - **exact** (virtual time, which repeats bit for bit): every line as written, but the lines that name wall-clock
///   facts (when it started, how long the report took, memory), whose digits are masked;
/// - **skeleton** (real time: serve and push): every number masked and a run of numbers joined into one mark, then
///   repeated lines folded into one, so the files' structure, labels, keys and order are held, not their figures
///   (the counts of these runs are checked by the command tests).
/// A chart's marks (SVG lines, paths, texts) are left out of skeletons, and so are JSON lines' values (their keys
/// are kept). The temporary folder's path is replaced by `<dir>` everywhere. Rewrite with FANOUT_UPDATE_GOLDEN=1.
@Suite("Run folders, merges and comparisons of every kind (golden)")
struct GoldenFoldersTests {
    enum Mode { case exact, skeleton }

    /// Lines that carry wall-clock facts even in virtual time.
    static let volatile = [
        "started", "StartTime", "BaseTime", "final merge", "finalMerge", "report files", "reportSeconds",
        "rendered in", "resident", "Resident", "per activity", "bytesPerActivity", "samples", "throughput",
        "wall", "memory", "elapsed", "Elapsed", "PerSecond", "deliveries/s", "pushes/s", "events/s",
        "gitRevision", "git revision", "(git ",
    ]

    static let golden = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden")
    static var updating: Bool { ProcessInfo.processInfo.environment["FANOUT_UPDATE_GOLDEN"] == "1" }

    static func maskDigits(_ line: String) -> String {
        // Hashes and revisions (hex), histograms (base64) first: their letters vary with the figures too. A quoted
        // 16-digit hex hash (a configHash), or one alone in an HTML `<code>`, is one even when it happens to have no
        // letter (1 run in 30 once; report.html's push subtitle under ASan at 1eaa858).
        let blobs = line.replacingOccurrences(
            of: "[A-Za-z0-9+/]{24,}={0,2}|\\b(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\\b(-dirty)?|(?<=[\">])[0-9a-f]{16}(?=[\"<])",
            with: "<blob>",
            options: .regularExpression)
        // A run of numbers (a series, a path, a date) is one mark: how many there are is timing, not format.
        var masked = blobs.replacingOccurrences(of: "[0-9]+", with: "#", options: .regularExpression)
            .replacingOccurrences(of: "#(?:[ ,.:;/LMCHVlmchv+\\-eE%TZ]*#)+", with: "#", options: .regularExpression)
        // A duration's unit follows its size; a change's sign and verdict follow the figures.
        for (pattern, mark) in [
            ("# ?(ns|µs|us|ms|s)\\b", "#<unit>"), ("[+-]#%", "#%"),
            ("\\b(ok|REGRESSION|improved|IMPROVED|regression|improvement)\\b", "<verdict>"),
        ] {
            masked = masked.replacingOccurrences(of: pattern, with: mark, options: .regularExpression)
        }
        return masked
    }

    static func normalize(_ file: String, _ text: String, mode: Mode, dirs: [URL]) -> String {
        if mode == .skeleton && file.hasSuffix(".jsonl") { return jsonlKeys(text) }
        if mode == .skeleton && file.hasSuffix(".hlog") { return hlogTags(text) }
        var plain = text
        for dir in dirs {
            plain = plain.replacingOccurrences(of: dir.path, with: "<dir>")
            plain = plain.replacingOccurrences(of: dir.path.replacingOccurrences(of: "/", with: "\\/"), with: "<dir>")
        }
        var out: [String] = []
        var inEndReasons = false
        for line in plain.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            switch mode {
            case .exact:
                out.append(volatile.contains { line.contains($0) } ? maskDigits(line) : line)
            case .skeleton:
                // A chart's marks (how many grid lines, points, labels) follow its figures.
                let mark = line.trimmingCharacters(in: .whitespaces)
                if ["<line ", "<text ", "<path ", "<polyline ", "<circle ", "<rect "].contains(where: mark.hasPrefix) {
                    continue
                }
                // How connections ended is timing (a client's close read before or after the server's GOAWAY, a
                // drain cut short on a loaded machine): the rows of that table, in every format, are one row.
                if inEndReasons, let row = endReasonRow(mark) {
                    if out.last != row { out.append(row) }
                    continue
                }
                inEndReasons = ["\"endReasons\" : {", "| how connections ended |", ">how they ended<"].contains {
                    mark.contains($0)
                }
                // Columns are padded to their figures' width: spaces are folded too. A chart drawn on one line (its
                // bars inline, one per second of the run) keeps one of each run of equal bars: how many is timing.
                // Whether a client's GOAWAY was read before its close ("closed by the client (GOAWAY)") is timing too.
                let masked = maskDigits(line).replacingOccurrences(of: " +", with: " ", options: .regularExpression)
                    .replacingOccurrences(of: "closed by the client (GOAWAY)", with: "closed by the client")
                    .replacingOccurrences(
                        of: "(<rect [^>]*>(?:<title>.*?</title></rect>)?)\\1+", with: "$1", options: .regularExpression)
                if out.last != masked { out.append(masked) }
            }
        }
        return out.joined(separator: "\n")
    }

    /// A row of a table of connection end reasons (summary.json's `endReasons`, summary.md's and report.html's
    /// tables) with its reason masked; nil for any other line (the table's end). summary.md's separator row stays.
    static func endReasonRow(_ mark: String) -> String? {
        if mark.hasPrefix("\""), mark.contains("\" : ") { return "\"<end reason>\" : #" }
        if mark.hasPrefix("|"), !mark.hasPrefix("|-"), !mark.hasPrefix("| -") { return "| <end reason> | # |" }
        if mark.hasPrefix("|-") || mark.hasPrefix("| -") { return maskDigits(mark) }
        if mark.hasPrefix("<tr><td>") { return "<tr><td><end reason></td><td>#</td></tr>" }
        return nil
    }

    /// A real-time run's JSON lines (population, state: which pushes were applied when): the keys its lines use.
    static func jsonlKeys(_ text: String) -> String {
        var keys = Set<String>()
        for line in text.split(separator: "\n") {
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            keys.formUnion(object?.keys ?? [:].keys)
        }
        return keys.sorted().joined(separator: "\n")
    }

    /// A real-time interval log: its header and the tags its intervals carry (how many intervals is timing).
    static func hlogTags(_ text: String) -> String {
        let lines = text.split(separator: "\n").map(String.init)
        let header = lines.filter { $0.hasPrefix("#") || $0.hasPrefix("\"") }.map(maskDigits)
        let tags = Set(
            lines.compactMap { $0.hasPrefix("Tag=") ? $0.split(separator: ",").first.map(String.init) : nil })
        return (header + tags.sorted()).joined(separator: "\n")
    }

    /// Every file of `folder` (and `extra` texts) against Golden/`name`/.
    static func check(_ name: String, folder: URL?, extra: [String: String] = [:], mode: Mode, dirs: [URL]) throws {
        var files: [String: String] = extra
        if let folder {
            for file in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
                let data = try Data(contentsOf: folder.appendingPathComponent(file))
                files[file] = String(decoding: data, as: UTF8.self)
            }
        }
        let place = golden.appendingPathComponent(name)
        if updating {
            try? FileManager.default.removeItem(at: place)
            try FileManager.default.createDirectory(at: place, withIntermediateDirectories: true)
            for (file, text) in files {
                let normalized = normalize(file, text, mode: mode, dirs: dirs)
                try Data(normalized.utf8).write(to: place.appendingPathComponent(file))
            }
            return
        }
        let expected = try FileManager.default.contentsOfDirectory(atPath: place.path).sorted()
        #expect(files.keys.sorted() == expected, "\(name): the files written")
        for file in expected {
            guard let text = files[file] else { continue }
            let want = try String(contentsOf: place.appendingPathComponent(file), encoding: .utf8)
            let got = normalize(file, text, mode: mode, dirs: dirs)
            if got != want {
                let a = want.split(separator: "\n", omittingEmptySubsequences: false)
                let b = got.split(separator: "\n", omittingEmptySubsequences: false)
                let first = (0..<min(a.count, b.count)).first { a[$0] != b[$0] } ?? min(a.count, b.count)
                let wanted = first < a.count ? String(a[first]) : "(end)"
                let written = first < b.count ? String(b[first]) : "(end)"
                Issue.record("\(name)/\(file) line \(first + 1): golden «\(wanted)», written «\(written)»")
            }
        }
    }

    static func run(_ arguments: [String], expecting status: Int32 = 0) throws -> CLI.Result {
        let result = try CLI.run(arguments)
        #expect(result.status == status, "fanout \(arguments.joined(separator: " ")): \(result.stderr)")
        return result
    }

    @Test("fanout run smoke --clock virtual, its shards merged, and compare in three formats: exact")
    func virtualRuns() throws {
        let dir = try CLI.temporaryDirectory()
        func path(_ name: String) -> String { dir.appendingPathComponent(name).path }
        let base = ["run", "smoke", "--clock", "virtual"]
        _ = try Self.run(base + ["--workers", "2", "--out", path("run")])
        _ = try Self.run(base + ["--workers", "1", "--seed", "8", "--out", path("seed8")])
        _ = try Self.run(base + ["--workers", "1", "--shard", "0/2", "--out", path("shard0")])
        _ = try Self.run(base + ["--workers", "1", "--shard", "1/2", "--out", path("shard1")])
        _ = try Self.run(["merge", path("shard0"), path("shard1"), "--out", path("merged")])
        var compared: [String: String] = [:]
        for format in ["text", "markdown", "json"] {
            let result = try CLI.run(["compare", path("run"), path("seed8"), "--format", format])
            compared["compare.\(format)"] = "exit \(result.status)\n" + result.stdout
        }
        try Self.check("run-virtual", folder: URL(fileURLWithPath: path("run")), mode: .exact, dirs: [dir])
        try Self.check("run-merged", folder: URL(fileURLWithPath: path("merged")), mode: .exact, dirs: [dir])
        try Self.check("run-compare", folder: nil, extra: compared, mode: .exact, dirs: [dir])
    }

    /// smoke without its payload faults, as the push command tests use it.
    static func clean(in dir: URL) throws -> String { try PushCommandTests.cleanSmoke(in: dir) }

    @Test("fanout serve on 1 and 2 loops, fanout push against each, compare of each kind: skeleton")
    func servePush() throws {
        let dir = try CLI.temporaryDirectory()
        let scenario = try Self.clean(in: dir)
        var folders: [String: URL] = [:]
        for loops in [1, 2] {
            let serve = try ServeProcess(["--h2c", "--workers", "\(loops)"], scenario: scenario)
            let push = dir.appendingPathComponent("push-\(loops)")
            _ = try Self.run([
                "push", "http://127.0.0.1:\(serve.port)", scenario, "--duration", "2", "--out", push.path,
                "--max-schedule-lag", "5000",
            ])
            #expect(serve.stop() == 0)
            folders["serve-\(loops)"] = serve.folder
            folders["push-\(loops)"] = push
        }
        var compared: [String: String] = [:]
        for kind in ["serve", "push"] {
            // Serve on 1 and 2 loops measured different things: refused (exit 6) unless the change is allowed.
            let allow = kind == "serve" ? ["--allow-config-change"] : []
            if kind == "serve" {
                let refused = try CLI.run(["compare", folders["serve-1"]!.path, folders["serve-2"]!.path])
                #expect(refused.status == 6 && refused.stderr.contains("workers: 1 → 2"), "\(refused.stderr)")
            }
            let result = try CLI.run(["compare", folders["\(kind)-1"]!.path, folders["\(kind)-2"]!.path] + allow)
            compared["compare.\(kind)"] = result.stdout
        }
        let dirs = [dir] + [1, 2].map { folders["serve-\($0)"]!.deletingLastPathComponent() }
        for name in ["serve-1", "serve-2", "push-1", "push-2"] {
            try Self.check(name, folder: folders[name], mode: .skeleton, dirs: dirs)
        }
        try Self.check("serve-push-compare", folder: nil, extra: compared, mode: .skeleton, dirs: dirs)
    }

    @Test("fanout serve --shard K/2 pushed at by one fanout push --shard K/2 each; both merged: skeleton")
    func shardsMerged() throws {
        let dir = try CLI.temporaryDirectory()
        let scenario = try Self.clean(in: dir)
        var serves: [ServeProcess] = []
        for k in 0..<2 { serves.append(try ServeProcess(["--h2c", "--shard", "\(k)/2"], scenario: scenario)) }
        let targets = serves.map { "http://127.0.0.1:\($0.port)" }.joined(separator: ",")
        var pushes: [String] = []
        for k in 0..<2 {
            let out = dir.appendingPathComponent("push-shard-\(k)").path
            _ = try Self.run([
                "push", targets, scenario, "--duration", "2", "--shard", "\(k)/2", "--out", out,
                "--max-schedule-lag", "5000",
            ])
            pushes.append(out)
        }
        for serve in serves { #expect(serve.stop() == 0) }
        _ = try Self.run(["merge"] + pushes + ["--out", dir.appendingPathComponent("push-merged").path])
        _ = try Self.run(
            ["merge"] + serves.map(\.folder.path) + ["--out", dir.appendingPathComponent("serve-merged").path])
        let dirs = [dir] + serves.map { $0.folder.deletingLastPathComponent() }
        for name in ["push-merged", "serve-merged"] {
            try Self.check(name, folder: dir.appendingPathComponent(name), mode: .skeleton, dirs: dirs)
        }
    }
}
