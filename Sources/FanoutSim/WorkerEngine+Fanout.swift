import FanoutCore
import FanoutMetrics

/// Fan-out of one update or end: a push per local follower of a token source, or one push to a
/// broadcast channel applied by every local subscriber.
extension WorkerEngine {
    /// One push per local follower; each is validated, routed and applied on its own.
    func tokenPushes(_ event: SourceEvent, payload p: UnsafeRawBufferPointer, priority: Int64) {
        let nowMs = nowMillis(event)
        let app = world.sourceApp[event.source]
        let expiration: Int64 =
            expirationSeconds.map { world.epochSeconds + Int64(event.intendedNanos / 1_000_000_000) + $0 } ?? 0
        let list = followers[event.source]
        let tok = UnsafeRawBufferPointer(start: tokenScratch, count: World.tokenBytes)
        pushType.withUnsafeBytes { pt in
            topics[app].withUnsafeBytes { tp in
                let headers = PushHeaders(
                    pushType: .string(pt), topic: .string(tp), priority: .integer(priority),
                    expiration: .integer(expiration))
                for a in list {
                    prepareToken(a, event)
                    let sampled = !virtual && pushCounter % sampleEvery == 0
                    pushCounter &+= 1
                    // Stage boundaries as in the benchmarks: the token lookup (`begin`) is route's.
                    let t0 = sampled ? readClock() : 0
                    var flight = pipeline.begin(kind: .token, target: tok)
                    let tb = sampled ? readClock() : 0
                    let rejected = pipeline.validate(&flight, headers: headers, payload: p) != nil
                    let t1 = sampled ? readClock() : 0
                    if virtual {
                        t &+= validateStep
                        recorder.record(.validate, nanos: validateStep)
                    } else if sampled {
                        recorder.record(.validate, nanos: t1 &- tb)
                    }
                    if rejected { continue }
                    let verdict = pipeline.route(&flight)
                    let t2 = sampled ? readClock() : 0
                    if virtual {
                        t &+= routeStep
                        recorder.record(.route, nanos: routeStep)
                    } else if sampled {
                        recorder.record(.route, nanos: (tb &- t0) &+ (t2 &- t1))
                    }
                    guard case .routed = verdict, case .activity(let target) = flight.resolution else { continue }
                    if isOffline(target, event) {
                        hold(target, event, headers: headers, payload: p, broadcast: false)
                        continue
                    }
                    pipeline.deliver(flight, payload: p, to: target, nowMillis: nowMs)
                    let end: UInt64
                    if virtual {
                        t &+= decodeStep &+ applyStep
                        recorder.record(.apply, nanos: decodeStep &+ applyStep)
                        end = t
                    } else {
                        payCost()
                        end = realNow()
                        if sampled { recorder.record(.apply, nanos: end &+ realStart &- t2) }
                    }
                    delivered(target, event, endNanos: end)
                }
            }
        }
    }

    /// The update token the push goes to. The device rotates its token while the push is in flight
    /// (the scenario's rotation share): the push goes to the old one.
    @inline(__always)
    func prepareToken(_ a: Int32, _ event: SourceEvent) {
        let d = Int(deviceOf[Int(a)])
        let k = Int(slot[Int(a)])
        let key = UInt64(d) << 8 | UInt64(k)
        var rotated = false
        if rotationShare > 0, Mix.unit(Mix.hash(seed, 0x40, UInt64(event.index), key)) < rotationShare {
            generation[Int(a)] &+= 1
            writeToken(device: d, slot: k, generation: generation[Int(a)])
            pipeline.rotate(a, token: UnsafeRawBufferPointer(start: tokenScratch, count: World.tokenBytes))
            rotated = true
        }
        writeToken(device: d, slot: k, generation: generation[Int(a)] &- (rotated ? 1 : 0))
    }

    /// The token scratch holds the given token.
    @inline(__always)
    func writeToken(device d: Int, slot k: Int, generation g: UInt32) {
        world.writeToken(device: d, slot: k, generation: g, into: tokenScratch)
    }

    /// One push to the source's channel: validated (and decoded) once, applied by every local subscriber.
    func broadcastPush(_ event: SourceEvent, payload p: UnsafeRawBufferPointer, priority: Int64) {
        let source = event.source
        let owner = ownsVerdict(of: source)
        channel.removeAll(keepingCapacity: true)
        world.appendChannelId(source: source, to: &channel)
        if channelChurnShare > 0, Mix.unit(Mix.hash(seed, 0xC4, UInt64(event.index))) < channelChurnShare {
            // The backend pushes to the channel it has just deleted and replaced: an id APNs no longer knows.
            JSONWriter.append("-deleted", to: &channel)
        }
        let app = world.sourceApp[source]
        pushType.withUnsafeBytes { pt in
            topics[app].withUnsafeBytes { tp in
                channel.withUnsafeBytes { ch in
                    let headers = PushHeaders(
                        pushType: .string(pt), topic: .string(tp), priority: .integer(priority),
                        expiration: .integer(0))
                    // Stage boundaries as in the benchmarks: the channel lookup (`begin`) is route's.
                    let t0 = virtual ? 0 : readClock()
                    var flight = pipeline.begin(kind: .channel, target: ch)
                    let tb = virtual ? 0 : readClock()
                    let rejected = pipeline.validate(&flight, headers: headers, payload: p, countsVerdict: owner) != nil
                    let t1 = virtual ? 0 : readClock()
                    if virtual {
                        t &+= validateStep
                        recorder.record(.validate, nanos: validateStep)
                    } else {
                        recorder.record(.validate, nanos: t1 &- tb)
                    }
                    guard !rejected else { return }
                    let verdict = pipeline.route(&flight, countsVerdict: owner)
                    if virtual {
                        t &+= routeStep
                        recorder.record(.route, nanos: routeStep)
                    } else {
                        recorder.record(.route, nanos: (tb &- t0) &+ (readClock() &- t1))
                    }
                    guard case .routed = verdict, case .channel(let c) = flight.resolution else { return }
                    let next = applySubscribers(event, flight, payload: p, channel: c, from: 0, yieldAt: yieldAtNanos)
                    if next < subscriberCount[source] {
                        // Interrupted: keep the payload and the position for `runSlice`.
                        slices.append(
                            Slice(
                                event: event, channel: c, next: Int32(next), priority: priority,
                                payloadStart: Int32(sliceBytes.count), payloadCount: Int32(p.count), done: false))
                        sliceBytes.append(contentsOf: p)
                        slicesPerSource[source] += 1
                        slicedFanouts += 1
                    }
                }
            }
        }
    }

    /// Applies a broadcast by the local subscribers from index `first`; returns where it stopped (the
    /// subscriber count when done). `payload` is the one `flight` was validated or resumed with, held by the
    /// caller for the whole call (the content is decoded from it).
    ///
    /// Virtual time: each recipient takes the model's apply time, so recipient k completes at the
    /// event's start + validate + route + (k + 1) × apply. Real time: the clock is read once per group
    /// of `realGroup` recipients and the group's members are recorded with that (latest) time, an upper
    /// bound; one recipient in `stageSampleEvery` has its apply timed on its own. Stops after a group
    /// once the clock has passed `yieldAt`.
    func applySubscribers(
        _ event: SourceEvent, _ flight: Pipeline.InFlight, payload: UnsafeRawBufferPointer, channel c: Int32,
        from first: Int, yieldAt: UInt64
    ) -> Int {
        let nowMs = nowMillis(event)
        let subscribers = pipeline.router.subscribers[Int(c)]
        let n = subscribers.count
        let offline = offlineShare > 0
        let window = offline ? Int(Double(event.intendedNanos) / 1e9 / offlineWindowSeconds) : 0
        var k = first
        if virtual {
            // The event's completion is written once, after the loop.
            var applied: UInt64 = 0
            let intended = event.intendedNanos
            while k < n {
                let a = subscribers[k]
                k += 1
                // Broadcasts carry expiration 0: APNs does not store them for offline devices.
                if offline && offlineIn(window, device: deviceOf[Int(a)]) {
                    pipeline.settle(.expired, for: a)
                    continue
                }
                pipeline.deliver(flight, payload: payload, to: a, nowMillis: nowMs)
                // The first recipient decodes the content; the others apply the decoded record.
                t &+= applyStep &+ (applied == 0 ? decodeStep : 0)
                applied &+= 1
                recorder.record(.endToEnd, nanos: t &- intended)
                maybeDismiss(a, event)
            }
            if applied > 0 {
                let e = event.index &- completionBase
                if t > local.lastNanos[e] { local.lastNanos[e] = t }
                local.recipients[e] &+= Int32(applied)
            }
            if applied > 0 {
                recorder.record(.apply, nanos: decodeStep &+ applyStep)
                recorder.record(.apply, nanos: applyStep, count: applied &- 1)
            }
            return k
        }
        let mayYield = yieldAt != .max && yieldForSource != event.source
        let earliestYield = realNow() &+ WorkerEngine.sliceQuantumNanos
        var group = 0
        var groupStart = k
        while k < n {
            let a = subscribers[k]
            k += 1
            if offline && offlineIn(window, device: deviceOf[Int(a)]) {
                pipeline.settle(.expired, for: a)
            } else {
                let sampled = recipientCounter % sampleEvery == 0
                recipientCounter &+= 1
                let t0 = sampled ? readClock() : 0
                pipeline.deliver(flight, payload: payload, to: a, nowMillis: nowMs)
                payCost()
                if sampled { recorder.record(.apply, nanos: readClock() &- t0) }
                group += 1
            }
            if group == WorkerEngine.realGroup || k == n {
                let end = realNow()
                finishGroup(event, subscribers, groupStart..<k, endNanos: end)
                group = 0
                groupStart = k
                if mayYield && end >= yieldAt && end >= earliestYield && k < n { break }
            }
        }
        if groupStart < k { finishGroup(event, subscribers, groupStart..<k, endNanos: realNow()) }
        return k
    }

    /// Real time: recipients applied between two clock reads.
    static let realGroup = 16

    /// Records a group's deliveries (the offline members were settled as expired, not delivered).
    func finishGroup(_ event: SourceEvent, _ subscribers: [Int32], _ range: Range<Int>, endNanos: UInt64) {
        let offline = offlineShare > 0
        let window = offline ? Int(Double(event.intendedNanos) / 1e9 / offlineWindowSeconds) : 0
        for j in range {
            let a = subscribers[j]
            if offline && offlineIn(window, device: deviceOf[Int(a)]) { continue }
            delivered(a, event, endNanos: endNanos)
        }
    }

    /// Whether a device is offline in an offline window (`World.offline`, with the parameters read once).
    @inline(__always)
    func offlineIn(_ window: Int, device d: Int32) -> Bool {
        Mix.unit(Mix.hash(seed, 0x0F, UInt64(UInt32(bitPattern: d)), UInt64(bitPattern: Int64(window)))) < offlineShare
    }
}
