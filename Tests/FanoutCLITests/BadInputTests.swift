import Foundation
import Testing

/// Bad input everywhere: each case is a command line (with the files it needs), the exact error
/// message (stderr's `Error:` line) and the exit status — 64 for a usage error (a flag), 1 for
/// bad input in a file — and nothing is left half-written: no run folder, no dump, no merged
/// folder (`$DIR/out`, `$DIR/out.jsonl` must not exist afterwards).
@Suite("Bad input (the executable)", .serialized)
struct BadInputTests {
    struct Case: CustomStringConvertible {
        var name: String
        var arguments: [String]
        var files: [String: String] = [:]
        var status: Int32
        var message: String
        var description: String { name }
    }

    static let header =
        #"{"trace":1,"epoch":1700000000,"schemas":{"Score":{"home":"int","away":"int"}},"#
        + #""limits":{"perApp":5,"perDevice":10},"budgetPerHour":null}"#
    static let request =
        #"{"at":0,"op":"request","device":"d1","app":"com.example.scores","activity":"a1","#
        + #""type":"Score","attributes":{},"state":{"home":0,"away":0},"staleDate":null,"relevance":0,"#
        + #""token":"aa01","channel":null}"#

    /// A trace: the header, one request, then `lines`.
    static func trace(_ lines: String...) -> String { ([header, request] + lines).joined(separator: "\n") + "\n" }

    /// The smoke scenario's text with one change.
    static func scenario(_ old: String, _ new: String) -> String {
        let text = smokeText
        precondition(text.contains(old), "smoke has no \(old)")
        return text.replacingOccurrences(of: old, with: new)
    }

    nonisolated(unsafe) static var smokeText = ""

    static let cases: [Case] = [
        // Flags of `serve` --latency and --faults: usage errors, status 64, nothing written.
        Case(
            name: "serve latency unreadable",
            arguments: ["serve", "smoke", "--h2c", "--latency", "30xs", "--out", "$DIR/out"],
            status: 64, message: "Error: --latency: expected a duration such as 30ms, 1.5s or 250us, got \"30xs\""),
        Case(
            name: "serve latency p99 below p50",
            arguments: ["serve", "smoke", "--h2c", "--latency", "p50=20ms,p99=10ms", "--out", "$DIR/out"],
            status: 64, message: "Error: --latency: expected 0 < p50 < p99, got \"p50=20ms,p99=10ms\""),
        Case(
            name: "push devices past a scenario's bound (the shared scenario overrides check as serve's did)",
            arguments: ["push", "http://127.0.0.1:9", "smoke", "--devices", "50000001", "--out", "$DIR/out"],
            status: 64, message: "Error: --devices: expected 1 to 50000000, got 50000001"),
        // push's numbers that passed their check and trapped converting at the end of the schedule (the run lost),
        // and flags push would have ignored: usage errors before anything starts (FlagBoundsTests has the rest).
        Case(
            name: "push drain infinite",
            arguments: ["push", "http://127.0.0.1:9", "smoke", "--drain", "inf", "--out", "$DIR/out"],
            status: 64, message: "Error: --drain: expected seconds from 0 to 3600, got inf"),
        Case(
            name: "push drain 1e17",
            arguments: ["push", "http://127.0.0.1:9", "smoke", "--drain", "1e17", "--out", "$DIR/out"],
            status: 64, message: "Error: --drain: expected seconds from 0 to 3600, got 1e+17"),
        Case(
            name: "push max schedule lag 1e30",
            arguments: ["push", "http://127.0.0.1:9", "smoke", "--max-schedule-lag", "1e30", "--out", "$DIR/out"],
            status: 64,
            message: "Error: --max-schedule-lag: expected milliseconds above 0, at most 3600000, got 1e+30"),
        Case(
            name: "push team without auth key",
            arguments: ["push", "http://127.0.0.1:9", "smoke", "--team", "T", "--out", "$DIR/out"],
            status: 64,
            message: "Error: --team: the team of provider tokens signed with --auth-key, which is missing"),
        Case(
            name: "push ca on an http target",
            arguments: ["push", "http://127.0.0.1:9", "smoke", "--ca", "/dev/null", "--out", "$DIR/out"],
            status: 64, message: "Error: --ca: no https:// target (an http:// target has no certificate)"),
        Case(
            name: "serve epoch past 2100",
            arguments: ["serve", "smoke", "--h2c", "--epoch", "9223372036854775807", "--out", "$DIR/out"],
            status: 64, message: "Error: --epoch: expected UNIX seconds from 0 to 4102444800, got 9223372036854775807"),
        Case(
            name: "serve rate scale zero",
            arguments: ["serve", "smoke", "--h2c", "--rate-scale", "0", "--out", "$DIR/out"],
            status: 64, message: "Error: --rate-scale: expected a factor above 0 and at most 1000, got 0.0"),
        // --trigger: usage errors, status 64, nothing written.
        Case(
            name: "serve trigger not http",
            arguments: ["serve", "smoke", "--h2c", "--trigger", "ftp://x/", "--out", "$DIR/out"],
            status: 64, message: "Error: --trigger: ftp://x/: expected an http:// or https:// URL, got ftp://"),
        Case(
            name: "serve trigger not a URL",
            arguments: ["serve", "smoke", "--h2c", "--trigger", "nota_url", "--out", "$DIR/out"],
            status: 64, message: "Error: --trigger: nota_url: not a URL (Bad scheme)"),
        Case(
            name: "serve trigger settings without trigger",
            arguments: ["serve", "smoke", "--h2c", "--trigger-timeout", "3", "--out", "$DIR/out"],
            status: 64,
            message:
                "Error: --trigger-concurrency, --trigger-timeout, --trigger-http and --trigger-ca need --trigger URL, "
                + "--register URL or --app-events URL"),
        Case(
            name: "serve register not http",
            arguments: ["serve", "smoke", "--h2c", "--register", "mailto:x@y", "--out", "$DIR/out"],
            status: 64, message: "Error: --register: mailto:x@y: not a URL (Unsupported URL scheme)"),
        Case(
            name: "serve register rate",
            arguments: ["serve", "smoke", "--h2c", "--register", "http://127.0.0.1:1/", "--register-rate", "0", "--out",
                "$DIR/out"],
            status: 64, message: "Error: --register-rate: expected 0 < rate <= 1000000, got 0.0"),
        Case(
            name: "serve register settings without register",
            arguments: ["serve", "smoke", "--h2c", "--register-attempts", "2", "--out", "$DIR/out"],
            status: 64,
            message: "Error: --register-rate, --register-attempts and --register-deadline need --register URL"),
        Case(
            name: "serve trigger http version",
            arguments: ["serve", "smoke", "--h2c", "--trigger", "http://127.0.0.1:1/", "--trigger-http", "3", "--out",
                "$DIR/out"],
            status: 64, message: "Error: --trigger-http: expected 1.1 or 2, got 3"),
        Case(
            name: "serve trigger concurrency",
            arguments: ["serve", "smoke", "--h2c", "--trigger", "http://127.0.0.1:1/", "--trigger-concurrency", "0",
                "--out", "$DIR/out"],
            status: 64, message: "Error: --trigger-concurrency: expected 1 to 100000, got 0"),
        Case(
            name: "serve faults over 100%",
            arguments: ["serve", "smoke", "--h2c", "--faults", "503=60%,429=50%", "--out", "$DIR/out"],
            status: 64, message: "Error: --faults: the shares of 503, 429, 500 and reset add up to over 100%"),
        Case(
            name: "serve faults unknown kind",
            arguments: ["serve", "smoke", "--h2c", "--faults", "418=1%", "--out", "$DIR/out"],
            status: 64,
            message:
                "Error: --faults: unknown kind \"418\" (expected 503, 429, 500, reset, goaway-every, stall-every)"),
        Case(
            name: "serve faults stall longer than its period",
            arguments: ["serve", "smoke", "--h2c", "--faults", "stall-every=1s:2s", "--out", "$DIR/out"],
            status: 64, message: "Error: --faults: stall-every=EVERY:FOR needs 1ms <= FOR < EVERY, got \"1s:2s\""),
        // Flags of `run`: usage errors, status 64.
        Case(
            name: "workers negative", arguments: ["run", "smoke", "--workers=-3", "--out", "$DIR/out"],
            status: 64, message: "Error: --workers: expected 0 to 256, got -3"),
        Case(
            name: "workers too many", arguments: ["run", "smoke", "--workers", "300", "--out", "$DIR/out"],
            status: 64, message: "Error: --workers: expected 0 to 256, got 300"),
        Case(
            name: "clock unknown", arguments: ["run", "smoke", "--clock", "wall", "--out", "$DIR/out"],
            status: 64, message: "Error: --clock: expected virtual or real, got wall"),
        Case(
            name: "duration zero", arguments: ["run", "smoke", "--duration", "0", "--out", "$DIR/out"],
            status: 64, message: "Error: --duration: expected seconds from 0 to 2592000, got 0.0"),
        Case(
            name: "duration not a number", arguments: ["run", "smoke", "--duration", "ten", "--out", "$DIR/out"],
            status: 64, message: "Error: The value 'ten' is invalid for '--duration <duration>'"),
        Case(
            name: "rate scale zero", arguments: ["run", "smoke", "--rate-scale", "0", "--out", "$DIR/out"],
            status: 64, message: "Error: --rate-scale: expected a factor above 0 and at most 1000, got 0.0"),
        Case(
            name: "rate scale huge", arguments: ["run", "smoke", "--rate-scale", "5000", "--out", "$DIR/out"],
            status: 64, message: "Error: --rate-scale: expected a factor above 0 and at most 1000, got 5000.0"),
        Case(
            name: "seed negative", arguments: ["run", "smoke", "--seed=-1", "--out", "$DIR/out"],
            status: 64, message: "Error: The value '-1' is invalid for '--seed <seed>'"),
        Case(
            name: "shard K too large", arguments: ["run", "smoke", "--shard", "2/2", "--out", "$DIR/out"],
            status: 64, message: "Error: --shard: K must be from 0 to 1, got 2"),
        Case(
            name: "shard N zero", arguments: ["run", "smoke", "--shard", "0/0", "--out", "$DIR/out"],
            status: 64, message: "Error: --shard: N must be from 1 to 65536, got 0"),
        Case(
            name: "shard not K/N", arguments: ["run", "smoke", "--shard", "half", "--out", "$DIR/out"],
            status: 64, message: "Error: --shard: expected K/N (for example 0/4), got \"half\""),
        Case(
            name: "unknown flag", arguments: ["run", "smoke", "--turbo", "--out", "$DIR/out"],
            status: 64, message: "Error: Unknown option '--turbo'"),
        Case(
            name: "unknown scenario", arguments: ["run", "nonesuch", "--out", "$DIR/out"], status: 64,
            message: "Error: no built-in scenario or file named \"nonesuch\" (built-in: default, smoke, million, "
                + "soak, game-night, faults-out-of-order, faults-payloads, faults-rotation, faults-channel-churn, "
                + "faults-offline, faults-budget, faults-edges)"),
        Case(
            name: "unknown subcommand", arguments: ["fly"], status: 64,
            message: "Error: Unexpected argument 'fly'"),
        // Scenario files: file, line and field, status 1.
        Case(
            name: "scenario not JSON", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": #"{"name": "x",}"#], status: 1,
            message: "Error: $DIR/s.json:1: not valid JSON (at byte 14)"),
        Case(
            name: "scenario empty", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": ""], status: 1, message: "Error: $DIR/s.json:1: not valid JSON (at byte 1)"),
        Case(
            name: "scenario not an object", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": "[]"], status: 1, message: "Error: $DIR/s.json:1: expected an object"),
        Case(
            name: "scenario bad UTF-8", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": "{\"name\": \"\u{FFFD}\"}\u{0}"], status: 1,
            message: "Error: $DIR/s.json:1: not valid JSON (at byte 16)"),
        Case(
            name: "scenario unknown field", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": scenario("\"seed\": 7,", "\"seed\": 7,\n  \"colour\": \"red\",")], status: 1,
            message: "Error: $DIR/s.json:5: field colour: unknown field (expected one of: name, description, seed, "
                + "clock, durationSeconds, workers, population, apps, schemas, stringBytes, sources, arrival, faults, "
                + "lifecycle, limits, budgetPerHour, priority10Share, stageSampleEvery, costNanosPerDelivery, "
                + "sliceBroadcasts, costModel)"),
        Case(
            name: "scenario negative duration", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": scenario("\"durationSeconds\": 60", "\"durationSeconds\": -5")], status: 1,
            message: "Error: $DIR/s.json:6: field durationSeconds: -5.0 is out of range (expected 0.001 to 2592000.0)"),
        Case(
            name: "scenario devices a string", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": scenario("\"devices\": 500", "\"devices\": \"ten\"")], status: 1,
            message: "Error: $DIR/s.json:9: field population.devices: expected an integer"),
        Case(
            name: "scenario no devices", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": scenario("\"devices\": 500", "\"devices\": 0")], status: 1,
            message: "Error: $DIR/s.json:9: field population.devices: 0 is out of range (expected 1 to 50000000)"),
        Case(
            name: "scenario min above max", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": scenario("{\"min\": 1, \"max\": 4}", "{\"min\": 4, \"max\": 1}")], status: 1,
            message:
                "Error: $DIR/s.json:10: field population.activitiesPerDevice.max: 1 is out of range (expected 4 to 64)"),
        Case(
            name: "scenario unknown schema", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": scenario("\"schema\": \"GameAttributes\"", "\"schema\": \"Nope\"")], status: 1,
            message: "Error: $DIR/s.json:13: field apps[0].schema: no schema named \"Nope\" in schemas"),
        Case(
            name: "scenario bad field type", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": scenario("\"home\": \"int\"", "\"home\": \"integer\"")], status: 1,
            message: "Error: $DIR/s.json:16: field schemas.GameAttributes.home: expected a type: int, double, "
                + "string or bool, optionally with ?"),
        Case(
            name: "scenario no sources", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": scenario("\"count\": 40", "\"count\": 0")], status: 1,
            message: "Error: $DIR/s.json:19: field sources.count: 0 is out of range (expected 1 to 10000000)"),
        Case(
            name: "scenario unknown process", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": scenario("\"process\": \"poisson\"", "\"process\": \"bursty\"")], status: 1,
            message:
                "Error: $DIR/s.json:21: field arrival.process: expected \"constant\" or \"poisson\", found \"bursty\""),
        Case(
            name: "scenario share above 1", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": scenario("\"malformedShare\": 0.01", "\"malformedShare\": 1.5")], status: 1,
            message: "Error: $DIR/s.json:27: field faults.malformedShare: 1.5 is out of range (expected 0.0 to 1.0)"),
        Case(
            name: "scenario half a lifecycle", arguments: ["run", "$DIR/s.json", "--out", "$DIR/out"],
            files: ["s.json": scenario("\"endFractionMin\": 0.5, ", "")], status: 1,
            message: "Error: $DIR/s.json:34: field lifecycle: give both endFractionMin and endFractionMax, or neither"),
        Case(
            name: "scenario missing file", arguments: ["run", "$DIR/none.json", "--out", "$DIR/out"], status: 64,
            message: "Error: no built-in scenario or file named \"$DIR/none.json\" (built-in: default, smoke, million, "
                + "soak, game-night, faults-out-of-order, faults-payloads, faults-rotation, faults-channel-churn, "
                + "faults-offline, faults-budget, faults-edges)"),
        // Traces: file, line and what is wrong, status 1, no dump.
        Case(
            name: "trace missing", arguments: ["replay", "$DIR/none.jsonl", "--dump", "$DIR/out.jsonl"], status: 1,
            message: "Error: $DIR/none.jsonl: No such file or directory"),
        Case(
            name: "trace not JSON", arguments: ["replay", "$DIR/t.jsonl", "--dump", "$DIR/out.jsonl"],
            files: ["t.jsonl": trace(#"{"at":1000,"op":"advance""#)], status: 1,
            message: "Error: $DIR/t.jsonl: line 3: invalid JSON at byte 26"),
        Case(
            name: "trace time going back", arguments: ["replay", "$DIR/t.jsonl", "--dump", "$DIR/out.jsonl"],
            files: ["t.jsonl": trace(#"{"at":1000,"op":"advance"}"#, #"{"at":999,"op":"advance"}"#)], status: 1,
            message: "Error: $DIR/t.jsonl: line 4: field at: 999 is earlier than the line before (1000)"),
        Case(
            name: "trace unknown op", arguments: ["replay", "$DIR/t.jsonl", "--dump", "$DIR/out.jsonl"],
            files: ["t.jsonl": trace(#"{"at":1000,"op":"teleport"}"#)], status: 1,
            message: "Error: $DIR/t.jsonl: line 3: field op: unknown op \"teleport\""),
        Case(
            name: "trace duplicate activity", arguments: ["replay", "$DIR/t.jsonl", "--dump", "$DIR/out.jsonl"],
            files: ["t.jsonl": trace(request.replacingOccurrences(of: "aa01", with: "aa02"))], status: 1,
            message: "Error: $DIR/t.jsonl: line 3: field activity: activity \"a1\" already exists"),
        Case(
            name: "trace header version", arguments: ["replay", "$DIR/t.jsonl", "--dump", "$DIR/out.jsonl"],
            files: ["t.jsonl": header.replacingOccurrences(of: "\"trace\":1", with: "\"trace\":2") + "\n"], status: 1,
            message: "Error: $DIR/t.jsonl: line 1: header: field trace: expected 1"),
        Case(
            name: "trace empty", arguments: ["replay", "$DIR/t.jsonl", "--dump", "$DIR/out.jsonl"],
            files: ["t.jsonl": ""], status: 1,
            message: "Error: $DIR/t.jsonl: line 1: empty trace: expected a header line"),
        // Run folders given to compare and merge: the file and the field, status 1 (a shard set merge refuses: 5 or 6).
        Case(
            name: "compare missing folder", arguments: ["compare", "$DIR/none", "$DIR/none2"], status: 1,
            message: "Error: $DIR/none: no such file or folder"),
        Case(
            name: "compare folder without summary", arguments: ["compare", "$DIR/empty", "$DIR/empty"],
            files: ["empty/.keep": ""], status: 1,
            message: "Error: $DIR/empty/summary.json: cannot read the file (a run folder holds summary.json)"),
        Case(
            name: "compare summary not JSON", arguments: ["compare", "$DIR/s.json", "$DIR/s.json"],
            files: ["s.json": "{\"schema\": 1,"], status: 1,
            message: "Error: $DIR/s.json: not valid JSON (Unexpected end of file during JSON parse.)"),
        Case(
            name: "compare summary schema 2", arguments: ["compare", "$DIR/s.json", "$DIR/s.json"],
            files: ["s.json": "{\"schema\": 2}"], status: 1,
            message: "Error: $DIR/s.json: field schema: expected 1, got 2"),
        Case(
            name: "compare summary missing counts", arguments: ["compare", "$DIR/s.json", "$DIR/s.json"],
            files: ["s.json": #"{"schema": 1, "run": {}}"#], status: 1,
            message: "Error: $DIR/s.json: field run.machine: expected an object"),
        Case(
            name: "compare format unknown", arguments: ["compare", "$DIR/a", "$DIR/b", "--format", "xml"], status: 64,
            message: "Error: --format: expected text, markdown or json, got xml"),
        // Thresholds: an unknown metric or percentile is never a silent pass.
        Case(
            name: "threshold unknown metric", arguments: ["compare", "$DIR/a", "$DIR/b", "--threshold", "e2e.p99=+5%"],
            status: 1,
            message: "Error: --threshold: threshold \"e2e.p99=+5%\": unknown metric \"e2e\" (known: *, "
                + "encode, validate, route, apply, endToEnd, fanoutCompletion, fanoutCompletion.1, "
                + "fanoutCompletion.2-100, fanoutCompletion.101-10k, fanoutCompletion.>10k, scheduleLag; "
                + "fanout serve: service, delivery, fanout, validate, route, endToEnd; "
                + "fanout push: latency, scheduleLag)"),
        Case(
            name: "threshold unknown percentile",
            arguments: ["compare", "$DIR/a", "$DIR/b", "--threshold", "endToEnd.p95=+5%"], status: 1,
            message: "Error: --threshold: threshold \"endToEnd.p95=+5%\": unknown percentile \"p95\" "
                + "(known: p50, p90, p99, p99.9, p99.99, max)"),
        Case(
            name: "threshold not a percentage",
            arguments: ["compare", "$DIR/a", "$DIR/b", "--threshold", "endToEnd.p99=+5ms"], status: 1,
            message:
                "Error: --threshold: threshold \"endToEnd.p99=+5ms\": the amount must be a percentage, like +10%, or off"
        ),
        Case(
            name: "threshold negative", arguments: ["compare", "$DIR/a", "$DIR/b", "--threshold", "endToEnd.p99=-5%"],
            status: 1,
            message: "Error: --threshold: threshold \"endToEnd.p99=-5%\": expected a percentage ≥ 0, like +10%"),
        Case(
            name: "threshold without =", arguments: ["compare", "$DIR/a", "$DIR/b", "--threshold", "endToEnd.p99"],
            status: 1, message: "Error: --threshold: threshold \"endToEnd.p99\": expected METRIC.PERCENTILE=+N%"),
        Case(
            name: "threshold count with a percentage",
            arguments: ["compare", "$DIR/a", "$DIR/b", "--threshold", "events.missing=+10%"], status: 1,
            message: "Error: --threshold: threshold \"events.missing=+10%\": a count is judged (more than the "
                + "baseline is a regression) or not: expected events.missing=off"),
        Case(
            name: "threshold unknown count",
            arguments: ["compare", "$DIR/a", "$DIR/b", "--threshold", "events.delivered=off"], status: 1,
            message: "Error: --threshold: threshold \"events.delivered=off\": unknown count \"events.delivered\" "
                + "(judged counts of fanout serve runs: events.missing, events.staleAtEnd, events.uncorrelated, "
                + "events.duplicate, events.reordered, events.skipped, events.wrongContent, events.wrongKind, "
                + "events.sentToUnregistered, events.sentAfterAppEvent, events.kickoffNotStarted, "
                + "events.kickoffNotRegistered)"),
        Case(
            name: "merge nothing", arguments: ["merge", "--out", "$DIR/out"], status: 64,
            message: "Error: Missing expected argument '<folders> ...'"),
        Case(
            name: "merge missing folder", arguments: ["merge", "$DIR/none", "--out", "$DIR/out"], status: 1,
            message: "Error: $DIR/none: no such file or folder"),
    ]

    /// Cases that need real run folders (shards): built once.
    func shardCases(_ dir: URL) throws -> [Case] {
        let d = dir.path
        for (k, seed) in [(0, "7"), (1, "7"), (1, "8")] {
            let out = "\(d)/seed\(seed)-shard\(k)"
            let r = try CLI.run(["run", "smoke", "--duration", "5", "--seed", seed, "--shard", "\(k)/2", "--out", out])
            #expect(r.status == 0, "\(r.stderr)")
        }
        let whole = try CLI.run(["run", "smoke", "--duration", "5", "--out", "\(d)/whole"])
        #expect(whole.status == 0)
        // A shard without its completion file, a shard with a corrupt log, one with a bad completion line.
        let fm = FileManager.default
        for name in ["nocompletion", "badlog", "badcompletion"] {
            try fm.copyItem(atPath: "\(d)/seed7-shard1", toPath: "\(d)/\(name)")
        }
        try fm.removeItem(atPath: "\(d)/nocompletion/completion.tsv")
        try "#[Histogram log format version 1.3]\nTag=endToEnd,0.000,60.000,1.0,not-base64!\n"
            .write(toFile: "\(d)/badlog/latency.hlog", atomically: true, encoding: .utf8)
        try "event\tintendedNanos\tlastAppliedNanos\trecipients\n0\t1\tx\t2\n"
            .write(toFile: "\(d)/badcompletion/completion.tsv", atomically: true, encoding: .utf8)
        let s0 = "$DIR/seed7-shard0"
        return [
            Case(
                name: "merge a whole run", arguments: ["merge", "$DIR/whole", "--out", "$DIR/out"], status: 5,
                message: "Error: $DIR/whole: not a shard (run it with --shard K/N)"),
            Case(
                name: "merge a missing shard", arguments: ["merge", s0, "--out", "$DIR/out"], status: 5,
                message: "Error: merge: missing shard 1/2 of 2"),
            Case(
                name: "merge a repeated shard", arguments: ["merge", s0, s0, "--out", "$DIR/out"], status: 5,
                message: "Error: $DIR/seed7-shard0: shard 0/2 is also in $DIR/seed7-shard0"),
            Case(
                name: "merge another seed", arguments: ["merge", s0, "$DIR/seed8-shard1", "--out", "$DIR/out"],
                status: 6,
                message: "Error: $DIR/seed8-shard1: seed 8 differs from $DIR/seed7-shard0's 7: "
                    + "not shards of one run"),
            Case(
                name: "merge without completion.tsv",
                arguments: ["merge", s0, "$DIR/nocompletion", "--out", "$DIR/out"],
                status: 1,
                message: "Error: $DIR/nocompletion/completion.tsv: missing: a shard's folder holds its "
                    + "per-event completion"),
            Case(
                name: "merge a corrupt log", arguments: ["merge", s0, "$DIR/badlog", "--out", "$DIR/out"], status: 1,
                message: "Error: $DIR/badlog/latency.hlog: line 2: expected Tag=…,start,length,max,base64"),
            Case(
                name: "merge a bad completion line",
                arguments: ["merge", s0, "$DIR/badcompletion", "--out", "$DIR/out"], status: 1,
                message: "Error: $DIR/badcompletion/completion.tsv: line 2: expected event, intendedNanos, "
                    + "lastAppliedNanos, recipients"),
        ]
    }

    @Test("every bad input: its exact message, its exit status, nothing half-written")
    func table() throws {
        let show = try CLI.run(["scenarios", "show", "smoke"])
        Self.smokeText = show.stdout
        let shared = try CLI.temporaryDirectory()
        let all = Self.cases.map { ($0, false) } + (try shardCases(shared)).map { ($0, true) }
        #expect(all.count >= 40)
        for (c, usesShared) in all {
            let dir = usesShared ? shared : try CLI.temporaryDirectory()
            for (name, text) in c.files {
                let url = dir.appendingPathComponent(name)
                try FileManager.default.createDirectory(
                    at: url.deletingLastPathComponent(),
                    withIntermediateDirectories: true)
                try Data(text.utf8).write(to: url)
            }
            let arguments = c.arguments.map { $0.replacingOccurrences(of: "$DIR", with: dir.path) }
            let result = try CLI.run(arguments)
            let expected = c.message.replacingOccurrences(of: "$DIR", with: dir.path)
            // The error line (a usage error adds the usage text and a "See --help" line after it).
            let last = result.stderr.split(separator: "\n").first { $0.hasPrefix("Error: ") }.map(String.init) ?? ""
            #expect(result.status == c.status, "\(c.name): status \(result.status), stderr: \(result.stderr)")
            #expect(last == expected, "\(c.name):\n got      \(last)\n expected \(expected)")
            if last != expected {
                print("MISMATCH\t\(c.name)\t\(last.replacingOccurrences(of: dir.path, with: "$DIR"))")
            }
            for leftover in ["out", "out.jsonl"] {
                #expect(
                    !FileManager.default.fileExists(atPath: dir.appendingPathComponent(leftover).path),
                    "\(c.name): \(leftover) was written")
            }
        }
    }
}
