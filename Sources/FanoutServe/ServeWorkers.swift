import FanoutAPNs
import FanoutMetrics
import FanoutCore
import FanoutSim
import Foundation
import UVLoop

/// Each worker's last progress figures, added up for the one progress line (worker 0 prints it).
public final class ProgressBoard: @unchecked Sendable {
    // @unchecked: `snapshots` is touched only under `lock`.
    public struct Snapshot: Sendable {
        public var connections = 0
        public var requests = 0
        public var ratePerSecond = 0.0
        public var errors = 0
        public var deliveries = 0
        /// The highest of the workers' p99 service times in their last second.
        public var serviceP99Nanos: UInt64 = 0
    }

    private let lock = Lock()
    private var snapshots: [Snapshot]

    public init(count: Int) { snapshots = Array(repeating: Snapshot(), count: count) }

    func post(_ worker: Int, _ s: Snapshot) {
        lock.lock()
        snapshots[worker] = s
        lock.unlock()
    }

    public func total() -> Snapshot {
        lock.lock()
        defer { lock.unlock() }
        var t = Snapshot()
        for s in snapshots {
            t.connections += s.connections
            t.requests += s.requests
            t.ratePerSecond += s.ratePerSecond
            t.errors += s.errors
            t.deliveries += s.deliveries
            t.serviceP99Nanos = max(t.serviceP99Nanos, s.serviceP99Nanos)
        }
        return t
    }
}

/// Runs the serving workers, one thread and one event loop each (shared-nothing: each has its listening
/// socket, its connections, its `APNsService` with its slice of the devices), until they have all shut down.
public enum ServeWorkers {
    public struct Results {
        public var connections = ConnectionStats()
        public var bytes = (read: 0, written: 0)
        public var elapsedSeconds = 0.0
        public var failure: String?
        /// `--trigger`: what the trigger's loop sent and measured.
        public var trigger: TriggerResults?
        /// Rotations while serving (`--register`): the new tokens' registrations, sent from the trigger's loop.
        public var rotationRegistration: RegisterResults?
        /// App events while serving (`--app-events`): the app's requests telling the backend, from the trigger's loop.
        public var appEventRequests: RegisterResults?
        /// Kickoff (`faults.kickoff`): the started activities' registrations, from the trigger's loop.
        public var kickoffRegistration: RegisterResults?
        /// When the first loop began shutting down (`EventLoop.hrtimeNanos`; nil: none did): the events judge's
        /// horizon counts from here, not from the end of the drain (the trigger sent nothing after it).
        public var shutdownBeganNanos: UInt64?
    }

    final class Box<T>: @unchecked Sendable {
        // @unchecked: written by one worker thread before it signals `done`, read after the wait.
        var value: T
        init(_ value: T) { self.value = value }
    }

    public static func run(
        services: [APNsService], options: ServeOptions, cluster: ServeCluster?, sockets: [Int32],
        manageSockets: [Int32]? = nil, board: ProgressBoard,
        progress: @escaping @Sendable (Double) -> Void
    ) -> Results {
        let count = services.count
        let done = DispatchSemaphore(value: 0)
        let outcomes = (0..<count).map { _ in
            Box<(ConnectionStats, (Int, Int), Double, String?)>((ConnectionStats(), (0, 0), 0, nil))
        }
        let handed = services.map { Box($0) }
        let triggerResults = Box<TriggerResults?>(nil)
        let registrationResults = Box<RegisterResults?>(nil)
        let appEventResults = Box<RegisterResults?>(nil)
        let kickoffResults = Box<RegisterResults?>(nil)
        let stopping = (0..<count).map { _ in Box<UInt64?>(nil) }
        // `--trigger` runs on a loop of its own (as registration does), so that serving never delays an event
        // and an event never delays serving; serving's shutdown stops it (a wakeup), and its thread ends with it.
        // The registrations of rotations while serving and the app events go out from the same loop.
        let trigger =
            options.trigger == nil && options.servingRegistration == nil && options.appEvents == nil
                && options.kickoffRegistration == nil
            ? nil
            : TriggerThread(
                options: options.trigger, registration: options.servingRegistration, appEvents: options.appEvents,
                kickoff: options.kickoffRegistration, world: services[0].engine.world, t0Nanos: options.eventsT0Nanos,
                t0UnixMillis: options.eventsT0UnixMillis, results: triggerResults,
                registrationResults: registrationResults, appEventResults: appEventResults,
                kickoffResults: kickoffResults)
        let triggerStop = trigger?.start()
        for k in 0..<count {
            let service = handed[k]
            let outcome = outcomes[k]
            let socket = sockets[k]
            let manageSocket = manageSockets?[k]
            let thread = Thread {
                defer { done.signal() }
                do {
                    let loop = try EventLoop()
                    let server: APNsServer
                    do {
                        server = try APNsServer(
                            loop: loop, service: service.value, options: options, cluster: cluster, index: k,
                            socket: socket, manageSocket: manageSocket)
                        try server.listen()
                        // Serving stops: the trigger sends nothing more.
                        if let triggerStop { server.onShutdown = { triggerStop.send() } }
                    } catch {
                        triggerStop?.send()
                        loop.closeRemainingHandles()
                        try? loop.close()
                        throw error
                    }
                    server.onProgress = { seconds, server in
                        let st = server.service.stats
                        board.post(
                            k,
                            ProgressBoard.Snapshot(
                                connections: server.openConnections, requests: st.requests,
                                ratePerSecond: server.lastRatePerSecond,
                                errors: st.byStatus.filter { $0.key >= 400 }.values.reduce(0, +),
                                deliveries: server.service.pipeline.accounting.deliveries,
                                serviceP99Nanos: server.service.lastServiceP99Nanos))
                        if k == 0 { progress(seconds) }
                    }
                    do {
                        try server.run()
                    } catch {
                        triggerStop?.send()
                        throw error
                    }
                    try loop.close()
                    stopping[k].value = server.stoppingSinceNanos
                    outcome.value = (server.connectionStats, server.bytes, server.elapsedSeconds, nil)
                } catch {
                    outcome.value.3 = "worker \(k): \(error)"
                    service.value.measurements.finish(source: k)
                    if let cluster { cluster.markDrained(k) }
                }
            }
            thread.start()
        }
        for _ in 0..<count { done.wait() }
        triggerStop?.send()  // every loop has ended: if no shutdown told it, now
        trigger?.wait()
        var results = Results()
        if let cluster { results.connections[.answersDropped] += cluster.answersLeftInInboxes() }
        results.trigger = triggerResults.value
        results.rotationRegistration = registrationResults.value
        results.appEventRequests = appEventResults.value
        results.kickoffRegistration = kickoffResults.value
        if let failure = trigger?.failure { results.failure = failure }
        results.shutdownBeganNanos = stopping.compactMap(\.value).min()
        for o in outcomes {
            let (c, b, e, f) = o.value
            results.connections += c
            results.bytes.read += b.0
            results.bytes.written += b.1
            results.elapsedSeconds = max(results.elapsedSeconds, e)
            if let f { results.failure = results.failure.map { $0 + "; " + f } ?? f }
        }
        // `--faults`: the cluster's one retry ledger (every loop's refusals and returns), read once the loops stop.
        if let cluster, options.faults.sharePPM > 0 { results.connections.faults.retries = cluster.retries.final }
        return results
    }
}

/// `--trigger`'s own thread and event loop: a ``TriggerSender`` from when serving starts until serving stops (a
/// ``Wakeup`` from whichever loop stops first), its results handed back when the thread ends. The registrations sent
/// while serving (``ServingRegistration``: rotations while serving) share the loop, with a ``Registrar`` of their own,
/// and so do the app events' requests (`--app-events`), with another.
final class TriggerThread: @unchecked Sendable {
    // @unchecked: `failure` is written by the trigger thread before it signals `done`, read after the wait.
    let options: TriggerOptions?
    let registration: ServingRegistration?
    let appEvents: ServingRegistration?
    let kickoff: (options: RegisterOptions, inbox: KickoffInbox)?
    let world: World
    let t0Nanos: UInt64
    let t0UnixMillis: Int64
    let results: ServeWorkers.Box<TriggerResults?>
    let registrationResults: ServeWorkers.Box<RegisterResults?>
    let appEventResults: ServeWorkers.Box<RegisterResults?>
    let kickoffResults: ServeWorkers.Box<RegisterResults?>
    private let ready = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private var stop: Wakeup.Sender?
    private(set) var failure: String?

    init(
        options: TriggerOptions?, registration: ServingRegistration?, appEvents: ServingRegistration?,
        kickoff: (options: RegisterOptions, inbox: KickoffInbox)?, world: World, t0Nanos: UInt64, t0UnixMillis: Int64,
        results: ServeWorkers.Box<TriggerResults?>, registrationResults: ServeWorkers.Box<RegisterResults?>,
        appEventResults: ServeWorkers.Box<RegisterResults?>, kickoffResults: ServeWorkers.Box<RegisterResults?>
    ) {
        self.options = options
        self.registration = registration
        self.appEvents = appEvents
        self.kickoff = kickoff
        self.kickoffResults = kickoffResults
        self.appEventResults = appEventResults
        self.world = world
        self.t0Nanos = t0Nanos
        self.t0UnixMillis = t0UnixMillis
        self.results = results
        self.registrationResults = registrationResults
    }

    /// Starts the thread and returns once its loop can be stopped (nil: the trigger could not start; `failure`
    /// says why once ``wait()`` returned).
    func start() -> Wakeup.Sender? {
        let thread = Thread { [self] in
            defer { done.signal() }
            do {
                let loop = try EventLoop()
                do {
                    let sender = try options.map {
                        try TriggerSender(
                            loop: loop, world: world, options: $0, t0Nanos: t0Nanos, t0UnixMillis: t0UnixMillis)
                    }
                    let registrar = try registration.map {
                        try Registrar(loop: loop, lines: .timed($0.lines), options: $0.options, signals: nil)
                    }
                    let teller = try appEvents.map {
                        try Registrar(loop: loop, lines: .timed($0.lines), options: $0.options, signals: nil)
                    }
                    let starter = try kickoff.map {
                        try Registrar(loop: loop, lines: .posted($0.inbox), options: $0.options, signals: nil)
                    }
                    let wakeup = try Wakeup(loop: loop) { wakeup in
                        sender?.stop()
                        registrar?.stop()
                        teller?.stop()
                        starter?.stop()
                        wakeup.close()
                    }
                    stop = wakeup.sender
                    ready.signal()
                    sender?.start()
                    registrar?.start()
                    teller?.start()
                    starter?.start()
                    loop.run()
                    results.value = sender?.results
                    registrationResults.value = registrar?.results
                    appEventResults.value = teller?.results
                    kickoffResults.value = starter?.results
                } catch {
                    loop.closeRemainingHandles()
                    try? loop.close()
                    throw error
                }
                try loop.close()
            } catch {
                failure = "trigger: \(error)"
                if stop == nil { ready.signal() }
            }
        }
        thread.name = "fanout-trigger"
        thread.start()
        ready.wait()
        return stop
    }

    /// Waits for the thread to end (after a stop, or when the trigger drained).
    func wait() { done.wait() }
}

