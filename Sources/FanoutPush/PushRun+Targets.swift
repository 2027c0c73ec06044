import FanoutAPNs
import FanoutCore
import FanoutMetrics
import FanoutSim
import FanoutWire
import UVLoop

/// `fanout push A,B,...`: N targets, target i being serve shard i/N (`fanout serve --shard i/N`). Each token push goes
/// to the target whose slice owns its device (`Shard`'s hash of the device id, as `fanout run --shard` and `fanout
/// serve --shard` slice the devices), each broadcast to every target; `--connections` connections per target. With one
/// target everything goes to it, as before.
extension PushRun {
    /// Per token source, each follower's request path (`/3/device/TOKEN`) and the target its device belongs to.
    static func followerPaths(_ engine: WorkerEngine, targetCount: Int) -> (paths: [[[UInt8]]], owners: [[UInt8]]) {
        let followers = engine.tokenFollowersBySource()
        let paths = followers.map { $0.map { Array("/3/device/".utf8) + $0.token } }
        let owners = followers.map { list in
            list.map { follower in
                guard targetCount > 1 else { return UInt8(0) }
                let k = follower.device.withUnsafeBytes { Shard.index(ofDeviceId: $0, count: targetCount) }
                return UInt8(truncatingIfNeeded: k)
            }
        }
        return (paths, owners)
    }

    /// Each target's address, TLS context, settings and authority (`connectTo`, by target).
    func resolveTargets(_ loop: EventLoop) throws {
        var settings = H2ClientSettings()
        settings.maxConcurrentStreams = options.maxStreamsPerConnection
        settings.maxQueued = options.maxQueued
        settings.keepsApnsId = false  // answers are counted by status and reason; their ids are not read
        connectTo = try options.targets.map { target in
            let tls = target.tls ? try TLSContext(clientCAFile: options.caFile, insecure: options.insecure) : nil
            let host = try TCPStream.resolve(target.host, loop: loop)
            let authority = target.description.split(separator: "/").last.map(String.init)
            return (host, tls, settings, authority)
        }
    }

    /// Opens a connection for slot `k` (its target's address, TLS and settings; `first`: one of the run's first
    /// connections, which start at ``PushOptions/firstStreamId``).
    func openConnection(slot k: Int, first: Bool = false) throws -> H2ClientConnection {
        let group = slots[k].group
        guard let loop, group < connectTo.count else { throw PushError("no loop") }
        let to = connectTo[group]
        let target = options.targets[group]
        var settings = to.settings
        if first { settings.firstStreamId = options.firstStreamId }
        let connection = try H2ClientConnection(
            loop: loop, host: to.host, port: target.port, tls: to.tls, serverName: target.host,
            authority: to.authority, settings: settings)
        connection.onResponse = { [unowned self] c, response in self.completed(c, response) }
        connection.onClosed = { [unowned self] c in self.connectionClosed(c) }
        connection.onReady = { [unowned self] c in self.connectionReady(c) }
        connection.onDraining = { [unowned self] c in self.connectionDraining(c) }
        groupOf[ObjectIdentifier(connection)] = group
        slotOf[ObjectIdentifier(connection)] = k
        return connection
    }

    /// To the ready connection of the request's target (`group`) with the fewest requests open and queued (one
    /// connecting or draining takes none); with none, it waits (at most ``heldLimit``, else `dropped (queue full)`)
    /// for one being opened or to be opened, or fails ("no connection") when the target's slots all gave up.
    func route(_ request: consuming H2ClientRequest, group: Int) {
        var best: H2ClientConnection?
        var load = Int.max
        let one = connectTo.count == 1
        for c in connections where c.isUsable && (one || groupOf[ObjectIdentifier(c)] == group) {
            let l = c.openStreams + c.queuedRequests
            if l < load {
                load = l
                best = c
            }
        }
        guard let best else {
            if ending || finished || !mayConnect(group: group) {
                endUnrouted(tag: request.tag, handedNanos: request.handedNanos, failure: "no connection")
            } else if heldRequests >= heldLimit {
                endUnrouted(
                    tag: request.tag, handedNanos: request.handedNanos,
                    failure: H2ClientFailure.queueFull.description)
            } else {
                orphans.append((request, group))
                notePeakQueued()
            }
            return
        }
        best.submit(request)
        if best.queuedRequests > 0 { notePeakQueued() }
    }

    /// Requests waiting for a ready connection now.
    var heldRequests: Int { orphans.count - orphanHead }
    /// At most this many wait for a ready connection: `--max-queued` per connection of every target.
    var heldLimit: Int { options.maxQueued.multipliedReportingOverflow(by: max(1, slots.count)).partialValue }

    func notePeakQueued() {
        var queued = heldRequests
        for c in connections { queued += c.queuedRequests }
        results.peakQueued = max(results.peakQueued, queued)
    }
}
