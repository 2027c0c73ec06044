import ArgumentParser
import FanoutMetrics
import FanoutPush
import FanoutReport
import FanoutSim
import Foundation

struct Push: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a scenario's or a trace's pushes over HTTP/2 to an APNs endpoint at their intended times.",
        discussion: """
            TARGET is http://HOST:PORT (h2c, prior knowledge) or https://HOST:PORT (TLS, ALPN h2); N of them, \
            comma-separated, are the N shards of `fanout serve --shard K/N` in order (each token push to its \
            device's shard, each broadcast to every one, --connections per target). SCENARIO is a \
            built-in name or a scenario file. Each event's pushes (one per follower of a token source, each with its \
            own device token, apns-id and the body the core encodes as `fanout run` does; one broadcast per event of \
            a channel source) are sent at the event's intended time on one libuv loop. The tokens are those \
            `fanout serve` builds for the same scenario, seed and --devices. Latency is measured from the intended \
            time to the answer's END_STREAM (a failed or unanswered request to its end: latency fails closed): a \
            wait for a free stream or connection counts (coordinated omission accounted for, as wrk2 does). Exit \
            status: 0 (requests that failed — reset, GOAWAY, an answer past the client's bounds — are counts in \
            summary.json); 1 on an error (no connection: nothing listening, not HTTP/2, a failed TLS handshake; \
            every connection lost) or a broken identity; 3 when the generator was saturated (its own lateness, \
            dispatchLag p99, above --max-schedule-lag); 2 when a --threshold was broken (a saturated run is never \
            judged: 3 wins, as numbers from an overloaded client pass or fail no gate; a server-limited run — \
            streamWait p99 above the bound, or requests still queued at the end — is judged); 130 when SIGINT or \
            SIGTERM ended the run early (its folder is written, no threshold judged); 64 on a bad argument (a \
            --start-at more than 1 s in the past, --start-at with --barrier, an unknown --threshold, a number \
            outside its range, --team without --auth-key or the other way round, --ca or --insecure without an \
            https:// target, --ca with --insecure). With --shard K/N only the events whose index is K modulo N are \
            sent (every event's pushes by exactly one shard); with --start-at every shard's schedule starts at one \
            instant, or with --barrier DIR at the one their ready files in DIR fix (exit 7 for a shard too late for \
            it, 8 when its peers are not all there within --barrier-timeout), and `fanout merge` adds the shards' \
            folders into the whole run's. A trace (docs/TRACE.md) in \
            place of the scenario: every push line is sent at its `at` after the start (divided by --rate-scale), \
            token pushes to /3/device/TOKEN, push-to-start to /3/device/STARTTOKEN, channel pushes to \
            /4/broadcasts/apps/BUNDLE with apns-channel-id, with the line's own headers and exact payload bytes; the \
            other ops are the device's side and are counted, not sent; --shard K/N sends the push lines whose index \
            is K modulo N. An unreadable trace stops with `line N: what is wrong`, exit status 1, nothing sent.
            """
    )

    @Argument(
        help: ArgumentHelp(
            "http://HOST:PORT or https://HOST:PORT; several, comma-separated, are N serve shards (target i is "
                + "`fanout serve --shard i/N`): each token push goes to its device's shard, each broadcast to all, "
                + "--connections per target.", valueName: "TARGET[,TARGET...]"))
    var target: String

    @Argument(
        help: ArgumentHelp(
            "A built-in scenario name, a scenario file, or a trace (docs/TRACE.md: its first line is "
                + "{\"trace\": 1, ...}): its push lines are sent.", valueName: "scenario|file|trace"))
    var scenario: String = "smoke"

    @Option(help: "HTTP/2 connections (one loop, one thread), 1 to 1024.")
    var connections = 1

    @Option(
        help: ArgumentHelp(
            "Streams in flight per connection at most, 1 to 100000 (the server's SETTINGS_MAX_CONCURRENT_STREAMS "
                + "bounds it too)."))
    var streams = 1000

    @Option(
        help: ArgumentHelp(
            "Send only the first S seconds of the schedule, above 0, at most 2592000 (of a trace: its push lines due "
                + "by then)."))
    var duration: Double?

    @Option(
        name: .customLong("rate-scale"),
        help: "Multiply every arrival rate (phases and ramps) by this factor; a trace's times are divided by it.")
    var rateScale: Double?

    @Option(
        help: "Override the seed (use the same one as `fanout serve`); a trace's generated apns-ids come from it (0).")
    var seed: UInt64?

    @Option(help: "Override the device count (use the same one as `fanout serve`).")
    var devices: Int?

    @Option(
        help: ArgumentHelp(
            "The scenario's clock at the start, UNIX seconds (default: the wall clock): the payloads' timestamps, "
                + "stale and dismissal dates and apns-expiration count from it. `fanout run` uses 1700000000; give "
                + "`fanout serve` the same --epoch. 0 to 4102444800.", valueName: "SECONDS"))
    var epoch: Int64?

    @Option(
        help: "PEM file of the CAs the server's certificate must chain to (an https:// target; not with --insecure).")
    var ca: String?

    @Flag(help: "Do not verify the server's certificate (an https:// target).")
    var insecure = false

    @Option(
        name: .customLong("auth-key"),
        help: ArgumentHelp("Sign provider tokens (ES256) with this .p8 key.", valueName: "KEYID=FILE"))
    var authKey: String?

    @Option(help: "The team id of the provider tokens (iss); needs --auth-key, which needs it.")
    var team: String?

    @Option(
        name: .customLong("max-schedule-lag"),
        help: ArgumentHelp(
            "The dispatchLag p99 above which the generator counts as saturated (exit 3), and the streamWait p99 "
                + "above which the run is server-limited (reported, thresholds judged); above 0, at most 3600000.",
            valueName: "MS"))
    var maxScheduleLag = 10.0

    @Option(
        help: ArgumentHelp(
            "Connections opened during the run in place of ones that end or drain (a GOAWAY, a lost connection, "
                + "stream ids used up), at most, over the whole run (0: never reconnect; at most 1000000).", valueName: "N"))
    var reconnects = 1000

    @Option(
        name: .customLong("reconnect-budget"),
        help: ArgumentHelp(
            "How long a connection keeps being replaced after it was lost, 0 to 604800: the replacement of a "
                + "connection that had answers (lost, or draining after a GOAWAY or near its last stream id) opens at "
                + "once, one after a connection that never answered (a failed attempt) after a backoff (50 ms "
                + "doubling to 5 s, drawn between half and all of it); past the budget, counted from the loss until "
                + "a replacement is ready, the connection is given up (0: no reconnect). Requests wait for a ready "
                + "connection meanwhile (at most --max-queued per connection).",
            valueName: "SECONDS"))
    var reconnectBudget = 30.0

    @Option(
        name: .customLong("connect-timeout"),
        help: ArgumentHelp(
            "Every connection, reconnects included, must be ready (TCP connect, TLS handshake, the server's "
                + "SETTINGS) within this, above 0 and at most 600; the first ones or the run fails (exit 1), a "
                + "reconnect counts as a failed attempt.", valueName: "SECONDS"))
    var connectTimeout = 10.0

    @Option(
        name: .customLong("request-timeout"),
        help: ArgumentHelp(
            "A request unanswered this long after it was handed to a connection (queued or sent), above 0 and at "
                + "most 3600, fails as `timeout`: its stream is reset (RST_STREAM CANCEL), its latency recorded "
                + "censored at the deadline in `latency` (not in `answeredLatency`).", valueName: "SECONDS"))
    var requestTimeout = 10.0

    @Option(
        name: .customLong("ping-interval"),
        help: ArgumentHelp(
            "A PING on every ready connection this often, 0 (none) or 0.1 to 3600; a connection whose PING is not "
                + "answered by the next one is closed as lost (a half-open connection): its open requests fail as "
                + "`connection ended`, its queued ones go to another connection.", valueName: "SECONDS"))
    var pingInterval = 10.0

    @Option(
        name: .customLong("first-stream-id"),
        help: ArgumentHelp(
            "The first stream id of the run's first connections (odd, 1 to 2147483647; replacements start at 1): a "
                + "soak or a test starts them near the end of their ids to see them drain and be replaced.",
            valueName: "ID", visibility: .hidden))
    var firstStreamId: Int = 1

    @Option(
        name: .customLong("max-queued"),
        help: ArgumentHelp(
            "Requests waiting for a free stream per connection, and waiting for a ready connection per connection "
                + "of a target, at most (1 to 10000000); past it a request fails at once as `dropped (queue full)`, "
                + "which makes the run server-limited (or saturated, when the generator's loop was busy).",
            valueName: "N"))
    var maxQueued = 100_000

    @Option(help: "Seconds to wait for answers after the last event before closing the connections (0 to 3600).")
    var drain = 10.0

    @Option(
        help: ArgumentHelp(
            "Send only the events whose index is K modulo N (K from 0): N processes together send the whole "
                + "schedule, each event's pushes by one of them; `fanout merge` adds their folders.",
            valueName: "K/N"))
    var shard: String?

    @Option(
        name: .customLong("start-at"),
        help: ArgumentHelp(
            "Start the schedule (its t0) at this instant: RFC 3339 (2026-11-26T10:00:00Z) or UNIX seconds, once "
                + "the population is built and every connection is ready; the summary records the start skew "
                + "(actual t0 − requested). Ready later than --max-start-skew after it, the run refuses to start "
                + "(exit 7, a folder saying so): shards start together or not at all.",
            valueName: "TIME"))
    var startAt: String?

    @Option(
        name: .customLong("max-start-skew"),
        help: ArgumentHelp(
            "With --start-at or --barrier: how late after the start the run may still start, 0.001 to 3600 "
                + "(default 0.1).",
            valueName: "SECONDS"))
    var maxStartSkew: Double?

    @Option(
        help: ArgumentHelp(
            "With --shard K/N, a start barrier in a directory every shard sees (a shared volume): once the population "
                + "is built and every connection is ready, write DIR/ready-K (its ready instant) and wait until all N "
                + "shards' files are there; the start is the latest ready instant + --barrier-margin, the same for "
                + "every shard, then --max-start-skew applies as with --start-at. Peers missing after "
                + "--barrier-timeout: nothing sent, exit 8, a folder saying so. Not with --start-at; one directory "
                + "per run.",
            valueName: "DIR"))
    var barrier: String?

    @Option(
        name: .customLong("barrier-timeout"),
        help: ArgumentHelp(
            "With --barrier: how long to wait for the other shards after this one is ready, 0.001 to 86400 "
                + "(default 120).", valueName: "SECONDS"))
    var barrierTimeout: Double?

    @Option(
        name: .customLong("barrier-margin"),
        help: ArgumentHelp(
            "With --barrier: the start is this long after the last shard was ready, 0 to 3600 (default 0.5): time "
                + "for every shard to see the last file (raise it on a network filesystem that caches directories).",
            valueName: "SECONDS"))
    var barrierMargin: Double?

    @Option(
        name: .customLong("threshold"),
        help: ArgumentHelp(
            "An absolute objective (exit 2 when broken): latency.p99=50ms (every request, failed and unanswered "
                + "ones at their end), answeredLatency.p99=50ms, dispatchLag.p99.9=10ms, streamWait.…, "
                + "scheduleLag.… (p50, p90, p99, p99.9, p99.99, max; ns, us, ms, s), or a count at most N or N% of "
                + "the requests sent: failures=0, failures.KIND=N, unanswered=N, non200=1%, status.CODE=N, "
                + "reason.NAME=N. Repeatable.",
            valueName: "METRIC.PERCENTILE=DURATION"))
    var thresholds: [String] = []

    @Option(help: "Run folder (default reports/runs/<UTC time>-push-<scenario>[-shard-K-of-N]/).")
    var out: String?

    /// How late a --start-at may already be when the command starts (the skew is recorded) before it is refused.
    static let startAtToleranceSeconds = 1.0

    /// `--start-at`: RFC 3339 (with or without fractional seconds) or UNIX seconds, as UNIX seconds.
    static func parseStartAt(_ text: String) -> Double? {
        if let seconds = Double(text), seconds.isFinite, seconds > 0 { return seconds }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)?.timeIntervalSince1970
    }

    /// The scenario to send, with --devices, --seed, --rate-scale and --duration applied.
    func scenarioToSend() throws -> Scenario {
        var s = try ScenarioSource.load(scenario)
        try ScenarioOverrides.apply(to: &s, devices: devices, seed: seed, rateScale: rateScale)
        if let duration { s.durationSeconds = duration }
        return s
    }

    func run() throws {
        let gates = try thresholdGates()
        let isTrace = Push.isTrace(scenario)
        let s = isTrace ? nil : try scenarioToSend()
        let options = try pushOptions(isTrace: isTrace)
        let slice = options.shard
        // Read (and checked) once every argument is: a large trace takes a while.
        let trace = isTrace ? try traceToSend() : nil
        let suffix = slice.isWhole ? "" : "-shard-\(slice.index)-of-\(slice.count)"
        let name = s?.name ?? Push.traceName(scenario)
        let folder = out ?? "reports/runs/\(Run.timestamp())-push-\(name)\(suffix)"
        let interactive = isatty(STDERR_FILENO) != 0
        let what =
            s.map { "\($0.population.devices) devices, \($0.durationSeconds) s, seed \($0.seed)" }
            ?? trace.map { "trace, \($0.info.pushLines) push lines of \($0.info.lines) lines" } ?? ""
        let banner =
            "fanout push \(name)\(slice.isWhole ? "" : " shard \(slice)") → \(options.shownTargets): \(what), "
            + "\(connections) connection" + (connections == 1 ? "" : "s") + (startAt.map { ", start at \($0)" } ?? "")
            + (barrier.map { ", barrier \($0)" } ?? "") + "\n"
        FileHandle.standardError.write(Data(banner.utf8))
        var results: PushResults
        do {
            let push =
                try trace.map { try PushRun(trace: $0, options: options) }
                ?? PushRun(scenario: s!, options: options, nowSeconds: Int64(Date().timeIntervalSince1970))
            results = try push.run { p in
                let text = String(
                    format: "%4ds  sent %d  answered %d  in flight %d  queued %d  latency p99 %.2f ms  "
                        + "dispatch lag p99 %.2f ms  stream wait p99 %.2f ms",
                    p.seconds, p.sent, p.answered, p.inFlight, p.queued, Double(p.latencyP99Nanos) / 1e6,
                    Double(p.dispatchLagP99Nanos) / 1e6, Double(p.streamWaitP99Nanos) / 1e6)
                FileHandle.standardError.write(Data((interactive ? "\r\u{1B}[K" + text : text + "\n").utf8))
            }
        } catch {
            throw CommandFailure("fanout push: \(error)")
        }
        if interactive { FileHandle.standardError.write(Data("\n".utf8)) }
        results.streams = streams
        try PushReport.write(folder: folder, results, gitRevision: Machine.gitRevision(), thresholds: gates)
        try judge(results, gates: gates, folder: folder, targets: options.shownTargets)
    }

    /// `PushOptions` from the flags (checked by `validate()`): targets, connections and streams, TLS, provider
    /// tokens (the key file read here: an unreadable one is exit 1), shard, start time.
    func pushOptions(isTrace: Bool) throws -> PushOptions {
        let all = try pushTargets()
        guard !isTrace || all.count == 1 else {
            throw ValidationError(
                "TARGET: a trace's pushes go to one target (its tokens are the trace's, no serve shard owns them)")
        }
        var options = PushOptions(target: all[0])
        options.moreTargets = Array(all.dropFirst())
        options.connections = connections
        options.epochSeconds = epoch
        options.maxStreamsPerConnection = streams
        options.caFile = ca
        options.insecure = insecure
        options.maxScheduleLagNanos = UInt64((maxScheduleLag * 1e6).rounded())
        options.drainSeconds = drain
        options.stopOnSignals = true
        options.maxReconnects = reconnects
        try applyConnectionFlags(to: &options)
        if let authKey, let team, let eq = authKey.firstIndex(of: "=") {
            let file = String(authKey[authKey.index(after: eq)...])
            guard let data = FileManager.default.contents(atPath: file) else {
                throw CommandFailure("--auth-key: cannot read \(file)")
            }
            options.authKeyId = String(authKey[..<eq])
            options.authKeyPEM = Array(data)
            options.team = team
        }
        options.shard = try shardOption()
        options.startAtUnixNanos = try startAtNanos()
        if let maxStartSkew { options.maxStartSkewNanos = Int64((maxStartSkew * 1e9).rounded()) }
        options.barrierDirectory = barrier
        if let barrierTimeout { options.barrierTimeoutSeconds = barrierTimeout }
        if let barrierMargin { options.barrierMarginSeconds = barrierMargin }
        return options
    }

    /// The closing line, the identity, and the verdict: interrupted, saturated (thresholds not judged) or each
    /// threshold met or broken (exit codes as PushReport and PushGate say).
    func judge(_ results: PushResults, gates: [PushThreshold], folder: String, targets shownTargets: String) throws {
        let p = results.latency.values(atPercentiles: [50, 99])
        print(
            "fanout push: \(results.sent) sent, \(results.answered) answered "
                + results.byStatus.sorted(by: { $0.key < $1.key }).map { "\($0.key): \($0.value)" }.description
                + ", \(results.failed) failed, \(results.unansweredAtEnd) unanswered at end; latency p50 "
                + String(format: "%.2f ms, p99 %.2f ms", Double(p[0]) / 1e6, Double(p[1]) / 1e6) + "; \(folder)")
        if !results.identityHolds {
            throw CommandFailure("the identity sent = answered + failed + unanswered is broken")
        }
        if results.connectionsLost {
            throw CommandFailure(
                "every connection to \(shownTargets) ended before the schedule did "
                    + "(\(results.reconnects) reconnects)")
        }
        if results.interrupted { throw ExitCode(PushReport.interruptedExitCode) }
        if let timedOut = results.barrier?.timedOut {
            FileHandle.standardError.write(Data(("fanout push: barrier not met: \(timedOut); nothing sent\n").utf8))
            throw ExitCode(PushReport.barrierTimedOutExitCode)
        }
        if let refused = results.startRefused {
            FileHandle.standardError.write(Data(("fanout push: refused to start: \(refused); nothing sent\n").utf8))
            throw ExitCode(PushReport.startRefusedExitCode)
        }
        let gate = PushGate(gates, results)
        if results.saturated {
            let note = gates.isEmpty ? "" : ", thresholds not judged"
            FileHandle.standardError.write(Data(
                ("fanout push: generator saturated\(note): " + PushReport.saturationCause(results)
                    + " (see summary.md)\n").utf8))
            throw ExitCode(PushReport.saturatedExitCode)
        }
        if results.serverLimited {
            let note = gates.isEmpty ? "" : ", thresholds judged on latency from the intended time"
            FileHandle.standardError.write(Data(
                ("fanout push: server-limited\(note): " + PushReport.serverLimitCause(results)
                    + " (see summary.md)\n").utf8))
        }
        for t in gate.results {
            let line =
                "fanout push: threshold \(t.threshold) \(t.met ? "met" : "BROKEN"): \(t.measured), limit \(t.limit)\n"
            FileHandle.standardError.write(Data(line.utf8))
        }
        if !gate.broken.isEmpty { throw ExitCode(PushGate.brokenExitCode) }
    }
}
