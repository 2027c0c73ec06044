import FanoutCore

/// The population's tokens as `fanout serve` holds them and `fanout push` addresses them: the scenario's share of
/// update tokens rotated once at the start (the one rule both use), and every token source's followers.
extension WorkerEngine {
    /// Whether the scenario's `rotationShare` rotates the update token of device `d`'s activity in slot `k` once at
    /// the start (its old token then answers 410 Unregistered); never with `rotationWhileServing` (then it rotates
    /// while serving, `servingRotationNanos`).
    public static func rotatesAtStart(_ scenario: Scenario, device d: Int, slot k: Int) -> Bool {
        scenario.faults.rotationWhileServing == nil && inRotationShare(scenario, device: d, slot: k)
    }

    /// The scenario's `rotationShare` draw for device `d`'s activity in slot `k` (the same at the start or while
    /// serving, so `--shard`'s foreign tokens hold either way).
    static func inRotationShare(_ scenario: Scenario, device d: Int, slot k: Int) -> Bool {
        let share = scenario.faults.rotationShare
        return share > 0 && Mix.unit(Mix.hash(scenario.seed, 0x5E, UInt64(d), UInt64(k))) < share
    }

    /// With `faults.rotationWhileServing`: when device `d`'s activity in slot `k` rotates its update token, in
    /// nanoseconds after t0 (serving's start), uniform in the middle 80% of the run, [0.1, 0.9) × `durationSeconds`,
    /// from a hash of the seed, the device and the slot (a run repeats); nil when it does not rotate.
    public static func servingRotationNanos(_ scenario: Scenario, device d: Int, slot k: Int) -> UInt64? {
        guard scenario.faults.rotationWhileServing != nil, inRotationShare(scenario, device: d, slot: k) else {
            return nil
        }
        let u = Mix.unit(Mix.hash(scenario.seed, 0x5F, UInt64(d), UInt64(k)))
        return UInt64(((0.1 + 0.8 * u) * scenario.durationSeconds * 1e9).rounded(.down))
    }

    /// Rotates the scenario's share of the update tokens once, as `fanout serve` does when it builds its
    /// population; `retired` is given each old token and its activity, in activity order.
    public func rotateScenarioShare(_ retired: (_ old: [UInt8], _ activity: Int32) -> Void) {
        for a in 0..<Int32(activityCount) {
            let (d, k) = deviceAndSlot(of: a)
            if Self.rotatesAtStart(world.scenario, device: d, slot: k) { retired(rotateToken(of: a).old, a) }
        }
    }

    /// Per token source, the update token (text, as population.jsonl's `token`) and device id of every activity
    /// following it; for a broadcast source, nothing (it is pushed once, to its channel).
    public func tokenFollowersBySource() -> [[(token: [UInt8], device: [UInt8])]] {
        let store = pipeline.store
        let tokens = pipeline.router.updateTokens
        let sources = sourcesOfActivities()
        var out = Array(repeating: [(token: [UInt8], device: [UInt8])](), count: world.scenario.sources.count)
        for a in 0..<Int32(activityCount) {
            let i = Int(a)
            let (d, k) = deviceAndSlot(of: a)
            let source = sources[i] >= 0 ? Int(sources[i]) : world.source(device: d, slot: k)
            guard !world.sourceIsBroadcast[source] else { continue }
            var token: [UInt8] = []
            tokens.withBytes(store.token[i]) { WorkerEngine.appendTokenText($0, to: &token) }
            out[source].append((token, store.deviceIds.withBytes(store.device[i]) { Array($0) }))
        }
        return out
    }

    /// The router keeps canonical tokens as bytes behind a tag (see `Router.withTokenKey`): back to text (hex).
    public static func appendTokenText(_ key: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        guard let tag = key.first else { return }
        if tag == 1 {
            out.append(contentsOf: key.dropFirst())
            return
        }
        for byte in key.dropFirst() {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 15)])
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
