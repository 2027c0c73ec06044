import FanoutCore

/// A load scenario: who the devices are, what they follow, how events arrive, what goes wrong.
/// The file format is JSON; `docs/SCENARIOS.md` documents every field. All random choices derive
/// from `seed`, so a virtual-time run is reproducible bit for bit.
public struct Scenario: Sendable, Equatable {
    public enum Clock: String, Sendable, Equatable { case real, virtual }

    public struct App: Sendable, Equatable {
        public var bundle: String
        /// Name of a schema in `schemas`.
        public var schema: String
        /// Relative weight of the app among sources.
        public var weight: Double
    }

    public struct Population: Sendable, Equatable {
        public var devices: Int
        /// Activities each device requests, uniform in this range.
        public var activitiesPerDeviceMin: Int
        public var activitiesPerDeviceMax: Int
        /// Apps installed on each device, uniform in this range (activities follow only their sources).
        public var appsPerDeviceMin: Int
        public var appsPerDeviceMax: Int
    }

    public struct Sources: Sendable, Equatable {
        /// Matches, deliveries, rides: what activities follow and what events are about.
        public var count: Int
        /// Popularity of source k (rank from 1) is proportional to 1 / k^zipfExponent.
        public var zipfExponent: Double
        /// Share of sources delivered by broadcast channel; the rest push one update per token.
        public var broadcastShare: Double
    }

    public enum ArrivalProcess: String, Sendable, Equatable { case constant, poisson }

    /// From `atSeconds` on, source events arrive at `ratePerSecond`; with `rampToPerSecond` the rate
    /// moves linearly to that value by the next phase (or the end of the run).
    public struct Phase: Sendable, Equatable {
        public var atSeconds: Double
        public var ratePerSecond: Double
        public var rampToPerSecond: Double?
    }

    /// `events` source events for the source of popularity rank `sourceRank`, spread evenly over
    /// `overSeconds` from `atSeconds` (a goal: everybody's phone at once).
    public struct Burst: Sendable, Equatable {
        public var atSeconds: Double
        public var events: Int
        public var sourceRank: Int
        public var overSeconds: Double
    }

    public struct Arrival: Sendable, Equatable {
        public var process: ArrivalProcess
        public var phases: [Phase]
        public var bursts: [Burst]
    }

    public struct Offline: Sendable, Equatable {
        /// Share of devices offline in each window.
        public var share: Double
        /// Length of an offline window; held pushes are delivered when it ends.
        public var windowSeconds: Double
        /// `apns-expiration` of pushes, seconds after they are sent; a held push older than this
        /// when its device returns is `expired`.
        public var expirationSeconds: Double
    }

    public struct Faults: Sendable, Equatable {
        /// Events whose timestamp is older than the last one sent (→ ignoredStaleTimestamp).
        public var outOfOrderShare: Double
        /// Events whose payload is cut short (→ BadRequestPayload).
        public var malformedShare: Double
        /// Events whose payload is padded past the limit (→ PayloadTooLarge).
        public var oversizedShare: Double
        /// Token pushes that race a token rotation (→ Unregistered; later pushes use the new token).
        public var rotationShare: Double
        /// Deliveries after which the person swipes the activity away.
        public var dismissShare: Double
        public var offline: Offline?
        /// Server-side coalescing: a held update is superseded by a newer one (→ coalesced).
        public var coalescing: Bool
        /// Share of broadcast pushes sent to a channel id the backend has just deleted and replaced
        /// (a race with channel rotation): APNs answers `ChannelNotRegistered`.
        public var channelChurnShare: Double = 0
        /// `fanout serve`: the `rotationShare` of update tokens rotates while serving instead of at the start, each
        /// at a time drawn from the seed (`WorkerEngine.servingRotationNanos`); the app registers the new token
        /// with the backend and the old one keeps working for `graceSeconds`, then answers 410 Unregistered. Nil
        /// (the default): at the start, as before.
        public var rotationWhileServing: RotationWhileServing?
        /// `fanout serve`: the app's side of an activity's life while serving (`faults.appEvents`): a share of the
        /// activities dismissed by the person, a share of (device, app) pairs whose Live Activities are turned off or
        /// whose app is uninstalled, each at a time drawn from the seed (`WorkerEngine.appEvent`); the app tells the
        /// backend (`--app-events URL`). Nil (the default): none, as before.
        public var appEvents: AppEvents?
        /// `fanout serve`: a share of the token sources starts its followers' activities by push-to-start while
        /// serving instead of at build (`faults.kickoff`, docs/INGEST.md §5, *Kickoff*). Nil (the default): every
        /// activity exists from the start, as before.
        public var kickoff: Kickoff?
    }

    /// `faults.kickoff`.
    public struct Kickoff: Sendable, Equatable {
        /// Share of the token sources (not the broadcast ones) whose followers' activities start by push-to-start.
        public var share: Double
        /// When the first source's `start` event is intended (seconds after t0); the kickoff sources' starts are
        /// spread evenly over `overSeconds` from there, in source order.
        public var atSeconds: Double
        public var overSeconds: Double
        /// The app's delay from the activity appearing on the Lock Screen to its registration request (lognormal
        /// through both percentiles, drawn per device and slot).
        public var appDelayP50Millis: Double
        public var appDelayP99Millis: Double
        /// Activities a device starts by push-to-start in one run at most; later starts are refused by the device
        /// (Apple documents a budget, not its size: docs/DOMAIN.md §3).
        public var startBudget: Int
        public init(
            share: Double, atSeconds: Double, overSeconds: Double = 0, appDelayP50Millis: Double = 30,
            appDelayP99Millis: Double = 150, startBudget: Int = 10
        ) {
            self.share = share
            self.atSeconds = atSeconds
            self.overSeconds = overSeconds
            self.appDelayP50Millis = appDelayP50Millis
            self.appDelayP99Millis = appDelayP99Millis
            self.startBudget = startBudget
        }
    }

    /// `faults.appEvents`.
    public struct AppEvents: Sendable, Equatable {
        /// Share of activities the person dismisses (ends) while serving.
        public var dismissShare: Double
        /// Share of (device, app) pairs whose Live Activities are turned off: every activity of that app on that
        /// device ends.
        public var disableShare: Double
        /// Share of (device, app) pairs whose app is uninstalled: its activities end and their update tokens answer
        /// 410 Unregistered.
        public var uninstallShare: Double
        /// How long after an app event a push to its activity (or retired token) is still the backend's reaction
        /// time; later ones are counted `sentAfterAppEvent`.
        public var graceSeconds: Double
        public init(dismissShare: Double, disableShare: Double, uninstallShare: Double, graceSeconds: Double) {
            self.dismissShare = dismissShare
            self.disableShare = disableShare
            self.uninstallShare = uninstallShare
            self.graceSeconds = graceSeconds
        }
    }

    /// `faults.rotationWhileServing`.
    public struct RotationWhileServing: Sendable, Equatable {
        /// How long the old token keeps working after its rotation, before it answers 410 Unregistered.
        public var graceSeconds: Double
        public init(graceSeconds: Double) { self.graceSeconds = graceSeconds }
    }

    public struct Lifecycle: Sendable, Equatable {
        /// When each source ends (an `end` push), as a fraction of the run, uniform in this range;
        /// nil: sources do not end (the 8-hour rule may still end activities in long runs).
        public var endFractionMin: Double?
        public var endFractionMax: Double?
        /// `dismissal-date` of the end push, seconds after the end.
        public var dismissalAfterSeconds: Double?
    }

    public var name: String
    public var description: String
    public var seed: UInt64
    public var clock: Clock
    public var durationSeconds: Double
    /// 0: one per core.
    public var workers: Int
    public var population: Population
    public var apps: [App]
    public var schemas: [String: [(String, String)]]
    /// Length of generated string content fields, which sets the payload size.
    public var stringBytes: Int
    public var sources: Sources
    public var arrival: Arrival
    public var faults: Faults
    public var lifecycle: Lifecycle
    public var perAppLimit: Int
    public var perDeviceLimit: Int
    public var budgetPerHour: Int?
    /// Share of pushes sent with priority 10 (the rest priority 5).
    public var priority10Share: Double
    /// Stage service times are read for one push in this many (the clock read would dominate).
    public var stageSampleEvery: Int
    /// Artificial service time per delivery, in nanoseconds: an event with n deliveries takes at least
    /// n × cost (its own work is inside that time) — a busy-spin on the monotonic clock in real time,
    /// added to the virtual clock in virtual time — so a worker applies at most 1e9 / cost deliveries
    /// per second (a scenario of known capacity, for tests and capacity planning). 0: nothing, and the
    /// field is left out of the canonical text (and so of the hash).
    public var costNanosPerDelivery: Int = 0
    /// Real time: a large broadcast yields between batches to events of other sources that fall due
    /// (`WorkerEngine` slices). Off by default (no measured gain yet on a shared 2-core machine); when
    /// off it is left out of the canonical text, so existing hashes do not change.
    public var sliceBroadcasts = false
    /// Virtual time's service times (`CostModel`); always in the canonical text, so the configuration
    /// hash covers what virtual latencies are made of.
    public var costModel = CostModel.defaults

    public static func == (a: Scenario, b: Scenario) -> Bool {
        a.canonicalText == b.canonicalText
    }
}

extension Scenario {
    /// The rate of source events at `t` seconds (piecewise phases with optional ramps).
    public func ratePerSecond(at t: Double) -> Double {
        var rate = 0.0
        for (k, phase) in arrival.phases.enumerated() where phase.atSeconds <= t {
            if let target = phase.rampToPerSecond {
                let end = k + 1 < arrival.phases.count ? arrival.phases[k + 1].atSeconds : durationSeconds
                let span = max(end - phase.atSeconds, 1e-9)
                let f = min(max((t - phase.atSeconds) / span, 0), 1)
                rate = phase.ratePerSecond + (target - phase.ratePerSecond) * f
            } else {
                rate = phase.ratePerSecond
            }
        }
        return rate
    }

    /// Multiplies every arrival rate (phases and ramp targets); bursts are left as they are.
    public mutating func scaleRates(by factor: Double) {
        for k in arrival.phases.indices {
            arrival.phases[k].ratePerSecond *= factor
            arrival.phases[k].rampToPerSecond = arrival.phases[k].rampToPerSecond.map { $0 * factor }
        }
    }

    /// The content-state schemas as FanoutCore needs them.
    public func schemaSet() -> SchemaSet {
        var set = SchemaSet()
        for name in schemas.keys.sorted() {
            let fields = schemas[name]!.map { field in
                let (type, optional) = ContentSchema.parseType(field.1)!
                return ContentSchema.Field(name: field.0, type: type, optional: optional)
            }
            set.add(ContentSchema(name: name, fields: fields))
        }
        return set
    }

    public var rules: DeviceRules {
        DeviceRules(perAppLimit: perAppLimit, perDeviceLimit: perDeviceLimit, budgetPerHour: budgetPerHour)
    }
}
