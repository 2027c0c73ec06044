import FanoutMetrics
import ArgumentParser
import FanoutPush
import FanoutReport
import Foundation

struct Compare: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compare two runs: every metric and percentile with its change, judged against thresholds.",
        discussion: """
            BASELINE and CURRENT are run folders or their summary.json files, both of fanout run, both of \
            fanout serve or both of fanout push. Latency percentiles (p50, p90, \
            p99, p99.9, p99.99, max) are compared relatively: a rise beyond a metric's threshold is a \
            regression, a fall beyond it an improvement. Counts (pushes, verdicts, outcomes, deliveries, \
            histogram counts) must match exactly when both runs are in virtual time with the same seed and \
            configuration (a deterministic run); otherwise they are shown, not judged. Two fanout serve runs \
            compare service, delivery, fanout, validate and route, and show every count (requests by status and \
            reason, the devices' accounting, connections, histogram counts) with its difference, not judged: \
            the client decides them.

            Default thresholds, for every metric: \
            \(Comparison.defaultThresholds.map(\.description).joined(separator: ", ")); p99.99 and max are \
            shown, not judged. A --threshold for a metric replaces the default for that metric and \
            percentile; METRIC may be * for all metrics; =off shows a percentile without judging it. Naming an \
            unknown metric or percentile is an error. Two fanout serve runs that both judged events \
            (--expect-events): any of \
            \(ServeSummaryFile.gatedEventCounts.map { "events.\($0)" }.joined(separator: ", ")) higher than the \
            baseline's, or a broken events identity, is a regression; --threshold events.COUNT=off shows one of \
            those counts without judging it (e.g. events.reordered=off for a backend whose concurrent fan-outs \
            reorder a source's updates: the device ignores the older one). Also judged when both runs have \
            them: \(ServeSummaryFile.gatedBackendCounts.joined(separator: ", ")). An absolute bound on the \
            current run: events.missing<=0.1% (of the expected pairs), events.skipped<=20, trigger.failures<=0. \
            Fails closed: events, a trigger or a registration the baseline judged and the current run lacks is \
            exit 5; two serve runs whose measured flags (summary.json flags: settle, duration, rate scale, \
            faults, latency, loops, bounds, trigger settings…) differ are refused (exit 6, the differences \
            listed) unless --allow-config-change; a serve run whose own trigger held it up (events unsent or \
            waiting for a slot) is not judged (exit 3).

            Two fanout push runs compare latency and scheduleLag the same way; more failed or unanswered \
            requests than the baseline, a failure kind or an answer reason the baseline did not have (any reason's \
            count above the baseline's when both sent the same schedule), or a broken identity is a regression. A \
            push run whose generator was saturated is not judged: exit 3, as fanout push's own (its numbers \
            understate the server's latency, so a gate never passes on them). A push folder and a run or serve \
            folder are refused (exit 1).

            Exit status (package-benchmark's convention): 0 within thresholds, 2 a regression, 4 only \
            improvements, 1 bad input; 3 a saturated fanout push run, or a serve run fanout held up, on either \
            side; 5 what the baseline judged is absent in the current run; 6 serve runs of different flags.
            """
    )

    @Argument(help: "The baseline run folder or summary.json.") var baseline: String
    @Argument(help: "The current run folder or summary.json.") var current: String

    @Option(
        name: .customLong("threshold"),
        help: ArgumentHelp(
            "A relative threshold, e.g. endToEnd.p99=+20%, *.p50=+5% or *.max=off; or events.COUNT=off. "
                + "Repeatable.",
            valueName: "METRIC.PERCENTILE=+N%"))
    var thresholds: [String] = []

    @Option(help: "text, markdown or json.") var format: String = "text"

    @Flag(
        name: .customLong("allow-config-change"),
        help: "Judge two fanout serve runs whose measured flags differ (the differences are listed).")
    var allowConfigChange = false

    /// Two serve runs' measured flags, compared: the differences (`--faults: 503=5% → -`); a run without them (a
    /// folder written before fanout recorded them) differs in all of them.
    static func flagDifferences(_ b: ServeSummaryFile, _ c: ServeSummaryFile) -> [String] {
        guard let bf = b.flags, let cf = c.flags else {
            return ["flags: not recorded in \(b.flags == nil ? b.path : c.path) (written by an older fanout)"]
        }
        return Set(bf.keys).union(cf.keys).sorted().compactMap { k in
            bf[k] == cf[k] ? nil : "\(k): \(bf[k] ?? "(none)") → \(cf[k] ?? "(none)")"
        }
    }

    func run() throws {
        guard ["text", "markdown", "json"].contains(format) else {
            throw ValidationError("--format: expected text, markdown or json, got \(format)")
        }
        let (list, ungated, bounds) = try parsedThresholds()
        let comparison: Comparison
        do {
            switch (try AnySummaryFile.read(baseline), try AnySummaryFile.read(current)) {
            case (.run(let b), .run(let c)):
                try servesOnly(ungated, bounds, kind: "fanout run")
                comparison = Comparison(baseline: b, current: c, thresholds: list)
            case (.serve(let b), .serve(let c)):
                comparison = try serveComparison(b, c, list, ungated, bounds)
            case (.push(let b), .push(let c)):
                try servesOnly(ungated, bounds, kind: "fanout push")
                for (side, path, s) in [("baseline", baseline, b), ("current", current, c)] {
                    guard let why = s.saturation else { continue }
                    Self.say(
                        "not judged: the \(side) \(path) is a fanout push run whose generator was saturated (\(why)); "
                            + "its latencies understate the server's")
                    throw ExitCode(PushReport.saturatedExitCode)
                }
                comparison = Comparison(baseline: b, current: c, thresholds: list)
            case (let b, let c):
                throw CommandFailure(
                    "\(baseline) is a \(b.tool) folder and \(current) a \(c.tool) one: only two folders of one command "
                        + "are compared")
            }
        } catch let error as CommandFailure {
            throw error
        } catch let error as ExitCode {
            throw error
        } catch {
            throw CommandFailure("\(error)")
        }
        switch format {
        case "json": print(comparison.json(), terminator: "")
        case "markdown": print(comparison.text(markdown: true), terminator: "")
        default: print(comparison.text(markdown: false), terminator: "")
        }
        if comparison.exitCode != 0 { throw ExitCode(comparison.exitCode) }
    }

    /// `--threshold`s: metric thresholds (after the defaults), counts not to judge (`NAME=off`), absolute bounds.
    func parsedThresholds() throws -> ([Comparison.Threshold], Set<String>, [Comparison.CountBound]) {
        var list = Comparison.defaultThresholds
        var ungated: Set<String> = []
        var bounds: [Comparison.CountBound] = []
        for text in thresholds {
            do {
                if let bound = try Comparison.CountBound(parsing: text) {
                    bounds.append(bound)
                } else if let count = try Comparison.ungatedCount(parsing: text) {
                    ungated.insert(count)
                } else {
                    list.append(try Comparison.Threshold(parsing: text))
                }
            } catch {
                throw CommandFailure("--threshold: \(error)")  // exit 1: never a silent pass
            }
        }
        return (list, ungated, bounds)
    }

    /// Event counts are judged in serve folders only.
    func servesOnly(_ ungated: Set<String>, _ bounds: [Comparison.CountBound], kind: String) throws {
        guard ungated.isEmpty && bounds.isEmpty else {
            throw CommandFailure(
                "--threshold \((ungated.sorted() + bounds.map(\.name)).joined(separator: ", ")): events counts are "
                    + "judged in fanout serve runs only; \(baseline) and \(current) are \(kind) folders")
        }
    }

    /// Two serve folders: not judged when fanout's own trigger held either up (exit 3), refused when their flags
    /// differ (exit 6) unless `--allow-config-change`.
    func serveComparison(
        _ b: ServeSummaryFile, _ c: ServeSummaryFile, _ list: [Comparison.Threshold], _ ungated: Set<String>,
        _ bounds: [Comparison.CountBound]
    ) throws -> Comparison {
        for (side, s) in [("baseline", b), ("current", c)] where !s.harnessLimits.isEmpty {
            Self.say(
                "not judged: the \(side) \(s.path) is a fanout serve run that fanout's own trigger held up ("
                    + s.harnessLimits.joined(separator: "; ") + ")")
            throw ExitCode(PushReport.saturatedExitCode)
        }
        let differences = Self.flagDifferences(b, c)
        if !differences.isEmpty && !allowConfigChange {
            Self.say(
                "refused: the two serve runs measured different things (--allow-config-change judges them anyway):\n"
                    + differences.map { "  \($0)" }.joined(separator: "\n"))
            throw ExitCode(6)
        }
        if !differences.isEmpty {
            Self.say(
                "judged although the flags differ (--allow-config-change):\n"
                    + differences.map { "  \($0)" }.joined(separator: "\n"))
        }
        return Comparison(baseline: b, current: c, thresholds: list, ungated: ungated, bounds: bounds)
    }

    static func say(_ text: String) { FileHandle.standardError.write(Data(("fanout compare: " + text + "\n").utf8)) }
}

struct Merge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Merge the folders of a sharded run (fanout run, push or serve --shard K/N) into the whole run's.",
        discussion: """
            The folders must be all N shards of one run: same scenario, seed, configuration and clock. \
            Counts are summed and the accounting identities checked again; histograms are added interval by \
            interval (never percentiles averaged); fan-out completion is rebuilt per event from each shard's \
            completion.tsv (the last recipient on any shard). Writes every file of a run folder to --out. Push \
            folders (fanout push --shard K/N; same scenario, seed and configuration) merge the same way: requests \
            by status, reason and failure summed, latency and scheduleLag added per second from latency.hlog. \
            Serve folders (fanout serve --shard K/N; same scenario, seed and configuration): summary.json's counts \
            added and the identities checked again, every metric added per second from latency.hlog, state.jsonl \
            merged (lines sorted as serve writes them, one totals line); the merged folder is written as one \
            serve's (summary.json, summary.md, report.html, latency.hlog, .hgrm files) with the shards named. \
            Exit status: 0; 5 when a shard is missing or given twice (or N differs, or a folder is not a shard); \
            6 when the folders are not shards of one run (scenario, seed, configuration or clock differ, or run, \
            push and serve folders are mixed); 1 when a folder cannot be read.
            """
    )

    @Argument(help: "The shards' run folders.") var folders: [String]

    @Option(help: "The merged run folder.") var out: String

    func run() throws {
        guard !folders.isEmpty else { throw ValidationError("expected the run folders of the shards") }
        if try allOrNone(ServeFolder.isServe, "serve", mix: "run, push and serve folders do not mix") {
            return try mergeServe()
        }
        if try allOrNone(PushFolder.isPush, "push", mix: "run and push folders do not mix") { return try mergePush() }
        let merged = try mergeFolders({ try RunFolderReader.read($0) as RunReport }) {
            try RunMerge.merge($0.map { ($0.folder, $0.part) })
        }
        try RunFiles.write(folder: out, files: RunFiles.all(merged))
        print(SummaryTable.text(merged, folder: out))
    }

    /// Whether the folders are `kind` folders: false when none is, true when every one is, refused (exit 6) when
    /// some are and some not.
    private func allOrNone(_ isKind: (String) -> Bool, _ kind: String, mix: String) throws -> Bool {
        let matching = folders.filter(isKind)
        if matching.isEmpty { return false }
        guard matching.count == folders.count else {
            let other = folders.first { !isKind($0) }!
            try refuse(
                ReportReadError(
                    file: other, "not a fanout \(kind) folder, and \(matching[0]) is one: \(mix)", refusal: .notOneRun))
        }
        return true
    }

    /// Exit 5 (a shard missing or given twice) or 6 (not shards of one run) when the set is refused, else 1.
    private func refuse(_ error: ReportReadError) throws -> Never {
        guard let refusal = error.refusal else { throw CommandFailure("\(error)") }
        FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
        throw ExitCode(refusal.exitCode)
    }

    /// The folders read by `read` (each with its path, in order) and merged by `merge`; a set refused exits as
    /// ``refuse(_:)`` says.
    private func mergeFolders<Part, Merged>(
        _ read: (String) throws -> Part, _ merge: ([(folder: String, part: Part)]) throws -> Merged
    ) throws -> Merged {
        do {
            return try merge(try folders.map { (folder: $0, part: try read($0)) })
        } catch let error as ReportReadError {
            try refuse(error)
        }
    }

    private func mergeServe() throws {
        let (parts, files) = try mergeFolders(ServeFolder.read) {
            let parts = $0.map(\.part)
            return (parts, try ServeMerge.files(parts))
        }
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        if parts.allSatisfy(\.hasState) {
            try ServeMerge.writeState(parts, to: (out as NSString).appendingPathComponent("state.jsonl"))
        }
        try RunFiles.write(folder: out, files: files)
        print("fanout merge: \(parts.count) serve shards; \(out)")
    }

    private func mergePush() throws {
        let merged = try mergeFolders(PushFolder.read) { try PushMerge.merge($0.map { ($0.folder, $0.part) }) }
        try RunFiles.write(folder: out, files: try PushReport.files(merged, gitRevision: Machine.gitRevision()))
        print(
            "fanout merge: \(merged.shards) push shards, \(merged.events) events, \(merged.sent) sent, "
                + "\(merged.answered) answered "
                + merged.byStatus.sorted(by: { $0.key < $1.key }).map { "\($0.key): \($0.value)" }.description
                + ", \(merged.failed) failed, \(merged.unansweredAtEnd) unanswered at end; \(out)")
        // The shards' own verdicts, ORed (the folder says the same; `fanout compare` refuses a saturated one).
        if merged.saturated {
            FileHandle.standardError.write(Data(
                ("fanout merge: generator saturated: " + PushReport.saturationCause(merged) + "\n").utf8))
        }
        if merged.serverLimited {
            FileHandle.standardError.write(Data(
                ("fanout merge: server-limited: " + PushReport.serverLimitCause(merged) + "\n").utf8))
        }
        if let starts = merged.shardStarts {
            let spread = starts.spreadNanos.map { String(format: "%.3f ms", Double($0) / 1e6) } ?? "none"
            let verdict = starts.withinSkew.map {
                $0 ? ", every shard within --max-start-skew" : ", NOT all within --max-start-skew"
            } ?? ""
            print("fanout merge: shard starts spread \(spread) (latest − earliest)\(verdict)")
        }
        if let refused = merged.startRefused {
            FileHandle.standardError.write(Data(("fanout merge: not started together: \(refused)\n").utf8))
            throw ExitCode(PushReport.startRefusedExitCode)
        }
    }
}
