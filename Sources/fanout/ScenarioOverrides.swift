import ArgumentParser
import FanoutSim

/// The scenario flags `run`, `serve` and `push` share (each says in its own help what they mean to it), applied and
/// checked one way: `--devices` (1 to 50,000,000, as a scenario file's `population.devices`), `--seed`, `--rate-scale`
/// (above 0, at most 1000); and `--epoch` (serve, push: 0 to 4102444800).
enum ScenarioOverrides {
    static func apply(to s: inout Scenario, devices: Int? = nil, seed: UInt64?, rateScale: Double?) throws {
        if let devices {
            try check(devices: devices)
            s.population.devices = devices
        }
        if let seed { s.seed = seed }
        if let rateScale {
            try check(rateScale: rateScale)
            s.scaleRates(by: rateScale)
        }
    }

    static func check(devices: Int?) throws {
        guard let devices else { return }
        guard (1...50_000_000).contains(devices) else {
            throw ValidationError("--devices: expected 1 to 50000000, got \(devices)")
        }
    }

    /// `--epoch` (serve, push): UNIX seconds from 0 to 4102444800 (2100-01-01), so that the devices' clock in
    /// milliseconds, a run's length and a dismissal window after it never overflow.
    static func check(epoch: Int64?) throws {
        guard let epoch else { return }
        guard (0...4_102_444_800).contains(epoch) else {
            throw ValidationError("--epoch: expected UNIX seconds from 0 to 4102444800, got \(epoch)")
        }
    }

    /// `--rate-scale` within its range (checked before anything starts, also where it does not scale a scenario).
    static func check(rateScale: Double?) throws {
        guard let rateScale else { return }
        guard rateScale > 0 && rateScale <= 1000 else {
            throw ValidationError("--rate-scale: expected a factor above 0 and at most 1000, got \(rateScale)")
        }
    }
}
