import FanoutAPNs
import ArgumentParser
import FanoutCore
import FanoutMetrics
import FanoutReport
import FanoutServe
import FanoutSim
import FanoutWire
import Foundation
import UVLoop

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve an APNs-compatible HTTP/2 endpoint with the scenario's simulated devices behind it.",
        discussion: """
            Point a backend's APNs client at --listen. Every request is answered as APNs answers it \
            (docs/INGEST.md) and every accepted push is applied by the devices it reaches. population.jsonl \
            (the subscribers, to load into the backend) is written to the run folder at start; on SIGINT, \
            SIGTERM or --duration the server sends GOAWAY, lets in-flight streams finish and writes the rest \
            of the folder (summary.json/md, .hgrm, state.jsonl as --state says). The loops build their devices \
            at once; the large files are streamed to disk as they are produced, with a progress line each \
            second when that takes longer than a second. --latency and --faults make it answer as APNs does on \
            a bad day (slow answers, 503/429/500, resets, GOAWAYs, stalls), each draw from --seed \
            (docs/INGEST.md §3). --trigger URL sends the scenario's events to a backend at their intended times \
            (open loop, docs/INGEST.md §5), counted from when serving starts; --register URL first registers \
            every activity (population.jsonl's lines) with it, and serving starts when that has ended. \
            The run judges itself (summary.md's first line, the last line on stderr): with --expect-events no \
            missing pair, with --register every activity registered, with --trigger every event answered 2xx, \
            and each --threshold. Exit status: 1 a broken identity or a failure to serve; 3 not judged (fanout's \
            own trigger fell behind); 2 an objective broken; 0 otherwise; 64 a bad flag; 130 SIGINT or SIGTERM \
            while the population was built (nothing served, nothing written). A signal while registering ends \
            registration and serving at once (the folder written); while the folder is written, it is noted and \
            the folder finished.
            """
    )

    @Argument(help: "A built-in scenario name or a scenario file: the population behind the endpoint.")
    var scenario: String = "default"

    @Option(help: "Address to listen on, HOST:PORT (port 0: any free port, printed at start).")
    var listen = "127.0.0.1:2197"

    @Option(
        name: .customLong("manage-listen"),
        help: ArgumentHelp(
            "Serve channel management (/1/apps/...) on this address of its own, HOST:PORT, as APNs does on its "
                + "api-manage-broadcast hosts; --listen then serves pushes and broadcasts only. A request sent to "
                + "the listener that does not serve its API is answered 404 BadPath (counted).",
            valueName: "HOST:PORT"))
    var manageListen: String?

    @Flag(help: "Cleartext HTTP/2 with prior knowledge (no TLS).")
    var h2c = false

    @Option(name: .customLong("tls-cert"), help: "PEM certificate chain for TLS (with --tls-key).")
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: "PEM private key for TLS.")
    var tlsKey: String?

    @Option(help: "Provider authentication: none (any or no token) or jwt (ES256 tokens, checked as APNs does).")
    var auth = "none"

    @Option(
        name: .customLong("auth-key"),
        help: ArgumentHelp("A signing key's id and its PEM file (public or private P-256); repeatable.",
            valueName: "KEYID=FILE"))
    var authKeys: [String] = []

    @Option(help: "The team id the tokens must name (iss).")
    var team: String?

    @Option(help: "Stop after this many seconds (default: on SIGINT or SIGTERM).")
    var duration: Double?

    @Option(help: "Event loops (threads), each with its own listening socket, connections and slice of the devices; 0 = one per core.")
    var workers: Int = 0

    @Option(help: "Override the scenario's device count.")
    var devices: Int?

    @Option(
        name: .customLong("max-streams"),
        help: ArgumentHelp("Concurrent streams per connection (after authentication), at most "
            + "\(ServeOptions.maxConcurrentStreamsCap)."))
    var maxStreams: UInt32 = 1000

    @Option(
        name: .customLong("max-connections"),
        help: "Connections open at once per event loop; more are closed at accept and counted.")
    var maxConnections: Int = 10_000

    @Option(
        name: .customLong("max-open-streams"),
        help: ArgumentHelp("Open streams at once per event loop, all connections together; more get RST_STREAM "
            + "REFUSED_STREAM."))
    var maxOpenStreams: Int = 10_000

    @Option(
        name: .customLong("max-unsent-bytes"),
        help: ArgumentHelp("Answer-body bytes a connection may hold unsent (a client not reading what it asked "
            + "for); its further requests get RST_STREAM REFUSED_STREAM until they drain. 64 times as much per "
            + "event loop, all connections together."))
    var maxUnsentBytes: Int = 1 << 20

    @Option(
        name: .customLong("request-timeout"),
        help: ArgumentHelp("Seconds a stream has for its headers and body (END_STREAM) before it is reset; "
            + "also how long a client may read nothing while answers wait before it is disconnected."))
    var requestTimeout: Double = 10

    @Option(
        name: .customLong("idle-timeout"),
        help: ArgumentHelp("Seconds without an open stream or a new one before a connection gets GOAWAY IdleTimeout "
            + "(PINGs do not count); above 0, at most 2592000."))
    var idleTimeout: Double = 3600

    @Option(
        name: .customLong("drain-timeout"),
        help: "Seconds in-flight streams get to finish after GOAWAY at shutdown; then every connection is closed.")
    var drainTimeout: Double = 5

    @Option(
        name: .customLong("preface-timeout"),
        help: "Seconds a new connection has to send the HTTP/2 preface before it is closed (above 0, at most 3600).")
    var prefaceTimeout: Double = 10

    @Option(
        name: .customLong("max-api-bundles"),
        help: "Bundles besides the scenario's apps that may get channels through the API (the next: 400).")
    var maxAPIBundles = 100

    @Option(
        name: .customLong("max-listed-channels"),
        help: "Channel ids in one all-channels answer (the first created; up to APNs's 10,000 per app).")
    var maxListedChannels = 1000

    @Option(
        help: ArgumentHelp(
            "Delay every answer on the event loop's timers: fixed (30ms) or lognormal through its median and 99th "
                + "percentile (p50=20ms,p99=250ms), drawn from --seed. Judged and applied at arrival; only the "
                + "answer waits (its stream stays open, within --max-streams and --max-open-streams).",
            valueName: "DIST"))
    var latency: String?

    @Option(
        help: ArgumentHelp(
            "Answer as APNs does on a bad day: shares of requests answered 503 ServiceUnavailable, 429 "
                + "TooManyRequests, 500 InternalServerError (never applied) or reset (RST_STREAM INTERNAL_ERROR); a "
                + "graceful GOAWAY to every connection every T; no answers for D out of every T. E.g. "
                + "503=1%,429=0.5%,500=0.1%,reset=0.1%,goaway-every=30s,stall-every=10s:1s. Drawn from --seed.",
            valueName: "LIST"))
    var faults: String?

    @Option(help: "Override the scenario's seed (the population, and every --faults and --latency draw).")
    var seed: UInt64?

    @Option(
        help: ArgumentHelp(
            "The devices' clock reads this UNIX time when serving starts (default: the wall clock): the "
                + "population starts then and pushes are applied at it plus the time since; state.jsonl is as of "
                + "it at the end. `fanout run` uses 1700000000 (give `fanout push` the same --epoch). Provider "
                + "tokens are still judged by the wall clock. 0 to 4102444800.", valueName: "SECONDS"))
    var epoch: Int64?

    @Option(
        name: .customLong("epoch-from"),
        help: ArgumentHelp(
            "With --epoch: when the devices' clock reads it, serving (when serving starts, the default) or "
                + "first-request (when the first request arrives, on any event loop): a client that starts later, "
                + "as `fanout push --epoch` after building its own population, then has its pushes applied at its "
                + "payloads' times however long its start took.", valueName: "serving|first-request"))
    var epochFrom: String?

    @Option(
        name: .customLong("state-at"),
        help: ArgumentHelp(
            "state.jsonl as the devices hold it at the end, its time rules (stale dates, ends, dismissals) read at "
                + "this time of the devices' clock, UNIX seconds (0 to 4102444800; default: when serving stops). "
                + "With --epoch E, E plus the scenario's seconds makes the dump independent of how long the run "
                + "took to stop.", valueName: "SECONDS"))
    var stateAt: Double?

    @Option(
        name: .customLong("rate-scale"),
        help: "Multiply the scenario's event rates (phases and ramps) by this factor: --trigger's schedule and the events --expect-events expects.")
    var rateScale: Double?

    @Option(
        help: ArgumentHelp(
            "What state.jsonl holds at shutdown: full (every activity and device, ~2 GB for a million devices), "
                + "summary (the totals line only) or none (no file). Default: full up to 100000 devices, summary "
                + "above.", valueName: "full|summary|none"))
    var state: String?

    @Option(
        help: ArgumentHelp(
            "POST each source event of the scenario to URL at its intended time (docs/INGEST.md §5: source, app, "
                + "event, timestamp, content-state, …, intendedAt), from a loop of its own, counted from when "
                + "serving starts; answers, timeouts and response times go to the run folder. Several instances of "
                + "one backend: URL,URL,... (at most 64; --trigger-spread), counted per URL.",
            valueName: "URL[,URL...]"))
    var trigger: String?

    @Option(
        name: .customLong("trigger-spread"),
        help: ArgumentHelp(
            "With --trigger A,B,...: hash (default; FNV-1a of the source id modulo the URLs: a source's events always "
                + "go to one instance, in their order) or round-robin (event k of the schedule to URL k mod N).",
            valueName: "hash|round-robin"))
    var triggerSpread: String?

    @Option(
        help: ArgumentHelp(
            "Before the events start, POST each activity's registration to URL (docs/INGEST.md §5: the lines of "
                + "population.jsonl) at --register-rate, retrying failures with backoff; serving (and t0) starts "
                + "when every activity has ended or --register-deadline passed. Several instances: URL,URL,... (round "
                + "robin by activity, a retry to the next URL), counted per URL.", valueName: "URL[,URL...]"))
    var register: String?

    @Option(
        name: .customLong("app-events"),
        help: ArgumentHelp(
            "Where the app tells the backend of the scenario's app events (faults.appEvents: an activity dismissed, "
                + "Live Activities turned off, the app uninstalled; docs/INGEST.md §5): a POST at each one's instant. "
                + "Required with app events (and --expect-events), refused without. Several instances: URL,URL,... "
                + "(round robin).", valueName: "URL[,URL...]"))
    var appEvents: String?

    @Option(name: .customLong("register-rate"), help: "Registrations started per second (first attempts; open loop; default 1000).")
    var registerRate: Double?

    @Option(
        name: .customLong("register-attempts"),
        help: "Attempts per registration at most (a non-2xx answer, timeout or error is retried after 100 ms, 200 ms, …; default 3).")
    var registerAttempts: Int?

    @Option(name: .customLong("register-deadline"), help: "Seconds registration may take; what is not registered then is counted (default 600).")
    var registerDeadline: Double?

    @Option(
        name: .customLong("trigger-concurrency"),
        help: ArgumentHelp(
            "Requests to the backend (--trigger, --register) in flight at most, to each of its URLs; an event due "
                + "while all of its URL's are busy waits for a free slot (counted). Default 256."))
    var triggerConcurrency: Int?

    @Option(
        name: .customLong("trigger-timeout"),
        help: "Seconds a request to the backend (--trigger, --register) has (connect, send, answer) before it counts as a timeout (default 10).")
    var triggerTimeout: Double?

    @Option(
        name: .customLong("trigger-max-lag"),
        help: ArgumentHelp(
            "With --trigger: the trigger's schedule lag p99 above which the run is not judged (exit 3: fanout sent "
                + "the events late, not the backend); above 0, at most 3600000. Default 100.", valueName: "MS"))
    var triggerMaxLag: Double?

    @Option(
        name: .customLong("trigger-http"),
        help: ArgumentHelp(
            "HTTP version of the requests to the backend (--trigger, --register): 1.1 (keep-alive) or 2 (prior "
                + "knowledge on http://, ALPN on https://); default 1.1.", valueName: "1.1|2"))
    var triggerHTTP: String?

    @Option(
        name: .customLong("trigger-ca"),
        help: "PEM file of the CAs an https:// backend's certificate (--trigger, --register) must chain to.")
    var triggerCA: String?

    @Option(
        help: ArgumentHelp(
            "Hold and apply only slice K (from 0) of N of the devices, as `fanout run --shard K/N` slices them (a "
                + "stable hash of the device id): a token push to another slice's device is answered 400 "
                + "BadDeviceToken and counted as not this shard's; a broadcast reaches this slice's subscribers. "
                + "`fanout push A,B,...` sends each push to its device's shard; `fanout merge` adds the folders.",
            valueName: "K/N"))
    var shard: String?

    @Option(help: "Run folder (default reports/runs/<UTC time>-serve-<scenario>[-shard-K-of-N]/).")
    var out: String?

    @Flag(
        help: ArgumentHelp(
            "Correlate pushes with the scenario's events (docs/INGEST.md §5): a push whose aps.timestamp is an event's "
                + "timestamp for the activity's source is matched to it; endToEnd from the event's intended time (t0 = "
                + "when serving starts, + its offset); missing and stale-at-end judged at shutdown. Writes events.jsonl "
                + "(the events, at start) and events-judged.jsonl; adds `events` to the summary."))
    var expectEvents = false

    @Option(
        help: ArgumentHelp(
            "With --expect-events: an event intended less than this many seconds before shutdown is not judged yet "
                + "(its deliveries are still on their way), unless a later event of its source was delivered.",
            valueName: "S"))
    var settle = 2.0

    @Option(
        name: .customLong("threshold"),
        help: ArgumentHelp(
            "An objective the run is judged by (exit 2 when broken), besides the defaults (missing=0, "
                + "wrongContent=0 and wrongKind=0 with --expect-events, unregistered=0 with --register, "
                + "trigger.failures=0 with --trigger): a count at most N or N% (missing, skipped, superseded, "
                + "staleAtEnd, reordered, duplicate, notApplied, wrongContent, wrongKind, uncorrelated: of the "
                + "expected pairs; unregistered: of the activities; trigger.failures, "
                + "trigger.unsent: of the events sent), a percentile at most a duration (freshness.p99=2s, "
                + "endToEnd.p99=250ms, fanoutCompletion.p99=1s, service.p99=5ms), or NAME=off to drop a default. "
                + "Repeatable.",
            valueName: "NAME=LIMIT"))
    var thresholds: [String] = []

    /// The flags that change what the run measures, as given (summary.json `flags`; `fanout compare` refuses two
    /// runs whose flags differ unless `--allow-config-change`). Not the addresses, files or the run folder.
    func measuredFlags(scenario s: Scenario, workers: Int) -> [String: String] {
        func text(_ v: Double?) -> String { v.map { String($0) } ?? "-" }
        var flags: [String: String] = [
            "scenario": s.name, "configHash": s.configHash, "seed": String(s.seed), "workers": String(workers),
            "transport": h2c ? "h2c" : "tls", "auth": auth, "duration": text(duration), "settle": String(settle),
            "rateScale": text(rateScale), "latency": latency ?? "-", "faults": faults ?? "-",
            "expectEvents": String(expectEvents), "maxStreams": String(maxStreams),
            "maxConnections": String(maxConnections), "maxOpenStreams": String(maxOpenStreams),
            "maxUnsentBytes": String(maxUnsentBytes), "requestTimeout": String(requestTimeout),
            "idleTimeout": String(idleTimeout), "trigger": backendFlag(trigger, spread: triggerSpread ?? "hash"),
            "register": backendFlag(register, spread: "round-robin"), "registerRate": text(registerRate),
            "registerAttempts": registerAttempts.map(String.init) ?? "-", "registerDeadline": text(registerDeadline),
            "triggerConcurrency": triggerConcurrency.map(String.init) ?? "-", "triggerTimeout": text(triggerTimeout),
            "triggerMaxLag": text(triggerMaxLag),
            "triggerHTTP": triggerHTTP ?? "-", "shard": shard ?? "-", "epoch": epoch.map(String.init) ?? "-",
            "epochFrom": epochFrom ?? "-",
        ]
        // Only when given, so that the flags of runs without app events are as before.
        if appEvents != nil { flags["appEvents"] = backendFlag(appEvents, spread: "round-robin") }
        return flags
    }

    /// `--threshold`s parsed, each refused when the run would not measure it.
    func objectives() throws -> [ServeObjective] {
        try thresholds.map { text in
            let o: ServeObjective
            do { o = try ServeObjective(parsing: text) } catch { throw ValidationError("\(error)") }
            let given = ["--expect-events": expectEvents, "--register": register != nil, "--trigger": trigger != nil]
            if let needs = o.needs, given[needs] != true {
                throw ValidationError("--threshold \(text): \(o.name) is measured only with \(needs)")
            }
            return o
        }
    }

    func run() throws {
        let objectives = try objectives()
        var s = try ScenarioSource.load(scenario)
        try ScenarioOverrides.apply(to: &s, devices: devices, seed: seed, rateScale: rateScale)
        try checkScenarioNeeds(s)
        let slice = try shardOption()
        let suffix = slice.isWhole ? "" : "-shard-\(slice.index)-of-\(slice.count)"
        let count = workers == 0 ? max(1, ProcessInfo.processInfo.activeProcessorCount) : workers
        var plan = ServeSession.Plan(
            scenario: s, options: try serveOptions(seed: s.seed), workers: count,
            folder: out ?? "reports/runs/\(Run.timestamp())-serve-\(s.name)\(suffix)", listenText: listen, h2c: h2c,
            authName: auth)
        plan.auth = try loadProviderAuth()
        if let manageListen {
            let (host, port) = try Self.parseListen(manageListen, flag: "--manage-listen")
            plan.manage = (host, port, manageListen)
        }
        plan.shard = slice
        plan.epoch = epoch
        plan.epochFromFirstRequest = epochFrom == "first-request"
        plan.expectEvents = expectEvents
        plan.register = try registerOptions()
        plan.appEvents = try appEventOptions()
        plan.channelLimits.apiBundles = maxAPIBundles
        plan.channelLimits.listedChannels = maxListedChannels
        plan.settleSeconds = settle
        plan.state = state.flatMap(ServeReport.StateDetail.init(rawValue:))
        plan.stateAtMillis = stateAt.map { Int64(($0 * 1000).rounded()) }
        plan.thresholds = objectives.map(\.text)
        plan.flags = measuredFlags(scenario: s, workers: count)
        let outcome: ServeSession.Outcome
        do { outcome = try ServeSession(plan, output: Self.output(), render: ServeReport.files).run() } catch {
            guard error.exitStatus == 1 else {
                FileHandle.standardError.write(Data((error.description + "\n").utf8))
                throw ExitCode(error.exitStatus)
            }
            throw CommandFailure(error.description)
        }
        try finish(
            services: outcome.services, results: outcome.results, info: outcome.info,
            registration: outcome.registration, folder: outcome.folder)
        let verdict = ServeReport.verdict(outcome.info, outcome.run.latency)
        FileHandle.standardError.write(Data("fanout serve: verdict: \(verdict.line)\n".utf8))
        if verdict.exitStatus != 0 { throw ExitCode(verdict.exitStatus) }
    }

    /// `ServeOptions` from the flags: the address, TLS files, bounds, faults and the trigger.
    func serveOptions(seed: UInt64) throws -> ServeOptions {
        let (host, requestedPort) = try Self.parseListen(listen)
        var options = ServeOptions()
        options.host = host
        options.port = requestedPort
        options.certificateFile = tlsCert
        options.keyFile = tlsKey
        options.durationSeconds = duration
        options.maxConcurrentStreams = maxStreams
        options.idleTimeoutSeconds = idleTimeout
        options.prefaceTimeoutSeconds = prefaceTimeout
        options.maxConnectionsPerLoop = maxConnections
        options.maxOpenStreamsPerLoop = maxOpenStreams
        options.maxUnsentBytesPerConnection = maxUnsentBytes
        options.maxUnsentBytesPerLoop = maxUnsentBytes * 64
        options.requestTimeoutSeconds = requestTimeout
        options.drainSeconds = drainTimeout
        options.faults = try faultOptions(seed: seed)
        options.trigger = try triggerOptions()
        return options
    }

    /// stderr: the session's lines, its tickers, and the serving line each second (rewritten in place on a
    /// terminal, one line a second otherwise, cut to a terminal's width only).
    static func output() -> ServeSession.Output {
        let interactive = isatty(STDERR_FILENO) != 0
        let width = ProgressWidth.columns()
        return ServeSession.Output(
            line: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) },
            ticker: { line in
                let ticker = ProgressTicker(line)
                return { ticker.finish() }
            },
            serving: { seconds, snapshot in
                let text = ProgressWidth.fit(ServeProgress.line(seconds, snapshot), width)
                FileHandle.standardError.write(Data((interactive ? "\r\u{1B}[K" + text : text + "\n").utf8))
            },
            servingEnded: { if interactive { FileHandle.standardError.write(Data("\n".utf8)) } })
    }
}
