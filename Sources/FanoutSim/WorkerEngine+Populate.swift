import FanoutCore
import FanoutMetrics

/// The worker's devices and their activities, created before the run starts.
extension WorkerEngine {
    func populate(progress: ProgressCounter?) {
        let scenario = world.scenario
        // Every broadcast channel exists on every worker, registered for its source's app, so that a
        // worker without subscribers still routes it (zero local deliveries) and judges its topic alike.
        var bundles: [[UInt8]] = scenario.apps.map { Array($0.bundle.utf8) }
        for s in 0..<scenario.sources.count where world.sourceIsBroadcast[s] {
            channel.removeAll(keepingCapacity: true)
            world.appendChannelId(source: s, to: &channel)
            let app = bundles[world.sourceApp[s]].withUnsafeBytes { pipeline.store.internApp($0) }
            channel.withUnsafeBytes { _ = pipeline.router.registerChannel($0, app: app) }
        }
        var idBytes: [UInt8] = []
        var deviceBytes: [UInt8] = []
        var content: [UInt8] = []
        var deviceNumbers: [Int32] = []
        let startMillis = world.epochSeconds * 1000
        // Count first, so that every column is allocated once at its final size.
        var expected = 0
        var contentBytes = 0
        var perSource = [Int](repeating: 0, count: scenario.sources.count)
        var d = index
        // An interrupted build (`fanout serve` on SIGINT) stops where it stands (checked every 256 devices, a few
        // milliseconds in a debug build): the devices so far, never served.
        var unchecked = 0
        func stopRequested() -> Bool {
            unchecked += 1
            guard unchecked == 256 else { return false }
            unchecked = 0
            return progress?.stopRequested == true
        }
        while d < scenario.population.devices {
            if stopRequested() { break }
            deviceBytes.removeAll(keepingCapacity: true)
            world.appendDeviceId(d, to: &deviceBytes)
            if deviceBytes.withUnsafeBytes({ world.shard.contains(deviceId: $0) }) { deviceNumbers.append(Int32(d)) }
            d += count
        }
        for d in deviceNumbers.lazy.map({ Int($0) }) {
            if stopRequested() { break }
            let n = world.activityCount(device: d)
            expected += n
            for k in 0..<n {
                let source = world.source(device: d, slot: k)
                if world.defersKickoff, world.startsByKickoff(source) {
                    expected -= 1
                    continue
                }
                perSource[source] += 1
                contentBytes += world.recordSize(schema: world.appSchema[world.sourceApp[source]])
            }
        }
        for source in 0..<scenario.sources.count where perSource[source] > 0 {
            if world.sourceIsBroadcast[source] {
                channel.removeAll(keepingCapacity: true)
                world.appendChannelId(source: source, to: &channel)
                channel.withUnsafeBytes { pipeline.router.reserveSubscribers(channel: $0, count: perSource[source]) }
            } else {
                followers[source].reserveCapacity(perSource[source])
            }
        }
        pipeline.store.reserveCapacity(
            activities: expected, devices: deviceNumbers.count, contentBytes: contentBytes,
            idBytes: expected * 20)
        pipeline.router.reserveUpdateTokens(expected, bytes: expected * 64)
        slot.reserveCapacity(expected)
        generation.reserveCapacity(expected)
        deviceOf.reserveCapacity(expected)
        var unreported = 0
        for d in deviceNumbers.lazy.map({ Int($0) }) {
            unreported += 1
            if unreported == 4096 {
                progress?.add(unreported)
                unreported = 0
            }
            if stopRequested() { break }
            deviceBytes.removeAll(keepingCapacity: true)
            world.appendDeviceId(d, to: &deviceBytes)
            for k in 0..<world.activityCount(device: d) {
                let source = world.source(device: d, slot: k)
                if world.defersKickoff, world.startsByKickoff(source) {
                    kickoffSlots.append((Int32(d), UInt8(k)))
                    continue
                }
                let app = world.sourceApp[source]
                idBytes.removeAll(keepingCapacity: true)
                world.appendActivityId(device: d, slot: k, to: &idBytes)
                token.removeAll(keepingCapacity: true)
                world.appendToken(device: d, slot: k, generation: 0, to: &token)
                world.makeContent(schema: world.appSchema[app], event: -1, source: source, final: false, into: &content)
                channel.removeAll(keepingCapacity: true)
                if world.sourceIsBroadcast[source] { world.appendChannelId(source: source, to: &channel) }
                let created = idBytes.withUnsafeBytes { id in
                    deviceBytes.withUnsafeBytes { dev in
                        bundles[app].withUnsafeBytes { bundle in
                            token.withUnsafeBytes { tok in
                                channel.withUnsafeBytes { ch in
                                    content.withUnsafeBytes { c in
                                        pipeline.request(
                                            id: id, device: dev, app: bundle, schema: world.appSchema[app], content: c,
                                            staleDate: nil, relevance: Double(k), token: tok,
                                            channel: world.sourceIsBroadcast[source] ? ch : nil, nowMillis: startMillis)
                                    }
                                }
                            }
                        }
                    }
                }
                guard let a = created else { continue }
                precondition(Int(a) == slot.count)
                slot.append(UInt8(k))
                deviceOf.append(Int32(d))
                generation.append(0)
                if !world.sourceIsBroadcast[source] { followers[source].append(a) }
            }
        }
        progress?.add(unreported)
        bundles.removeAll()
        for s in 0..<scenario.sources.count where world.sourceIsBroadcast[s] {
            channel.removeAll(keepingCapacity: true)
            world.appendChannelId(source: s, to: &channel)
            let resolution = channel.withUnsafeBytes { pipeline.router.resolve(.channel, $0) }
            guard case .channel(let c) = resolution else { preconditionFailure("source \(s)'s channel is registered") }
            channelOfSource[s] = c
            subscriberCount[s] = pipeline.router.subscribers[Int(c)].count
        }
    }

}
