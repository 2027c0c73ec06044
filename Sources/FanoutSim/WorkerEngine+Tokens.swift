import FanoutCore

/// The population's tokens as `fanout serve` holds them and `fanout push` addresses them: the scenario's share of
/// update tokens rotated once at the start (the one rule both use), and every token source's followers.
extension WorkerEngine {
    /// Whether the scenario's `rotationShare` rotates the update token of device `d`'s activity in slot `k` once at
    /// the start (its old token then answers 410 Unregistered).
    public static func rotatesAtStart(_ scenario: Scenario, device d: Int, slot k: Int) -> Bool {
        let share = scenario.faults.rotationShare
        return share > 0 && Mix.unit(Mix.hash(scenario.seed, 0x5E, UInt64(d), UInt64(k))) < share
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
