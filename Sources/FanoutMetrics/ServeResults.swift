import FanoutCore

/// What a `fanout serve` run did and measured, assembled once its loops have returned (FanoutServe adds up its
/// services' counts and merges their measurements): the value its run folder is rendered from (FanoutReport's
/// `ServeReport`). state.jsonl is not here: it is the live services' dump, streamed by FanoutServe.
public struct ServeResults: Sendable {
    /// The run's setting and what came with it (trigger, registration, the judged events, the shard).
    public var info: Info
    /// Every loop's answers and findings added up.
    public var stats: ServeStats
    /// Every loop's device-side accounting added up.
    public var accounting: Accounting
    /// The sum of the intervals (each sample once), and every interval merged across loops.
    public var latency: LatencyRecorder
    public var intervals: [LoggedInterval]
    public var connections: ConnectionStats
    public var bytes: (read: Int, written: Int)
    public var elapsedSeconds: Double

    public init(
        info: Info, stats: ServeStats, accounting: Accounting, latency: LatencyRecorder, intervals: [LoggedInterval],
        connections: ConnectionStats, bytes: (read: Int, written: Int), elapsedSeconds: Double
    ) {
        self.info = info
        self.stats = stats
        self.accounting = accounting
        self.latency = latency
        self.intervals = intervals
        self.connections = connections
        self.bytes = bytes
        self.elapsedSeconds = elapsedSeconds
    }

    /// What state.jsonl holds (`fanout serve --state`): every activity and device line and the totals (`full`), the
    /// totals line only (`summary`), or no file (`none`).
    public enum StateDetail: String, Sendable, CaseIterable {
        case none, summary, full

        /// The default: the whole dump up to 100,000 devices, the totals above (a million devices' dump is ~2 GB).
        public static func automatic(devices: Int) -> StateDetail { devices <= 100_000 ? .full : .summary }
    }

    public struct Info: Sendable {
        public var scenario: String
        public var seed: UInt64
        public var listen: String
        public var transport: String
        public var auth: String
        public var startedAt: String
        public var gitRevision: String
        public var workers = 1
        /// What state.jsonl holds (`--state`).
        public var state = StateDetail.full
        /// UNIX seconds when serving began, after the population was built (the histogram log's StartTime).
        public var startedAtSeconds = 0.0
        /// `--latency` and `--faults` as given (nil: none).
        public var latency: String?
        public var faults: String?
        /// `--trigger`: what the trigger sent and measured (nil: no trigger).
        public var trigger: TriggerResults?
        /// `--register`: what registration did before serving started (nil: no registration).
        public var registration: RegisterResults?
        /// `--manage-listen`: where channel management was served (nil: on `listen`, with everything else).
        public var manageListen: String?
        /// What `--expect-events` found (nil: not given; the report then is as without events).
        public var events: ServeEventsReport?
        /// `--shard K/N` (nil: the whole population) and the scenario's configuration hash (written with a shard,
        /// for `fanout merge` to check that the shards are of one run).
        public var shard: Shard?
        public var configHash: String?
        /// `--threshold` as given (checked before the run): the run's own objectives besides the defaults.
        public var thresholds: [String] = []
        /// Every flag that changes what the run measures (settle, duration, rate scale, faults, latency, loops,
        /// devices, transport, bounds, trigger and registration settings), as given: `fanout compare` refuses two
        /// runs whose flags differ unless told otherwise.
        public var flags: [String: String] = [:]

        /// FNV-1a of the flags' sorted `name=value` lines, as hex.
        public var flagsHash: String {
            var h = FNV1a.offsetBasis
            for line in flags.sorted(by: { $0.key < $1.key }).map({ "\($0.key)=\($0.value)\n" }) {
                h = FNV1a.hash(line.utf8, from: h)
            }
            return FNV1a.hex(h)
        }
        public init(scenario: String, seed: UInt64, listen: String, transport: String, auth: String,
                    startedAt: String, gitRevision: String) {
            self.scenario = scenario
            self.seed = seed
            self.listen = listen
            self.transport = transport
            self.auth = auth
            self.startedAt = startedAt
            self.gitRevision = gitRevision
        }
    }
}
