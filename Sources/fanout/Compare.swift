import ArgumentParser
import FanoutReport
import Foundation

struct Compare: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compare two runs: every metric and percentile with its change, judged against thresholds.",
        discussion: """
            BASELINE and CURRENT are run folders or their summary.json files, both of fanout run or both of \
            fanout serve. Latency percentiles (p50, p90, \
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
            reorder a source's updates: the device ignores the older one).

            Exit status (package-benchmark's convention): 0 within thresholds, 2 a regression, 4 only \
            improvements, 1 bad input.
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

    func run() throws {
        guard ["text", "markdown", "json"].contains(format) else {
            throw ValidationError("--format: expected text, markdown or json, got \(format)")
        }
        var list = Comparison.defaultThresholds
        var ungated: Set<String> = []
        for text in thresholds {
            do {
                if let count = try Comparison.ungatedCount(parsing: text) {
                    ungated.insert(count)
                } else {
                    list.append(try Comparison.Threshold(parsing: text))
                }
            } catch {
                throw CommandFailure("--threshold: \(error)")  // exit 1: never a silent pass
            }
        }
        let comparison: Comparison
        do {
            switch (try AnySummaryFile.read(baseline), try AnySummaryFile.read(current)) {
            case (.run(let b), .run(let c)):
                guard ungated.isEmpty else {
                    throw CommandFailure(
                        "--threshold \(ungated.sorted().joined(separator: ", "))=off: events counts are judged in "
                            + "fanout serve runs only; \(baseline) and \(current) are fanout run folders")
                }
                comparison = Comparison(baseline: b, current: c, thresholds: list)
            case (.serve(let b), .serve(let c)):
                comparison = Comparison(baseline: b, current: c, thresholds: list, ungated: ungated)
            default:
                throw CommandFailure("\(baseline) and \(current): one is a fanout serve run, the other is not")
            }
        } catch let error as CommandFailure {
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
}

struct Merge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Merge the run folders of a sharded run (fanout run --shard K/N) into the whole run's folder.",
        discussion: """
            The folders must be all N shards of one run: same scenario, seed, configuration and clock. \
            Counts are summed and the accounting identities checked again; histograms are added interval by \
            interval (never percentiles averaged); fan-out completion is rebuilt per event from each shard's \
            completion.tsv (the last recipient on any shard). Writes every file of a run folder to --out.
            """
    )

    @Argument(help: "The shards' run folders.") var folders: [String]

    @Option(help: "The merged run folder.") var out: String

    func run() throws {
        guard !folders.isEmpty else { throw ValidationError("expected the run folders of the shards") }
        let merged: RunReport
        do {
            var parts: [(folder: String, report: RunReport)] = []
            for folder in folders { parts.append((folder, try RunFolderReader.read(folder))) }
            merged = try RunMerge.merge(parts)
        } catch {
            throw CommandFailure("\(error)")
        }
        try RunFiles.write(folder: out, files: RunFiles.all(merged))
        print(SummaryTable.text(merged, folder: out))
    }
}
