import FanoutCore
import FanoutMetrics
import FanoutSim

/// `fanout serve --shard K/N`: the tokens of the devices of the other N − 1 shards, as their own shards issue them at
/// start (every activity's update token of generation 0, the one rotated in for the scenario's rotated share, and the
/// device's push-to-start token), as 64-bit FNV-1a hashes (`TokenDirectory.hash`). Read-only once built, shared by
/// the loops: a push to one of them was routed to the wrong shard, and is counted as such instead of passing for a
/// token nobody issued.
public final class ForeignTokens: Sendable {
    private let hashes: Set<UInt64>

    /// The tokens of every device of `world`'s scenario outside `world.shard`.
    public init(world: World) {
        let scenario = world.scenario
        let shard = world.shard
        let share = scenario.faults.rotationShare
        var set = Set<UInt64>()
        if !shard.isWhole {
            let devices = scenario.population.devices
            set.reserveCapacity(devices / shard.count * (shard.count - 1) * 14 / 10)
            var id: [UInt8] = []
            var token: [UInt8] = []
            func add() {
                set.insert(token.withUnsafeBytes { TokenDirectory.hash($0) })
                token.removeAll(keepingCapacity: true)
            }
            for d in 0..<devices {
                id.removeAll(keepingCapacity: true)
                world.appendDeviceId(d, to: &id)
                if id.withUnsafeBytes({ shard.contains(deviceId: $0) }) { continue }
                world.appendToken(device: d, slot: 0xFFFF, generation: 0, to: &token)
                add()
                for k in 0..<world.activityCount(device: d) {
                    world.appendToken(device: d, slot: k, generation: 0, to: &token)
                    add()
                    // The start's rotation (`APNsService.init`): the same draw, the next generation.
                    if share > 0, Mix.unit(Mix.hash(scenario.seed, 0x5E, UInt64(d), UInt64(k))) < share {
                        world.appendToken(device: d, slot: k, generation: 1, to: &token)
                        add()
                    }
                }
            }
        }
        hashes = set
    }

    /// Whether `token` (as sent, text) is one of the other shards' tokens.
    public func contains(_ token: ArraySlice<UInt8>) -> Bool {
        hashes.contains(TokenDirectory.hash(token))
    }

    public var count: Int { hashes.count }
}
