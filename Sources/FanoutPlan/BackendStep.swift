import FanoutMetrics
import FanoutReport
import FanoutSim
import Foundation

/// `fanout plan --trigger URL`: the user's backend is the system under test. Each step is one `fanout serve`
/// run (a child process, its run folder kept under the plan's `steps/`): the steady scenario × factor, its
/// events sent to the backend at their intended times (`--trigger`), the devices registered first
/// (`--register`), every push correlated and judged (`--expect-events`, `--settle`).
public struct BackendSettings: Sendable {
    /// The `fanout` executable the steps run (`fanout serve`).
    public var executable: String
    public var triggerURL: String
    public var registerURL: String?
    /// Flags given to every `fanout serve` step as they are (listen address, TLS, auth, --latency, --faults…).
    public var serveArguments: [String]
    /// `--settle` of each step: the serve runs this much longer than the events, and events intended in its
    /// last `settle` seconds are not judged.
    public var settleSeconds: Double = 2
    /// The plan folder: step N's files go to `steps/NN-xFACTOR/`.
    public var folder: String
    /// After each step, a serve on the same address takes what the backend still sends (its backlog), until it has
    /// been quiet for `quietSeconds` or this long has passed (0: no drain). The next step's devices have the same
    /// tokens and its events can share timestamps with this step's, so a late push must not reach them.
    public var cooldownSeconds: Double = 60
    public var quietSeconds: Double = 2

    public init(executable: String, triggerURL: String, registerURL: String?, serveArguments: [String], folder: String) {
        self.executable = executable
        self.triggerURL = triggerURL
        self.registerURL = registerURL
        self.serveArguments = serveArguments
        self.folder = folder
    }

    /// The flags a step sets itself, refused among `serveArguments`.
    public static let reservedFlags = [
        "--trigger", "--register", "--expect-events", "--settle", "--duration", "--out", "--seed",
    ]
}

/// What one step of a backend plan measured besides latency: the serve run's counts (summary.json).
public struct BackendMeasures: Sendable, Equatable {
    /// The step's serve run folder.
    public var folder: String
    public var exitStatus: Int32
    /// The serve's last line on stderr when it exited non-zero.
    public var serveError: String?
    public var triggerSent = 0
    public var triggerSucceeded = 0
    public var triggerTimeouts = 0
    public var triggerErrors = 0
    public var triggerCancelled = 0
    public var triggerUnsent = 0
    public var waitedForSlot = 0
    /// Answers other than 2xx, by status.
    public var triggerRefusedByStatus: [String: Int] = [:]
    /// With `--register`: activities, and those registered.
    public var activities: Int?
    public var registered: Int?
    public var expected = 0
    public var delivered = 0
    public var superseded = 0
    public var counts: [CountObjective.Name: Int] = [:]
    public var eventsIdentitiesHold = true
    /// Deliveries applied before their event's intended time: pushes the trigger did not cause (a backlog of an
    /// earlier run reaching the same tokens with the same timestamps).
    public var early = 0
    /// The drain after the step: requests the backend still sent, how long until it was quiet, and whether it was
    /// (false: still sending when the cooldown ended).
    public var drainedRequests = 0
    public var drainSeconds = 0.0
    public var drainQuiet = true

    public init(folder: String, exitStatus: Int32) {
        self.folder = folder
        self.exitStatus = exitStatus
    }

    public subscript(_ name: CountObjective.Name) -> Int { counts[name] ?? 0 }

    /// Trigger requests not answered 2xx (by status, timed out, failed).
    public var triggerNotAccepted: Int { triggerRefusedByStatus.values.reduce(0, +) + triggerTimeouts + triggerErrors }

    /// What failed in the step besides the objectives: the serve, the trigger, the registration.
    public var failures: [String] {
        var out: [String] = []
        // Exit 2 is serve's own verdict (an objective broken): the plan judges the step by its criteria instead.
        if exitStatus != 0 && exitStatus != 2 {
            out.append("fanout serve exited \(exitStatus)" + (serveError.map { ": \($0)" } ?? ""))
        }
        if triggerNotAccepted > 0 {
            var parts = triggerRefusedByStatus.sorted { $0.key < $1.key }.map { "\($0.value) answered \($0.key)" }
            if triggerTimeouts > 0 { parts.append("\(triggerTimeouts) timed out") }
            if triggerErrors > 0 { parts.append("\(triggerErrors) failed") }
            out.append(
                "backend refused events: \(triggerNotAccepted) of \(triggerSent) triggers not accepted ("
                    + parts.joined(separator: ", ") + ")")
        }
        if triggerUnsent + triggerCancelled > 0 {
            out.append(
                "trigger behind at shutdown: \(triggerUnsent) events unsent, \(triggerCancelled) requests cancelled")
        }
        if let activities, let registered, registered < activities {
            out.append("registration: \(activities - registered) of \(activities) activities not registered")
        }
        if !eventsIdentitiesHold { out.append("the events' identities are broken") }
        if early > 0 {
            out.append(
                "\(early) deliveries applied before their event was due: pushes this step did not cause (a backlog "
                    + "from an earlier run?)")
        }
        return out
    }
}

/// A step's serve run ended without a run folder to judge: the plan cannot go on.
public struct BackendStepError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

extension Step {
    /// Runs one step of a backend plan: writes the step's scenario, runs `fanout serve` on it, judges its folder.
    public static func measureBackend(
        _ settings: PlanSettings, backend b: BackendSettings, steady: Scenario, baseEventsPerSecond: Double,
        factor: Double, index: Int
    ) throws -> Step {
        var s = steady
        s.scaleRates(by: factor)
        s.durationSeconds = settings.stepDuration(eventsPerSecond: baseEventsPerSecond * factor)
        let dir = b.folder + "/steps/" + String(format: "%02d", index) + "-x" + PlanText.factor(factor)
        let fm = FileManager.default
        do {
            try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try s.canonicalText.write(toFile: dir + "/scenario.json", atomically: true, encoding: .utf8)
        } catch {
            throw BackendStepError(description: "cannot write \(dir)/scenario.json: \(error)")
        }
        var arguments = ["serve", dir + "/scenario.json", "--trigger", b.triggerURL]
        if let r = b.registerURL { arguments += ["--register", r] }
        arguments += [
            "--expect-events", "--settle", String(b.settleSeconds),
            "--duration", String(s.durationSeconds + b.settleSeconds), "--out", dir + "/run",
        ]
        arguments += b.serveArguments
        let load = CapacityPlan.loadAverage()
        let started = ContinuousClock.now
        let status = try run(b.executable, arguments, stdout: dir + "/serve.out", stderr: dir + "/serve.log")
        let wall = (ContinuousClock.now - started).seconds
        let summaryPath = dir + "/run/summary.json"
        guard fm.fileExists(atPath: summaryPath) else {
            throw BackendStepError(
                description: "step \(index) (×\(PlanText.factor(factor))): fanout serve exited \(status) without "
                    + "a run folder: " + (lastLine(dir + "/serve.log") ?? "no message") + " (\(dir)/serve.log)")
        }
        var step = try judgeFolder(
            dir + "/run", status: status, serveLog: dir + "/serve.log", scenario: s, factor: factor,
            warmupSeconds: settings.warmupSeconds, criteria: settings.criteria)
        step.wallSeconds = wall
        step.loadAverage = load
        if b.cooldownSeconds > 0 {
            let drained = try drain(b, scenario: dir + "/scenario.json", dir: dir)
            step.backend?.drainedRequests = drained.requests
            step.backend?.drainSeconds = drained.seconds
            step.backend?.drainQuiet = drained.quiet
            if drained.requests > 0 {
                step.notes.append(
                    "after the step the backend sent \(drained.requests) more requests in "
                        + PlanText.trimmed(drained.seconds, digits: 1) + " s (its backlog; answered, not judged)"
                        + (drained.quiet ? "" : ", still sending when the cooldown ended: the next step may see them"))
            }
        }
        return step
    }

    /// Serves the step's scenario again on the same address (no trigger, no judge, no state) while the backend
    /// still sends: stopped (SIGTERM) once no request arrived for `quietSeconds`, or after `cooldownSeconds`.
    /// Reads serve's progress lines (one a second: total requests) from its stderr file.
    static func drain(_ b: BackendSettings, scenario: String, dir: String) throws -> (
        requests: Int, seconds: Double, quiet: Bool
    ) {
        let log = dir + "/drain.log"
        let fm = FileManager.default
        _ = fm.createFile(atPath: log, contents: nil)
        guard let err = FileHandle(forWritingAtPath: log) else { throw BackendStepError(description: "cannot write \(log)") }
        defer { try? err.close() }
        let p = try start(
            b.executable,
            ["serve", scenario] + drainArguments(b.serveArguments) + ["--state", "none", "--out", dir + "/drain"],
            stdout: FileHandle.nullDevice, stderr: err, naming: "\(b.executable) serve to drain the backend")
        let start = ContinuousClock.now
        var listening: ContinuousClock.Instant?
        var total = 0
        var lastChange = start
        var quiet = false
        // Read as it grows (what came since the last look), not whole each time: `String(contentsOfFile:)` of a
        // file another process is appending to leaked its read buffers (LeakSanitizer, FoundationEssentials'
        // readBytesFromFile).
        let reader = FileHandle(forReadingAtPath: log)
        defer { try? reader?.close() }
        var bytes: [UInt8] = []
        while p.isRunning {
            Thread.sleep(forTimeInterval: 0.2)
            let now = ContinuousClock.now
            if let data = try? reader?.readToEnd() { bytes += data }
            let text = String(decoding: bytes, as: UTF8.self)
            if listening == nil, text.contains("listening on") {
                listening = now
                lastChange = now
            }
            if let n = lastRequestTotal(text), n != total {
                total = n
                lastChange = now
            }
            if listening != nil, (now - lastChange).seconds >= b.quietSeconds {
                quiet = true
                break
            }
            if (now - start).seconds >= b.cooldownSeconds { break }
        }
        let seconds = (ContinuousClock.now - (listening ?? start)).seconds
        if p.isRunning { p.terminate() }
        p.waitUntilExit()
        guard listening != nil else {
            throw BackendStepError(
                description: "the drain after the step did not start serving: "
                    + (lastLine(log) ?? "no message") + " (\(log))")
        }
        return (total, max(seconds - (quiet ? b.quietSeconds : 0), 0), quiet)
    }

    /// The step's serve flags without those of the trigger and the registration (the drain has neither) and
    /// without `--latency` and `--faults` (what is still coming is answered at once, not refused again).
    static func drainArguments(_ arguments: [String]) -> [String] {
        let dropped: Set<String> = [
            "--register-rate", "--register-attempts", "--register-deadline", "--trigger-concurrency",
            "--trigger-timeout", "--trigger-http", "--trigger-ca", "--trigger-spread", "--trigger-max-lag", "--latency",
            "--faults", "--rate-scale",
        ]
        var out: [String] = []
        var k = 0
        while k < arguments.count {
            let flag = arguments[k]
            let name = flag.split(separator: "=", maxSplits: 1).first.map(String.init) ?? flag
            if dropped.contains(name) {
                k += flag.contains("=") ? 1 : 2
                continue
            }
            out.append(flag)
            k += 1
        }
        return out
    }

    /// The request total of serve's last progress line (`  12.0s  2 conns  4500 req  …`).
    static func lastRequestTotal(_ text: String) -> Int? {
        for line in text.split(separator: "\n").reversed() {
            let words = line.split(separator: " ")
            if let k = words.firstIndex(of: "req"), k > 0, let n = Int(words[k - 1]) { return n }
        }
        return nil
    }

    /// Judges a finished serve run folder (`--trigger`, `--expect-events`) as a plan step, read through
    /// `ServeFolder` (a missing or mistyped field is an error naming it, never a zero).
    public static func judgeFolder(
        _ folder: String, status: Int32, serveLog: String?, scenario s: Scenario, factor: Double,
        warmupSeconds: Double, criteria: PlanCriteria
    ) throws -> Step {
        let read: ServeFolder
        let judged: [ServeFolder.JudgedEvent]
        do {
            read = try ServeFolder.read(folder)
            judged = try read.judgedEvents()
        } catch {
            throw BackendStepError(description: "\(error)")
        }
        let file = read.summary
        guard let events = file.events else {
            throw BackendStepError(description: "\(folder)/summary.json has no events (was --expect-events on?)")
        }
        guard let t = file.trigger else {
            throw BackendStepError(description: "\(folder)/summary.json has no trigger (was --trigger on?)")
        }
        var m = BackendMeasures(folder: folder, exitStatus: status)
        if status != 0 { m.serveError = serveLog.flatMap(lastLine) }
        m.triggerSent = t.sent
        m.triggerSucceeded = t.successes
        m.triggerTimeouts = t.timeouts
        m.triggerErrors = t.errors.values.reduce(0, +)
        m.triggerCancelled = t.cancelledAtShutdown
        m.triggerUnsent = t.unsentAtShutdown
        m.waitedForSlot = t.waitedForSlot
        for (code, n) in t.byStatus where n > 0 && !(200..<300).contains(code) {
            m.triggerRefusedByStatus[String(code)] = n
        }
        if let g = file.registration {
            m.activities = g.activities
            m.registered = g.registered
        }
        m.expected = events.expected
        m.delivered = events.delivered
        m.superseded = events.superseded
        for name in CountObjective.Name.allCases {
            guard let n = events[name.rawValue] else {
                throw BackendStepError(description: "\(folder)/summary.json: events.\(name.rawValue) not read")
            }
            m.counts[name] = n
        }
        m.eventsIdentitiesHold = events.identityHolds
        m.early = events.early

        // Latency over the measured part: the histogram log's one-second intervals from the warm-up on.
        let window = read.window(from: warmupSeconds)
        func summaryOf(_ metric: Metric) -> LatencySummary {
            if let serve = ServeMetric.allCases.first(where: { $0.name == metric.name }) {
                return LatencySummary(window[serve: serve])
            }
            // fanoutCompletion (by size) is not in the log: over the whole step, from summary.json.
            return events.fanoutCompletion[metric.name] ?? LatencySummary(LatencyHistogram())
        }

        // Per event: intended (t0 + offset), last delivery, recipients: the step's completion and Little's law.
        var intended: [UInt64] = []
        var completed: [UInt64] = []
        var recipients: [Int32] = []
        for e in judged {
            intended.append(e.offsetNanos)
            completed.append(max(e.lastAppliedNanos, e.offsetNanos))
            recipients.append(Int32(clamping: e.delivered))
        }
        let scheduled = s.durationSeconds
        let windowStart = UInt64(warmupSeconds * 1e9)
        let little = LittleCheck.compute(
            intended: intended, completed: completed, recipients: recipients, windowStartNanos: windowStart,
            windowEndNanos: max(UInt64(scheduled * 1e9), windowStart + 1))
        var lastCompletion: UInt64 = 0
        for (k, done) in completed.enumerated() where recipients[k] > 0 { lastCompletion = Swift.max(lastCompletion, done) }
        let endToEnd = summaryOf(.endToEnd)
        var step = Step(
            workers: file.workers, factor: factor, scheduledSeconds: scheduled, warmupSeconds: warmupSeconds,
            wallSeconds: 0, lastCompletionSeconds: Double(lastCompletion) / 1e9,
            events: m.triggerSent + m.triggerUnsent, measuredEvents: little.events, deliveries: m.delivered,
            sloValues: criteria.slos.map { $0.value(summaryOf($0.metric)) },
            sloSamples: criteria.slos.map { summaryOf($0.metric).count }, endToEnd: endToEnd,
            scheduleLag: t.scheduleLag,
            lossShare: m.expected > 0 ? Double(m[.missing]) / Double(m.expected) : 0,
            identitiesHold: m.eventsIdentitiesHold && (status == 0 || status == 2), little: little, failures: [],
            notes: [])
        step.backend = m
        step.judge(criteria)
        return step
    }

    /// Runs `executable arguments`, its output to two files; its exit status (128 + N for signal N).
    static func run(_ executable: String, _ arguments: [String], stdout: String, stderr: String) throws -> Int32 {
        let fm = FileManager.default
        _ = fm.createFile(atPath: stdout, contents: nil)
        _ = fm.createFile(atPath: stderr, contents: nil)
        guard let out = FileHandle(forWritingAtPath: stdout), let err = FileHandle(forWritingAtPath: stderr) else {
            throw BackendStepError(description: "cannot write \(stdout) and \(stderr)")
        }
        defer {
            try? out.close()
            try? err.close()
        }
        let p = try start(executable, arguments, stdout: out, stderr: err, naming: executable)
        p.waitUntilExit()
        return p.terminationReason == .uncaughtSignal ? 128 + p.terminationStatus : p.terminationStatus
    }

    /// Starts `executable arguments` with no input, its output to `stdout` and `stderr`; one that cannot start is
    /// the error, naming it as `naming` says.
    static func start(
        _ executable: String, _ arguments: [String], stdout: FileHandle, stderr: FileHandle, naming: String
    ) throws(BackendStepError) -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        p.standardOutput = stdout
        p.standardError = stderr
        p.standardInput = FileHandle.nullDevice
        do {
            try p.run()
        } catch {
            throw BackendStepError(description: "cannot start \(naming): \(error)")
        }
        return p
    }

    static func lastLine(_ path: String) -> String? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return text.split(separator: "\n").last { !$0.trimmingCharacters(in: .whitespaces).isEmpty }.map(String.init)
    }
}
