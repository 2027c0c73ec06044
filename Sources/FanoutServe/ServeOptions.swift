import FanoutWire

/// How `fanout serve` listens, its bounds, and when it stops (docs/INGEST.md §6 lists the bounds).
public struct ServeOptions: Sendable {
    public var host = "127.0.0.1"
    public var port = 2197
    public var certificateFile: String?
    public var keyFile: String?
    /// Stop after this many seconds (nil: on SIGINT or SIGTERM).
    public var durationSeconds: Double?
    public var maxConcurrentStreams: UInt32 = 1000
    /// The most `--max-streams` may be (each open stream may hold the header-list limit plus the body limit).
    public static let maxConcurrentStreamsCap: UInt32 = 10_000
    /// A connection that sent no HTTP/2 preface within this long is closed.
    public var prefaceTimeoutSeconds = 10.0
    /// A connection with no open stream and no new one for this long gets GOAWAY `IdleTimeout`.
    public var idleTimeoutSeconds = 3600.0
    /// In-flight streams get this long to finish after GOAWAY at shutdown; then every connection is closed.
    public var drainSeconds = 5.0
    /// Connections open at once per event loop; more are closed at accept and counted.
    public var maxConnectionsPerLoop = 10_000
    /// Open streams at once per event loop, every connection together; more are refused (REFUSED_STREAM).
    public var maxOpenStreamsPerLoop = 10_000
    /// A stream whose request (headers and body up to END_STREAM) is not complete this long after its first
    /// HEADERS is reset (CANCEL); a connection whose output stays paused on a client that does not read for
    /// this long is closed.
    public var requestTimeoutSeconds = 10.0
    /// Answer-body bytes a connection may hold unsent (a client that does not read, or reads slowly, while it asks
    /// for large answers such as `all-channels`); its further requests are refused (REFUSED_STREAM) until they
    /// drain.
    public var maxUnsentBytesPerConnection = 1 << 20
    /// The same, every connection of a loop together: beyond it, requests are refused on every connection that
    /// holds unsent answer bytes (a client that reads everything it is sent holds none, and is still served).
    public var maxUnsentBytesPerLoop = 64 << 20
    /// The preface, request and idle deadlines, as the connections' sweep reads them.
    public var deadlines: ConnectionDeadlines {
        ConnectionDeadlines(
            prefaceSeconds: prefaceTimeoutSeconds, requestSeconds: requestTimeoutSeconds,
            idleSeconds: idleTimeoutSeconds)
    }
    /// Faults and latency to inject (`--faults`, `--latency`; none by default).
    public var faults = ServeFaults()
    /// `--trigger`: the scenario's events POSTed to a backend from a loop of their own (nil: none).
    public var trigger: TriggerOptions?
    /// Registrations sent while serving (rotations while serving, with `--register`), from the trigger's loop.
    public var servingRegistration: ServingRegistration?
    /// App events while serving (`faults.appEvents`, `--app-events URL`): each app event's request, from the trigger's
    /// loop at its instant.
    public var appEvents: ServingRegistration?
    /// `faults.kickoff` with `--register`: the registrations of the activities push-to-start starts, posted by the
    /// serving loops to the trigger's loop (`--register`'s backend, its options).
    public var kickoffRegistration: (options: RegisterOptions, inbox: KickoffInbox)?
    /// t0 of the scenario's events: the instant event offset 0 is due (`EventLoop.hrtimeNanos`), the same for
    /// every loop. The trigger sends event k at `eventsT0Nanos + intendedNanos(k)`; a push's end-to-end time is
    /// its apply time − this − the event's offset. `fanout serve` sets it to when serving starts.
    public var eventsT0Nanos: UInt64 = 0
    /// The same instant on the wall clock (UNIX milliseconds): the trigger's `intendedAt` is counted from it.
    public var eventsT0UnixMillis: Int64 = 0
    /// `--manage-listen HOST:PORT`: channel management on a listener of its own (nil: one listener for all).
    public var manageHost = "127.0.0.1"
    public var managePort: Int?
    /// The session's SIGINT and SIGTERM (``ServeSignals``): each loop subscribes a wakeup that begins its shutdown,
    /// at once if a signal came before it started. nil: each loop watches the signals itself.
    public var signals: ServeSignals?
    public init() {}
}

/// Lines registered while serving (`--register`'s backend, its options), each POSTed at its own instant
/// (`EventLoop.hrtimeNanos`, in due order): the rotations while serving, each with its new token.
public struct ServingRegistration: Sendable {
    public var options: RegisterOptions
    public var lines: [(dueNanos: UInt64, line: [UInt8])]
    public init(options: RegisterOptions, lines: [(dueNanos: UInt64, line: [UInt8])]) {
        self.options = options
        self.lines = lines
    }
}
