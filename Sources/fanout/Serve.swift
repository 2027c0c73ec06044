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
            every activity (population.jsonl's lines) with it, and serving starts when that has ended.
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
            + "(PINGs do not count)."))
    var idleTimeout: Double = 3600

    @Option(
        name: .customLong("drain-timeout"),
        help: "Seconds in-flight streams get to finish after GOAWAY at shutdown; then every connection is closed.")
    var drainTimeout: Double = 5

    @Option(
        name: .customLong("preface-timeout"),
        help: "Seconds a new connection has to send the HTTP/2 preface before it is closed.")
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
                + "tokens are still judged by the wall clock.", valueName: "SECONDS"))
    var epoch: Int64?

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
                + "event, timestamp, content-state, …, intendedAt), from the first event loop, counted from when "
                + "serving starts; answers, timeouts and response times go to the run folder.", valueName: "URL"))
    var trigger: String?

    @Option(
        help: ArgumentHelp(
            "Before the events start, POST each activity's registration to URL (docs/INGEST.md §5: the lines of "
                + "population.jsonl) at --register-rate, retrying failures with backoff; serving (and t0) starts "
                + "when every activity has ended or --register-deadline passed.", valueName: "URL"))
    var register: String?

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
            "Requests to the backend (--trigger, --register) in flight at most; an event due while all are busy "
                + "waits for a free slot (counted). Default 256."))
    var triggerConcurrency: Int?

    @Option(
        name: .customLong("trigger-timeout"),
        help: "Seconds a request to the backend (--trigger, --register) has (connect, send, answer) before it counts as a timeout (default 10).")
    var triggerTimeout: Double?

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

    func run() throws {
        var s = try ScenarioSource.load(scenario)
        if let devices { s.population.devices = devices }
        if let seed { s.seed = seed }
        if let rateScale {
            guard rateScale > 0 && rateScale <= 1000 else {
                throw ValidationError("--rate-scale: expected a factor above 0 and at most 1000, got \(rateScale)")
            }
            s.scaleRates(by: rateScale)
        }
        let slice = try shardOption()
        let providerAuth = try loadProviderAuth()
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
        options.faults = try faultOptions(seed: s.seed)
        options.trigger = try triggerOptions()

        let startedAt = Date()
        let suffix = slice.isWhole ? "" : "-shard-\(slice.index)-of-\(slice.count)"
        let folder = out ?? "reports/runs/\(Run.timestamp())-serve-\(s.name)\(suffix)"
        let count = workers == 0 ? max(1, ProcessInfo.processInfo.activeProcessorCount) : workers
        // The address and the TLS files are checked before the population is built and anything is written.
        let sockets: [Int32]
        let port: Int
        do {
            (sockets, port) = try ReusePortSockets.bind(host: host, port: options.port, count: count)
        } catch {
            throw CommandFailure("cannot serve on \(listen): \(error)")
        }
        options.port = port
        // --manage-listen: one socket per loop as well (the kernel spreads the connections).
        var manageSockets: [Int32] = []
        var manageShown: String?
        if let manageListen {
            let (manageHost, managePort) = try Self.parseListen(manageListen, flag: "--manage-listen")
            do {
                let bound = try ReusePortSockets.bind(host: manageHost, port: managePort, count: count)
                manageSockets = bound.0
                options.manageHost = manageHost
                options.managePort = bound.1
                manageShown = (manageHost.contains(":") ? "[\(manageHost)]" : manageHost) + ":\(bound.1)"
            } catch {
                for fd in sockets { close(fd) }
                throw CommandFailure("cannot serve channel management on \(manageListen): \(error)")
            }
        }
        var tlsFailure: Error?
        if !h2c {
            do { _ = try TLSContext(certificateFile: tlsCert!, keyFile: tlsKey!) } catch { tlsFailure = error }
        }
        if let tlsFailure {
            for fd in sockets + manageSockets { close(fd) }
            throw CommandFailure("cannot serve on \(listen): \(tlsFailure)")
        }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            for fd in sockets + manageSockets { close(fd) }
            throw CommandFailure("cannot create \(folder): \(error)")
        }
        // The population, one thread per loop, and the subscribers for the backend to load (population.jsonl,
        // streamed as it is produced), before the first request can arrive.
        let buildStart = EventLoop.hrtimeNanos
        let progress = ServePopulation.Progress()
        let totalDevices = s.population.devices
        let ticker = ProgressTicker { seconds in
            let built = progress.devicesBuilt.value
            // A shard builds about 1/N of the devices, known once built.
            if slice.isWhole ? built < totalDevices : progress.populationBytes.value == 0 {
                return "building population: \(ProgressTicker.grouped(built)) / "
                    + "\(ProgressTicker.grouped(totalDevices)) " + (slice.isWhole ? "" : "(shard \(slice)) ")
                    + String(format: "devices (%.1f s)", seconds)
            }
            if progress.joining.value > 0 {
                return "closing population.jsonl, writing rotated-tokens.jsonl " + String(format: "(%.1f s)", seconds)
            }
            let written = progress.populationBytes.value
            return "writing population.jsonl: "
                + (written == 0 ? "counting the lines" : ProgressTicker.bytes(written))
                + String(format: " (%.1f s)", seconds)
        }
        let built: ServePopulation.Built
        do {
            built = try ServePopulation.build(
                scenario: s, auth: providerAuth, nowSeconds: epoch ?? Int64(startedAt.timeIntervalSince1970),
                workers: count,
                folder: folder, shard: slice, progress: progress, clock: { EventLoop.hrtimeNanos })
        } catch {
            ticker.finish()
            for fd in sockets + manageSockets { close(fd) }
            throw CommandFailure("fanout serve: \(error)")
        }
        ticker.finish()
        let services = built.services
        for service in services {
            service.channelLimits.apiBundles = maxAPIBundles
            service.channelLimits.listedChannels = maxListedChannels
        }
        let cluster = built.cluster
        // --expect-events: the scenario's events and their followers, each service correlating from now on.
        var events: ServeEvents?
        if expectEvents {
            let expected = ServeEvents.expect(services: services)
            do {
                try RunFiles.write(folder: folder, files: ["events.jsonl": expected.jsonl(apps: s.apps.map(\.bundle))], last: "events.jsonl")
            } catch {
                for fd in sockets + manageSockets { close(fd) }
                throw CommandFailure("fanout serve: cannot write \(folder)/events.jsonl: \(error)")
            }
            events = expected
        }
        let buildSeconds = Double(EventLoop.hrtimeNanos &- buildStart) / 1e9
        let transport = h2c ? "h2c" : "TLS"
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let activities = services.reduce(0) { $0 + $1.pipeline.store.activityCount }
        let devices = services.reduce(0) { $0 + $1.pipeline.store.deviceCount }
        // From the start line on, SIGINT and SIGTERM end the run with its folder, even before the loops watch them.
        PendingSignals.catchUntilWatched()
        FileHandle.standardError.write(Data((
            "fanout serve: listening on \(shownHost):\(port) (\(transport), auth \(auth), \(count) event loop"
            + (count == 1 ? "" : "s") + "); \(activities) activities on \(devices) devices "
            + String(format: "built in %.2f s", buildSeconds) + "; population: \(folder)/population.jsonl"
            + (manageShown.map { "; channel management on \($0)" } ?? "")
            + faultsLine(options.faults)
            + (options.trigger.map { "; triggering \($0.url) (the scenario's events from now)" } ?? "") + "\n").utf8))
        // --register: every activity's registration, on a loop of its own, before serving (and the events) start.
        var registration: RegisterResults?
        if let r = try registerOptions() {
            FileHandle.standardError.write(Data((
                "fanout serve: registering \(activities) activities with \(r.url) at "
                + String(format: "%g", r.ratePerSecond) + "/s\n").utf8))
            do {
                registration = try Registrar.run(populationFile: folder + "/population.jsonl", options: r)
                PendingSignals.catchUntilWatched()  // registration's watchers are gone, the loops' not there yet
            } catch {
                for fd in sockets { close(fd) }
                throw CommandFailure("fanout serve --register: \(error)")
            }
            if let g = registration {
                FileHandle.standardError.write(Data((g.line + "\n").utf8))
                // Interrupted (SIGINT, SIGTERM): no serving, but the run folder as a shutdown writes it.
                if g.interrupted { options.durationSeconds = 0.001 }
            }
        }
        // Serving begins: the histogram log's StartTime, interval times counted from here (after the population
        // was built and written).
        let servingSince = Date()
        let measurements = ServeMeasurements(loops: count, startNanos: EventLoop.hrtimeNanos)
        // t0 of the scenario's events: when serving starts (after --register's registration). One instant for the
        // trigger's schedule (ServeOptions.eventsT0Nanos) and for --expect-events' endToEnd (ServeEvents.t0Nanos).
        options.eventsT0Nanos = measurements.startNanos
        options.eventsT0UnixMillis = Int64((servingSince.timeIntervalSince1970 * 1000).rounded())
        // --epoch: the devices' clock is the epoch at serving's start, then moves with the wall clock.
        let deviceClockOffsetMillis = epoch.map { $0 * 1000 - options.eventsT0UnixMillis } ?? 0
        for service in services { service.deviceClockOffsetMillis = deviceClockOffsetMillis }
        for service in services { service.measure(into: measurements) }
        events?.t0Nanos = options.eventsT0Nanos
        let interactive = isatty(STDERR_FILENO) != 0
        let width = ProgressWidth.columns()
        let board = ProgressBoard(count: count)
        let results = ServeWorkers.run(
            services: services, options: options, cluster: cluster, sockets: sockets,
            manageSockets: manageSockets.isEmpty ? nil : manageSockets, board: board
        ) { seconds in
            let text = ProgressWidth.fit(ServeProgress.line(seconds, board.total()), width)
            FileHandle.standardError.write(Data((interactive ? "\r\u{1B}[K" + text : text + "\n").utf8))
        }
        // The loops' watchers are gone (libuv restored the default): a second signal must not cut the folder short.
        PendingSignals.catchUntilWatched()
        if interactive { FileHandle.standardError.write(Data("\n".utf8)) }
        if let failure = results.failure { throw CommandFailure("fanout serve: \(failure)") }
        if let line = results.trigger?.failureLine { FileHandle.standardError.write(Data((line + "\n").utf8)) }
        var info = ServeReport.Info(
            scenario: s.name, seed: s.seed, listen: "\(shownHost):\(port)", transport: transport, auth: auth,
            startedAt: ISO8601DateFormatter().string(from: servingSince), gitRevision: Machine.gitRevision())
        info.workers = count
        if !slice.isWhole { (info.shard, info.configHash) = (slice, s.configHash) }
        info.manageListen = manageShown
        info.latency = options.faults.latencyText
        info.faults = options.faults.faultsText
        info.state = state.flatMap(ServeReport.StateDetail.init(rawValue:))
            ?? .automatic(devices: s.population.devices)
        info.startedAtSeconds = servingSince.timeIntervalSince1970
        info.trigger = results.trigger
        info.registration = registration
        info.events = ServeEventsReport.judge(
            services: services, nowNanos: EventLoop.hrtimeNanos, settleNanos: UInt64((settle * 1e9).rounded()),
            refusals: results.connections.faults.retries.unresent)
        let endMillis = Int64(Date().timeIntervalSince1970 * 1000) + deviceClockOffsetMillis
        // state.jsonl first (the largest file, streamed as it is produced), then the rest, summary.json last.
        let stateBytes = ProgressCounter()
        let stateTicker = ProgressTicker { seconds in
            let written = stateBytes.value
            return "writing state.jsonl: " + (written == 0 ? "sorting the ids" : ProgressTicker.bytes(written))
                + String(format: " (%.1f s)", seconds)
        }
        do {
            try ServeReport.writeState(
                services: services, nowMillis: endMillis, path: folder + "/state.jsonl", detail: info.state,
                progress: stateBytes)
        } catch {
            stateTicker.finish()
            throw CommandFailure(
                "fanout serve: \(error); \(folder) holds population.jsonl and rotated-tokens.jsonl only, no summary")
        }
        stateTicker.finish()
        let files: [String: String]
        do {
            files = try ServeReport.files(
                info, services: services, connections: results.connections, bytes: results.bytes,
                elapsedSeconds: results.elapsedSeconds, nowMillis: endMillis)
        } catch {
            throw CommandFailure(
                "fanout serve: the measurements could not be merged or stored (\(error)); \(folder) holds "
                    + "population.jsonl, rotated-tokens.jsonl and state.jsonl only, no summary")
        }
        try RunFiles.write(folder: folder, files: files)
        try finish(services: services, results: results, info: info, registration: registration, folder: folder)
    }
}
