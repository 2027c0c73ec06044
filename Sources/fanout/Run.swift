import ArgumentParser
import FanoutCore
import FanoutHistogramLog
import FanoutMetrics
import FanoutReport
import FanoutSim
import FanoutTrace
import Foundation
import UVLoop

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a load scenario on libuv worker loops and write a run folder with summary.json.",
        discussion: """
            SCENARIO is a built-in name (see `fanout scenarios`) or a scenario file (JSON). Flags override \
            the scenario. Latency is measured from each event's intended time (open loop); a progress line \
            goes to stderr once a second, a summary table to stdout.
            """
    )

    @Argument(help: "A built-in scenario name or a scenario file.")
    var scenario: String = "default"

    @Option(help: "Override the duration, in seconds.")
    var duration: Double?

    @Option(help: "Worker threads (one event loop each); 0 = one per core.")
    var workers: Int?

    @Option(help: "virtual (as fast as the CPU allows, deterministic) or real (open loop on the wall clock).")
    var clock: String?

    @Option(help: "Override the seed.")
    var seed: UInt64?

    @Option(name: .customLong("rate-scale"), help: "Multiply every arrival rate (phases and ramps) by this factor.")
    var rateScale: Double?

    @Option(
        help: ArgumentHelp(
            "Simulate only slice K of N of the devices (K from 0, by a stable hash of the device id), with every "
                + "event; `fanout merge` adds the shards' folders into the whole run's.", valueName: "K/N"))
    var shard: String?

    @Flag(
        name: .customLong("slice-broadcasts"),
        help: "Real time: large broadcasts yield between batches to due events of other sources.")
    var sliceBroadcasts = false

    @Option(help: "Run folder (default reports/runs/<UTC time>-<scenario>[-shard-K-of-N]/).")
    var out: String?

    @Option(
        help: ArgumentHelp(
            "Write the devices' final state here (the trace state-dump format, docs/TRACE.md), as of the end of the "
                + "scenario (its virtual epoch 1700000000 + the duration): what `fanout serve`'s state.jsonl holds.",
            valueName: "FILE"))
    var state: String?

    func run() throws {
        var s = try ScenarioSource.load(scenario)
        if let duration {
            guard duration > 0 && duration <= 30 * 86_400 else {
                throw ValidationError("--duration: expected seconds from 0 to 2592000, got \(duration)")
            }
            s.durationSeconds = duration
        }
        if let workers {
            guard (0...256).contains(workers) else {
                throw ValidationError("--workers: expected 0 to 256, got \(workers)")
            }
            s.workers = workers
        }
        if let clock {
            guard let c = Scenario.Clock(rawValue: clock) else {
                throw ValidationError("--clock: expected virtual or real, got \(clock)")
            }
            s.clock = c
        }
        if sliceBroadcasts { s.sliceBroadcasts = true }
        try ScenarioOverrides.apply(to: &s, seed: seed, rateScale: rateScale)
        var slice = Shard.whole
        if let shard {
            do {
                slice = try Shard(parsing: shard)
            } catch {
                throw ValidationError("--shard: \(error)")
            }
        }
        let suffix = slice.isWhole ? "" : "-shard-\(slice.index)-of-\(slice.count)"
        let folder = out ?? "reports/runs/\(Self.timestamp())-\(s.name)\(suffix)"
        let interactive = isatty(STDERR_FILENO) != 0
        let width = ProgressWidth.columns()
        let banner =
            "fanout run \(s.name)\(slice.isWhole ? "" : " shard \(slice)"): \(s.population.devices) devices, "
            + "\(s.clock.rawValue) time, \(s.durationSeconds) s, seed \(s.seed), config \(s.configHash)\n"
        FileHandle.standardError.write(Data(banner.utf8))
        let result = try Simulation.run(
            s, workers: s.workers, shard: slice, keepEventCompletions: !slice.isWhole, keepState: state != nil
        ) { line in
            let text = ProgressWidth.fit(ProgressText.line(line), width)
            FileHandle.standardError.write(Data((interactive ? "\r\u{1B}[K" + text : text + "\n").utf8))
        }
        if interactive { FileHandle.standardError.write(Data("\n".utf8)) }
        var report = RunReport(result, gitRevision: Machine.gitRevision())
        let renderStart = EventLoop.hrtimeNanos
        var files = RunFiles.all(report)
        report.measurement.reportSeconds = Double(EventLoop.hrtimeNanos &- renderStart) / 1e9
        // summary.json and summary.md state the time the files took (theirs rendered once more with it).
        files["summary.json"] = SummaryJSON.text(report)
        files["summary.md"] = SummaryMarkdown.text(report)
        try RunFiles.write(folder: folder, files: files)
        if let state { try Self.writeState(result, path: state) }
        print(SummaryTable.text(report, folder: folder))
        if !report.accounting.identitiesHold { throw CommandFailure("accounting identities are broken") }
    }

    /// The workers' final states, merged into one dump (sorted lines, one totals line), as of the scenario's end on
    /// its clock: the virtual epoch plus the duration.
    static func writeState(_ result: RunResult, path: String) throws {
        let pipelines = result.finalStates.map(\.pipeline)
        let nowMillis = World.defaultEpochSeconds * 1000 + Int64((result.scenario.durationSeconds * 1000).rounded())
        do {
            let file = try StreamedFile(path: path)
            var chunk: [UInt8] = []
            if pipelines.count == 1 {
                try StateDump.write(
                    pipelines[0], nowMillis: nowMillis, to: &chunk, chunkBytes: StreamedFile.chunkBytes
                ) { try file.write(&$0) }
            } else {
                try StateDump.writeMerged(
                    pipelines, totals: result.accounting, nowMillis: nowMillis, to: &chunk,
                    chunkBytes: StreamedFile.chunkBytes
                ) { try file.write(&$0) }
            }
            try file.write(&chunk)
            try file.commit()
        } catch {
            throw CommandFailure("--state: \(error)")
        }
    }

    static func timestamp() -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return f.string(from: Date())
    }
}

/// A scenario by built-in name or from a file.
enum ScenarioSource {
    static func load(_ nameOrPath: String) throws -> Scenario {
        if let builtin = BuiltinScenarios.named(nameOrPath) { return builtin }
        guard FileManager.default.fileExists(atPath: nameOrPath) else {
            throw ValidationError(
                "no built-in scenario or file named \"\(nameOrPath)\" "
                    + "(built-in: \(BuiltinScenarios.names.joined(separator: ", ")))"
            )
        }
        guard let data = FileManager.default.contents(atPath: nameOrPath) else {
            throw CommandFailure("\(nameOrPath): cannot read the file")
        }
        do {
            return try Scenario.parse(Array(data), file: nameOrPath)
        } catch {
            throw CommandFailure("\(error)")
        }
    }
}

enum ProgressText {
    static func line(_ p: ProgressLine) -> String {
        let a = p.accounting
        let outcomes = Outcome.allCases.filter { a[$0] > 0 }.map { "\($0.name) \(a[$0])" }.joined(separator: " ")
        return String(
            format: "%6.1fs  %10.0f deliveries/s  e2e p50 %@ p99 %@ p99.9 %@  ", p.elapsedSeconds,
            p.deliveriesPerSecond, DurationText.text(p.interval.p50), DurationText.text(p.interval.p99),
            DurationText.text(p.interval.p999)) + outcomes
    }
}

/// Progress lines fit a terminal: `COLUMNS` when set, else the terminal's width, else 80. When stderr is not a
/// terminal (a file, a pipe, a CI log) there is no width: each line is written whole, every figure with its unit.
enum ProgressWidth {
    static func columns() -> Int? {
        guard isatty(STDERR_FILENO) != 0 else { return nil }
        if let text = ProcessInfo.processInfo.environment["COLUMNS"], let n = Int(text), n > 0 { return n }
        var size = winsize()
        if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }

    /// At most `width - 1` characters (a line of exactly the width wraps on some terminals); the whole line when
    /// there is no width (stderr is not a terminal).
    static func fit(_ line: String, _ width: Int?) -> String {
        guard let width else { return line }
        let limit = max(width - 1, 10)
        guard line.count > limit else { return line }
        return String(line.prefix(limit - 1)) + "…"
    }
}

enum DurationText {
    /// Nanoseconds in a readable unit.
    static func text(_ nanos: UInt64) -> String {
        let v = Double(nanos)
        switch v {
        case ..<1_000: return String(format: "%.0fns", v)
        case ..<1_000_000: return String(format: "%.1fµs", v / 1e3)
        case ..<1_000_000_000: return String(format: "%.2fms", v / 1e6)
        default: return String(format: "%.2fs", v / 1e9)
        }
    }

    static func text(_ nanos: Double) -> String { text(UInt64(max(nanos, 0))) }
}

enum SummaryTable {
    static func text(_ r: RunReport, folder: String) -> String {
        let a = r.accounting
        var lines: [String] = []
        let s = r.info
        lines.append(
            "scenario    \(s.scenario) (seed \(s.seed), config \(s.configHash)), \(s.clock) time, \(s.workers) workers"
                + (s.shard.map { ", shard \($0)" } ?? ""))
        lines.append("population  \(r.activities) activities; \(r.events) events")
        lines.append(
            "pushes      \(a.pushes) = rejected \(a.rejectedTotal) + unroutable \(a.unroutableTotal) "
                + "+ routed \(a.routed)"
        )
        let rejected = RejectReason.allCases.filter { a[$0] > 0 }.map { "\($0.name) \(a[$0])" }
        let unroutable = UnroutableReason.allCases.filter { a[$0] > 0 }.map { "\($0.name) \(a[$0])" }
        lines.append("rejected    " + (rejected.isEmpty ? "none" : rejected.joined(separator: ", ")))
        lines.append("unroutable  " + (unroutable.isEmpty ? "none" : unroutable.joined(separator: ", ")))
        let outcomes = Outcome.allCases.filter { a[$0] > 0 }.map { "\($0.name) \(a[$0])" }
        lines.append("deliveries  \(a.deliveries): " + outcomes.joined(separator: ", "))
        lines.append("identities  " + (a.identitiesHold ? "hold" : "BROKEN"))
        lines.append(
            String(
                format: "throughput  %.0f deliveries/s, %.0f pushes/s over %.2f s wall",
                r.perSecond(a.deliveries), r.perSecond(a.pushes), s.wallSeconds))
        lines.append("")
        lines.append("latency                        count       p50       p90       p99     p99.9       max")
        for metric in Metric.allCases {
            let l = LatencySummary(r[metric])
            guard l.count > 0 else { continue }
            lines.append(
                metric.name.padding(toLength: 26, withPad: " ", startingAt: 0)
                    + String(format: "%10llu", l.count)
                    + [l.p50, l.p90, l.p99, l.p999, l.max].map { DurationText.text($0).leftPadded(10) }.joined())
        }
        lines.append("")
        if let model = r.measurement.costModel {
            lines.append("timing      virtual time, cost model \(model) (ns); no clock read")
        } else {
            lines.append(
                String(
                    format: "timing      %d clock reads (%.3f per delivery, %.1f ns each); stages sampled 1 in %d",
                    r.measurement.clockReads, Double(r.measurement.clockReads) / Double(max(a.deliveries, 1)),
                    s.timerOverheadNanos, s.stageSampleEvery))
        }
        lines.append(
            String(
                format: "report      rendered in %.3f s; final merge %.3f s; %d clamped samples",
                r.measurement.reportSeconds, r.measurement.finalMergeSeconds, r.measurement.clampedSamples))
        lines.append(
            "memory      peak RSS \(r.peakResidentBytes / 1_048_576) MiB, ~\(r.bytesPerActivity) bytes per activity")
        lines.append("report      \(folder)/report.html (summary.md, summary.json, latency.hlog, *.hgrm)")
        return lines.joined(separator: "\n")
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

struct Scenarios: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the built-in scenarios, or print one as a starting point for your own file.",
        subcommands: [List.self, Show.self], defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the built-in scenarios.")
        func run() {
            // The name column is as wide as the longest name, plus two spaces.
            let column = (BuiltinScenarios.names.map(\.count).max() ?? 0) + 2
            for name in BuiltinScenarios.names {
                let s = BuiltinScenarios.named(name)!
                print(name.padding(toLength: column, withPad: " ", startingAt: 0) + s.description)
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a built-in scenario as JSON.")
        @Argument(help: "The scenario name.") var name: String
        func run() throws {
            guard let s = BuiltinScenarios.named(name) else {
                throw ValidationError(
                    "no built-in scenario named \"\(name)\" "
                        + "(built-in: \(BuiltinScenarios.names.joined(separator: ", ")))"
                )
            }
            print(s.canonicalText, terminator: "")
        }
    }
}
