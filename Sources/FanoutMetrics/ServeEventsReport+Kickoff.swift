extension ServeEventsReport {
    /// Kickoff by push-to-start (`faults.kickoff`, docs/INGEST.md §5, *Kickoff*), every loop together: the activities
    /// due to start (their source's start intended by the judge's horizon), how many started and why the others did
    /// not, their registrations by the app, and the kickoff latency from the start event's intended time to the
    /// activity on the Lock Screen, to its registration answered 2xx and to its first update delivered.
    /// Identities: due = started + notStarted = started + Σ notStartedByReason; started = registration's done +
    /// failed + pendingAtShutdown.
    public struct Kickoff: Sendable, Equatable {
        public static let neverPushed = "start never pushed (no push-to-start reached the device)"
        public static let budgetSpent = "refused by the device (its push-to-start budget spent)"
        public static let tokenNotRegistered = "push-to-start token not registered (--register)"
        public static func trigger(_ reason: String) -> String { "start event: \(reason)" }

        /// Kickoff sources, and activities waiting for their start (one per device and source) in all.
        public var sources = 0
        public var activities = 0
        /// Activities whose source's start was intended by the horizon (the judge expects them started).
        public var due = 0
        public var started = 0
        public var notStarted = 0
        public var notStartedByReason: [String: Int] = [:]
        public var notStartedExamples: [String: [String]] = [:]
        /// Activities started although their start was not due yet.
        public var startedEarly = 0
        /// Per-device budget, start pushes refused for it, and start pushes that named no activity waiting to start.
        public var startBudget = 0
        public var budgetRefusals = 0
        public var unexpectedStarts = 0
        /// The started activities' registrations (the app's, to `--register`).
        public var registration = BackendTelling()
        /// Started activities with an update delivered since.
        public var followed = 0
        /// From the start event's intended time: the activity on the Lock Screen, its registration answered 2xx,
        /// its first update delivered (each started, registered, followed activity once).
        public var toLockScreen = LatencyHistogram()
        public var toRegistered = LatencyHistogram()
        public var toFirstUpdate = LatencyHistogram()
        public init() {}

        public var addsUp: Bool {
            due + startedEarly == started + notStarted && notStarted == notStartedByReason.values.reduce(0, +)
                && registration.addsUp(scheduled: started) && followed <= started
                && toLockScreen.totalCount == UInt64(started) && toRegistered.totalCount == UInt64(registration.done)
                && toFirstUpdate.totalCount == UInt64(followed)
        }
    }
}
