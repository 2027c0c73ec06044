import FanoutAPNs
import FanoutMetrics
import FanoutSim
import FanoutWire
import Foundation
import UVLoop

/// A whole `fanout serve`, from the sockets to the run folder: binds the listeners (and `--manage-listen`'s), checks
/// the TLS files, builds the population (population.jsonl streamed as it is built), writes events.jsonl
/// (`--expect-events`), registers the activities with the backend (`--register`), serves on its loops until the
/// duration or a signal, judges the events and writes the folder (state.jsonl first, summary.json last). The
/// command only parses flags into a ``Plan`` and prints; what the session has to say on the way goes to an
/// ``Output``. The report's files are rendered by the function it is given (FanoutReport's `ServeReport.files`: a
/// `ServeResults`, assembled here once the loops return, to file name → contents). A failure is a
/// ``ServeSessionError`` naming what is left in the folder; the sockets are closed on every path (``BoundSockets``).
public final class ServeSession {
    /// Everything the flags decided.
    public struct Plan {
        public var scenario: Scenario
        public var options: ServeOptions
        public var workers: Int
        public var folder: String
        /// `--listen` as given (for messages), `--manage-listen`'s host and port.
        public var listenText: String
        public var manage: (host: String, port: Int, text: String)?
        /// Cleartext HTTP/2 (`--h2c`); otherwise TLS with `options.certificateFile`/`keyFile`.
        public var h2c: Bool
        public var auth: ProviderAuth?
        /// `--auth` as given (`none`, `jwt`).
        public var authName: String
        public var shard: Shard
        public var epoch: Int64?
        /// `--epoch-from first-request`: the devices' clock reads `epoch` when the first request arrives, not when
        /// serving starts.
        public var epochFromFirstRequest = false
        public var expectEvents: Bool
        public var register: RegisterOptions?
        /// `--app-events`: where the app tells the backend of its app events (`faults.appEvents`) while serving.
        public var appEvents: RegisterOptions?
        public var channelLimits: APNsService.ChannelLimits
        public var settleSeconds: Double
        /// `--state` (nil: by the number of devices).
        public var state: ServeResults.StateDetail?
        /// `--state-at`: the devices' clock (UNIX milliseconds) state.jsonl's time rules are read at (nil: when
        /// serving stops).
        public var stateAtMillis: Int64?
        /// `--threshold` as given (checked by the caller before the run).
        public var thresholds: [String] = []
        /// The flags that change what the run measures (summary.json `flags`).
        public var flags: [String: String] = [:]

        public init(
            scenario: Scenario, options: ServeOptions, workers: Int, folder: String, listenText: String, h2c: Bool,
            authName: String
        ) {
            self.scenario = scenario
            self.options = options
            self.workers = workers
            self.folder = folder
            self.listenText = listenText
            self.h2c = h2c
            self.authName = authName
            shard = .whole
            expectEvents = false
            channelLimits = APNsService.ChannelLimits()
            settleSeconds = 2
        }
    }

    /// Where the session speaks: a line on stderr, a progress ticker for a long phase (started with its line, the
    /// returned function stops it), the serving loops' line each second.
    public struct Output {
        public var line: (String) -> Void
        public var ticker: (@escaping @Sendable (Double) -> String) -> (() -> Void)
        public var serving: @Sendable (Double, ProgressBoard.Snapshot) -> Void
        /// After the last serving line (a terminal's line is ended).
        public var servingEnded: () -> Void

        public init(
            line: @escaping (String) -> Void,
            ticker: @escaping (@escaping @Sendable (Double) -> String) -> (() -> Void),
            serving: @escaping @Sendable (Double, ProgressBoard.Snapshot) -> Void, servingEnded: @escaping () -> Void
        ) {
            self.line = line
            self.ticker = ticker
            self.serving = serving
            self.servingEnded = servingEnded
        }
    }

    /// What the run left for the closing line and its checks.
    public struct Outcome {
        public var services: [APNsService]
        public var results: ServeWorkers.Results
        public var info: ServeResults.Info
        public var registration: RegisterResults?
        public var folder: String
        /// What the folder was rendered from (its verdict is judged on it).
        public var run: ServeResults
    }

    let plan: Plan
    let output: Output
    /// The run folder's files from the run's results (state.jsonl and population.jsonl apart).
    let render: (ServeResults) throws -> [String: String]
    /// When the session began (the population's activities start then, unless `--epoch`).
    let startedAt = Date()

    public init(_ plan: Plan, output: Output, render: @escaping (ServeResults) throws -> [String: String]) {
        self.plan = plan
        self.output = output
        self.render = render
    }

    /// Serves the plan to its end and writes its folder. SIGINT and SIGTERM are watched from the first step to the
    /// last (``ServeSignals``): during the build one ends the session (``ServeSessionError/interruptedExitStatus``,
    /// nothing written); during registration it ends registration, then serving at once; while serving it begins
    /// the shutdown; while the folder is written it is noted (the folder is finished). After the session a signal
    /// is noted too (the caller only prints).
    public func run() throws(ServeSessionError) -> Outcome {
        let signals: ServeSignals
        do { signals = try ServeSignals() } catch { throw ServeSessionError("fanout serve: \(error)") }
        defer {
            signals.stop()
            PendingSignals.catchUntilWatched()
        }
        var options = plan.options
        options.signals = signals
        let listeners = try bind(&options)
        let built = try buildPopulation(listeners, signals: signals)
        let services = built.services
        let events = try expectedEvents(services, listeners)
        let registration = try announceAndRegister(services, listeners, &options)
        // Serving begins: the histogram log's StartTime, interval times counted from here (after the population
        // was built and written).
        let servingSince = Date()
        let measurements = ServeMeasurements(loops: plan.workers, startNanos: EventLoop.hrtimeNanos)
        // t0 of the scenario's events: when serving starts (after --register's registration). One instant for the
        // trigger's schedule (ServeOptions.eventsT0Nanos) and for --expect-events' endToEnd (ServeEvents.t0Nanos).
        options.eventsT0Nanos = measurements.startNanos
        options.eventsT0UnixMillis = Int64((servingSince.timeIntervalSince1970 * 1000).rounded())
        // --epoch: the devices' clock is the epoch at serving's start, then moves with the wall clock.
        let deviceClockOffsetMillis = plan.epoch.map { $0 * 1000 - options.eventsT0UnixMillis } ?? 0
        // --epoch-from first-request: from the first request on (a client that starts after its own build, as
        // `fanout push --epoch` does, then applies at its payloads' times however long that build took).
        let origin = plan.epochFromFirstRequest ? plan.epoch.map { DeviceClockOrigin(epochMillis: $0 * 1000) } : nil
        for service in services {
            service.deviceClockOffsetMillis = deviceClockOffsetMillis
            service.deviceClockOrigin = origin
        }
        for service in services { service.measure(into: measurements) }
        events?.t0Nanos = options.eventsT0Nanos
        let rotationOrder = servingRotations(services, &options)
        servingAppEvents(services, &options)
        let kickoffInbox = servingKickoff(services, &options)
        let board = ProgressBoard(count: plan.workers)
        let serving = output.serving
        let (sockets, manageSockets) = listeners.take()
        let results = ServeWorkers.run(
            services: services, options: options, cluster: built.cluster, sockets: sockets,
            manageSockets: manageSockets.isEmpty ? nil : manageSockets, board: board
        ) { seconds in serving(seconds, board.total()) }
        output.servingEnded()
        if let failure = results.failure { throw ServeSessionError("fanout serve: \(failure)") }
        // The last phase: a signal from here on is noted and the folder finished.
        output.line("fanout serve: serving ended; writing \(plan.folder)")
        if let line = results.trigger?.failureLine { output.line(line) }
        var info = self.info(listeners, servingSince: servingSince, options: options)
        info.trigger = results.trigger
        info.registration = registration
        let shutdownNanos = results.shutdownBeganNanos ?? EventLoop.hrtimeNanos
        // The rotations due by the end of serving, on every loop (each steps its own lazily, on a push's arrival).
        for service in services {
            service.stepRotations(shutdownNanos)
            service.stepAppEvents(shutdownNanos)
        }
        info.events = ServeEventsReport.judge(
            services: services, nowNanos: shutdownNanos,
            settleNanos: UInt64((plan.settleSeconds * 1e9).rounded()),
            refusals: results.connections.faults.retries.unresent,
            triggerFailures: results.trigger?.eventFailures ?? [], registeredLines: registration?.registeredLines,
            rotationRegistered: results.rotationRegistration.map { r in
                var flags = services.map { [Bool](repeating: false, count: $0.rotations.list.count) }
                for (g, (k, j)) in rotationOrder.enumerated() where g < r.registeredLines.count {
                    flags[k][j] = r.registeredLines[g]
                }
                return flags
            }, rotationRegistration: results.rotationRegistration, appEventRequests: results.appEventRequests,
            kickoffRegistration: results.kickoffRegistration, kickoffUntaken: kickoffInbox?.untaken ?? 0)
        let endMillis =
            plan.stateAtMillis
            ?? Int64(Date().timeIntervalSince1970 * 1000) + (origin?.takenOffset ?? deviceClockOffsetMillis)
        let run = try writeFolder(info, services: services, results: results, endMillis: endMillis)
        return Outcome(
            services: services, results: results, info: info, registration: registration, folder: plan.folder,
            run: run)
    }

    /// Rotations while serving: each loop's from t0 on, and (`--register`) their registrations, every loop's in due
    /// order (each at t0 + its offset) for the trigger's loop to send; returns that order as (loop, rotation).
    func servingRotations(_ services: [APNsService], _ options: inout ServeOptions) -> [(Int, Int)] {
        var order: [(Int, Int)] = []
        for (k, service) in services.enumerated() {
            service.startRotations(t0Nanos: options.eventsT0Nanos, t0UnixMillis: options.eventsT0UnixMillis)
            order += service.rotations.list.indices.map { (k, $0) }
        }
        guard let register = plan.register, !order.isEmpty else { return [] }
        func offset(_ p: (Int, Int)) -> UInt64 { services[p.0].rotations.list[p.1].offsetNanos }
        order.sort { (offset($0), $0.0, $0.1) < (offset($1), $1.0, $1.1) }
        let t0 = options.eventsT0Nanos
        let lines = order.map { (dueNanos: t0 &+ offset($0), line: services[$0.0].rotations.list[$0.1].line) }
        options.servingRegistration = ServingRegistration(options: register, lines: lines)
        return order
    }

    /// The listening sockets (one per loop, the kernel spreads the connections), `--manage-listen`'s, the TLS
    /// files and the folder checked before the population is built and anything is written.
    func bind(_ options: inout ServeOptions) throws(ServeSessionError) -> BoundSockets {
        let listeners = BoundSockets()
        do {
            (listeners.sockets, options.port) = try ReusePortSockets.bind(
                host: options.host, port: options.port, count: plan.workers)
        } catch {
            throw ServeSessionError("cannot serve on \(plan.listenText): \(error)")
        }
        if let manage = plan.manage {
            do {
                let bound = try ReusePortSockets.bind(host: manage.host, port: manage.port, count: plan.workers)
                listeners.manageSockets = bound.0
                options.manageHost = manage.host
                options.managePort = bound.1
                listeners.manageShown = (manage.host.contains(":") ? "[\(manage.host)]" : manage.host) + ":\(bound.1)"
            } catch {
                throw ServeSessionError("cannot serve channel management on \(manage.text): \(error)")
            }
        }
        if !plan.h2c {
            do {
                _ = try TLSContext(certificateFile: options.certificateFile!, keyFile: options.keyFile!)
            } catch {
                throw ServeSessionError("cannot serve on \(plan.listenText): \(error)")
            }
        }
        listeners.createdFolder = !FileManager.default.fileExists(atPath: plan.folder)
        do {
            try FileManager.default.createDirectory(atPath: plan.folder, withIntermediateDirectories: true)
        } catch {
            throw ServeSessionError("cannot create \(plan.folder): \(error)")
        }
        listeners.port = options.port
        return listeners
    }

    /// The population, one thread per loop, and the subscribers for the backend to load (population.jsonl,
    /// streamed as it is produced), before the first request can arrive.
    func buildPopulation(_ listeners: BoundSockets, signals: ServeSignals) throws(ServeSessionError)
        -> ServePopulation.Built
    {
        listeners.buildStart = EventLoop.hrtimeNanos
        let progress = ServePopulation.Progress()
        // A signal stops the build's threads where they count their devices and write their chunks.
        let devicesBuilt = progress.devicesBuilt
        let subscription = signals.subscribe { devicesBuilt.requestStop() }
        defer { signals.unsubscribe(subscription) }
        let totalDevices = plan.scenario.population.devices
        let slice = plan.shard
        let finish = output.ticker { seconds in
            let built = progress.devicesBuilt.value
            // A shard builds about 1/N of the devices, known once built.
            if slice.isWhole ? built < totalDevices : progress.populationBytes.value == 0 {
                return "building population: \(ServeSession.grouped(built)) / "
                    + "\(ServeSession.grouped(totalDevices)) " + (slice.isWhole ? "" : "(shard \(slice)) ")
                    + String(format: "devices (%.1f s)", seconds)
            }
            if progress.joining.value > 0 {
                return "closing population.jsonl, writing rotated-tokens.jsonl " + String(format: "(%.1f s)", seconds)
            }
            let written = progress.populationBytes.value
            return "writing population.jsonl: "
                + (written == 0 ? "counting the lines" : ServeSession.bytes(written))
                + String(format: " (%.1f s)", seconds)
        }
        defer { finish() }
        let built: ServePopulation.Built
        do {
            built = try ServePopulation.build(
                scenario: plan.scenario, auth: plan.auth,
                nowSeconds: plan.epoch ?? Int64(startedAt.timeIntervalSince1970), workers: plan.workers,
                folder: plan.folder, shard: slice, progress: progress, clock: { EventLoop.hrtimeNanos })
        } catch let error as ServePopulation.Interrupted {
            if listeners.createdFolder { rmdir(plan.folder) }  // empty: population.jsonl was not written
            throw ServeSessionError(
                "fanout serve: \(error); nothing written", exitStatus: ServeSessionError.interruptedExitStatus)
        } catch {
            throw ServeSessionError("fanout serve: \(error)")
        }
        for service in built.services { service.channelLimits = plan.channelLimits }
        return built
    }

    /// `--expect-events`: the scenario's events and their followers, each service correlating from now on;
    /// events.jsonl written.
    func expectedEvents(_ services: [APNsService], _ listeners: BoundSockets) throws(ServeSessionError)
        -> ServeEvents?
    {
        guard plan.expectEvents else { return nil }
        let expected = ServeEvents.expect(services: services)
        do {
            let text = expected.jsonl(world: services[0].engine.world)
            try FolderFiles.write(folder: plan.folder, files: ["events.jsonl": text], last: "events.jsonl")
        } catch {
            throw ServeSessionError("fanout serve: cannot write \(plan.folder)/events.jsonl: \(error)")
        }
        return expected
    }

    /// The start line; then `--register`: every activity's registration, on a loop of its own, before serving (and
    /// the events) start.
    func announceAndRegister(
        _ services: [APNsService], _ listeners: BoundSockets, _ options: inout ServeOptions
    ) throws(ServeSessionError) -> RegisterResults? {
        let buildSeconds = Double(EventLoop.hrtimeNanos &- listeners.buildStart) / 1e9
        let activities = services.reduce(0) { $0 + $1.pipeline.store.activityCount }
        let devices = services.reduce(0) { $0 + $1.pipeline.store.deviceCount }
        let count = plan.workers
        output.line(
            "fanout serve: listening on \(shown(listeners)) (\(transport), auth \(plan.authName), \(count) event loop"
                + (count == 1 ? "" : "s") + "); \(activities) activities on \(devices) devices "
                + String(format: "built in %.2f s", buildSeconds) + "; population: \(plan.folder)/population.jsonl"
                + (listeners.manageShown.map { "; channel management on \($0)" } ?? "")
                + options.faults.startLineText
                + (options.trigger.map {
                    "; triggering \($0.url) (the scenario's events from now"
                        + ($0.urls.count > 1 ? ", spread by \($0.spread.rawValue) over \($0.urls.count) URLs)" : ")")
                } ?? ""))
        guard let r = plan.register else { return nil }
        output.line(
            "fanout serve: registering \(activities) activities with \(r.url) at "
                + String(format: "%g", r.ratePerSecond) + "/s"
                + (r.urls.count > 1 ? " (round robin over \(r.urls.count) URLs)" : ""))
        let registration: RegisterResults
        do {
            registration = try Registrar.run(
                populationFile: plan.folder + "/population.jsonl", options: r, signals: options.signals)
        } catch {
            throw ServeSessionError("fanout serve --register: \(error)")
        }
        output.line(registration.line)
        // Interrupted (SIGINT, SIGTERM): no serving, but the run folder as a shutdown writes it.
        if registration.interrupted { options.durationSeconds = 0.001 }
        return registration
    }

    var transport: String { plan.h2c ? "h2c" : "TLS" }

    /// `1,234,567`.
    public static func grouped(_ n: Int) -> String {
        let digits = Array(String(n))
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return out
    }

    /// `850 MB`, `1.72 GB` (decimal units, as `ls -lh --si`).
    public static func bytes(_ n: Int) -> String {
        if n >= 1_000_000_000 { return String(format: "%.2f GB", Double(n) / 1e9) }
        if n >= 1_000_000 { return String(format: "%.0f MB", Double(n) / 1e6) }
        return String(format: "%.0f kB", Double(n) / 1e3)
    }

    func shown(_ listeners: BoundSockets) -> String {
        let host = plan.options.host
        return (host.contains(":") ? "[\(host)]" : host) + ":\(listeners.port)"
    }

    /// What summary.json says of the run's setting.
    func info(_ listeners: BoundSockets, servingSince: Date, options: ServeOptions) -> ServeResults.Info {
        let s = plan.scenario
        var info = ServeResults.Info(
            scenario: s.name, seed: s.seed, listen: shown(listeners), transport: transport, auth: plan.authName,
            startedAt: ISO8601DateFormatter().string(from: servingSince), gitRevision: Machine.gitRevision())
        info.workers = plan.workers
        if !plan.shard.isWhole { (info.shard, info.configHash) = (plan.shard, s.configHash) }
        info.manageListen = listeners.manageShown
        info.latency = options.faults.latencyText
        info.faults = options.faults.faultsText
        info.state = plan.state ?? .automatic(devices: s.population.devices)
        info.startedAtSeconds = servingSince.timeIntervalSince1970
        info.thresholds = plan.thresholds
        info.flags = plan.flags
        return info
    }

    /// state.jsonl first (the largest file, streamed as it is produced), then the rest, summary.json last.
    func writeFolder(
        _ info: ServeResults.Info, services: [APNsService], results: ServeWorkers.Results, endMillis: Int64
    ) throws(ServeSessionError) -> ServeResults {
        let folder = plan.folder
        let stateBytes = ProgressCounter()
        let finish = output.ticker { seconds in
            let written = stateBytes.value
            return "writing state.jsonl: " + (written == 0 ? "sorting the ids" : ServeSession.bytes(written))
                + String(format: " (%.1f s)", seconds)
        }
        do {
            try ServeState.write(
                services: services, nowMillis: endMillis, path: folder + "/state.jsonl", detail: info.state,
                progress: stateBytes)
        } catch {
            finish()
            throw ServeSessionError(
                "fanout serve: \(error); \(folder) holds population.jsonl and rotated-tokens.jsonl only, no summary")
        }
        finish()
        let files: [String: String]
        let run: ServeResults
        do {
            run = try ServeResults(
                info, services: services, connections: results.connections, bytes: results.bytes,
                elapsedSeconds: results.elapsedSeconds)
            files = try render(run)
        } catch {
            throw ServeSessionError(
                "fanout serve: the measurements could not be merged or stored (\(error)); \(folder) holds "
                    + "population.jsonl, rotated-tokens.jsonl and state.jsonl only, no summary")
        }
        do { try FolderFiles.write(folder: folder, files: files) } catch { throw ServeSessionError("\(error)") }
        return run
    }
}

/// Why a serve session ended without its folder (the message says what the folder holds), and the exit status
/// that says so (1, or ``interruptedExitStatus``).
public struct ServeSessionError: Error, CustomStringConvertible {
    public var description: String
    public var exitStatus: Int32
    /// SIGINT or SIGTERM while the population was built: nothing served, nothing written (128 + SIGINT).
    public static let interruptedExitStatus: Int32 = 130
    public init(_ description: String, exitStatus: Int32 = 1) {
        self.description = description
        self.exitStatus = exitStatus
    }
}

/// The listening sockets of a session until the loops take them: closed when the session ends before serving
/// (any failure on the way), so no path leaks one.
final class BoundSockets {
    var sockets: [Int32] = []
    var manageSockets: [Int32] = []
    var manageShown: String?
    var port = 0
    var buildStart: UInt64 = 0
    /// The run folder did not exist before the session (removed again if the session ends with it empty).
    var createdFolder = false

    /// Hands the sockets over (the loops close them).
    func take() -> ([Int32], [Int32]) {
        defer { (sockets, manageSockets) = ([], []) }
        return (sockets, manageSockets)
    }

    deinit {
        for fd in sockets + manageSockets { close(fd) }
    }
}
