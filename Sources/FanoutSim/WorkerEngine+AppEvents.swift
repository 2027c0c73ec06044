#if canImport(Glibc)
import Glibc
#endif

/// `faults.appEvents` (docs/INGEST.md §5, *App events*): which activities the app's side ends while `fanout serve`
/// serves, how and when, drawn from the seed alone (the same for any number of loops, and a run repeats).
extension WorkerEngine {
    /// What the app's side did to an activity.
    public enum AppEventKind: Int, Sendable, CaseIterable {
        /// The person dismissed (ended) the activity.
        case dismissed = 0
        /// Live Activities were turned off for the app on the device: every activity of that app there ended.
        case disabled
        /// The app was uninstalled from the device: its activities ended and their update tokens answer 410.
        case uninstalled

        /// The `kind` of the request to `--app-events` and the key of the counts.
        public var name: String {
            switch self {
            case .dismissed: "dismissed"
            case .disabled: "disabled"
            case .uninstalled: "uninstalled"
            }
        }
    }

    /// With `faults.appEvents`: the app event of device `d`'s activity in slot `k`, an activity of the scenario's
    /// app number `app`, and when it happens in nanoseconds after t0 (serving's start); nil when none does.
    ///
    /// Disable and uninstall are drawn per (device, app) pair — one draw u < `uninstallShare` uninstalls, below
    /// `uninstallShare + disableShare` disables — so every activity of that app on that device gets the same kind and
    /// instant; the others are dismissed with `dismissShare`, per activity. The instant is uniform in the middle 80%
    /// of the run, t0 + (0.1 + 0.8 v) × `durationSeconds`, v from another hash of the seed and the pair (or the
    /// activity). An activity whose token rotates while serving has none (one change of an activity's tokens at a
    /// time).
    public static func appEvent(
        _ scenario: Scenario, device d: Int, slot k: Int, app: Int
    ) -> (kind: AppEventKind, offsetNanos: UInt64)? {
        guard let e = scenario.faults.appEvents, servingRotationNanos(scenario, device: d, slot: k) == nil else {
            return nil
        }
        let seed = scenario.seed
        let pair = Mix.unit(Mix.hash(seed, 0xA1, UInt64(d), UInt64(app)))
        let kind: AppEventKind
        let v: Double
        if pair < e.uninstallShare + e.disableShare {
            kind = pair < e.uninstallShare ? .uninstalled : .disabled
            v = Mix.unit(Mix.hash(seed, 0xA2, UInt64(d), UInt64(app)))
        } else if e.dismissShare > 0, Mix.unit(Mix.hash(seed, 0xA3, UInt64(d), UInt64(k))) < e.dismissShare {
            kind = .dismissed
            v = Mix.unit(Mix.hash(seed, 0xA4, UInt64(d), UInt64(k)))
        } else {
            return nil
        }
        return (kind, UInt64(((0.1 + 0.8 * v) * scenario.durationSeconds * 1e9).rounded(.down)))
    }
}

/// `faults.kickoff` (docs/INGEST.md §5, *Kickoff*): the activities a push-to-start starts while `fanout serve` serves.
extension WorkerEngine {
    /// Local activity `a`, just created by a push-to-start on device `device`, is the activity of `slot` there: its
    /// name, tokens and source derive from them from now on (`deviceAndSlot`), and it follows `source` (nil: none).
    public func adoptStarted(_ a: Int32, device: Int, slot k: Int, source: Int?) {
        precondition(Int(a) == slot.count, "a started activity is the store's newest")
        slot.append(UInt8(truncatingIfNeeded: k))
        deviceOf.append(Int32(device))
        generation.append(0)
        if let source { followers[source].append(a) }
    }

    /// The app's delay from device `d`'s activity of slot `k` appearing on the Lock Screen to its registration
    /// request, in nanoseconds: lognormal through `appDelayMillis`' p50 and p99 (Box–Muller from two hashes of the
    /// seed, the device and the slot: a run repeats), at most an hour.
    public static func kickoffAppDelayNanos(_ scenario: Scenario, device d: Int, slot k: Int) -> UInt64 {
        guard let kickoff = scenario.faults.kickoff else { return 0 }
        let mu = log(kickoff.appDelayP50Millis * 1e6)
        let sigma = (log(kickoff.appDelayP99Millis * 1e6) - mu) / 2.3263
        let u1 = 1 - Mix.unit(Mix.hash(scenario.seed, 0xC1, UInt64(d), UInt64(k)))
        let u2 = Mix.unit(Mix.hash(scenario.seed, 0xC2, UInt64(d), UInt64(k)))
        let z = (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
        let nanos = exp(mu + sigma * z)
        return nanos >= 3.6e12 ? 3_600_000_000_000 : UInt64(nanos)
    }
}
