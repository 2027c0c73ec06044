import FanoutCore
import FanoutMetrics

/// Devices offline for a window: APNs holds their pushes (coalescing newer over older) and delivers or
/// expires them when the window ends.
extension WorkerEngine {
    @inline(__always)
    func isOffline(_ a: Int32, _ event: SourceEvent) -> Bool {
        guard offlineShare > 0 else { return false }
        let window = Int(Double(event.intendedNanos) / 1e9 / offlineWindowSeconds)
        return offlineIn(window, device: deviceOf[Int(a)])
    }

    /// APNs stores the push until the device returns (at the end of its offline window). With
    /// coalescing, a newer held update for the same activity supersedes the older one.
    func hold(
        _ a: Int32, _ event: SourceEvent, headers: PushHeaders, payload p: UnsafeRawBufferPointer,
        broadcast: Bool
    ) {
        guard case .integer(let expiration) = headers.expiration, case .integer(let priority) = headers.priority
        else { return }
        if coalescing, let previous = latestHeld[a] {
            held[Int(previous)].superseded = true
            heldSuperseded += 1
            pipeline.settle(.coalesced, for: a)
            if heldSuperseded >= heldCompactAt && heldSuperseded * 2 > held.count { compactHeld() }
        }
        latestHeld[a] = Int32(held.count)
        held.append(
            Held(
                activity: a, event: Int32(event.index), intendedNanos: event.intendedNanos,
                expirationMillis: expiration == 0 ? Int64.min : expiration * 1000, payloadStart: Int32(heldBytes.count),
                payloadCount: Int32(p.count), priority: Int8(priority), broadcast: broadcast, superseded: false))
        heldBytes.append(contentsOf: p)
        peakHeld = max(peakHeld, held.count)
    }

    /// Drops superseded records and their payload bytes, keeping the live ones in arrival order (the
    /// order `flushHeld` delivers them in), and points `latestHeld` at their new places.
    func compactHeld() {
        var kept = 0
        var bytesKept = 0
        for k in held.indices where !held[k].superseded {
            var h = held[k]
            let start = Int(h.payloadStart)
            let count = Int(h.payloadCount)
            if start != bytesKept {
                heldBytes.withUnsafeMutableBytes { b in
                    b.baseAddress!.advanced(by: bytesKept).copyMemory(
                        from: UnsafeRawPointer(b.baseAddress!.advanced(by: start)), byteCount: count)
                }
            }
            h.payloadStart = Int32(bytesKept)
            bytesKept += count
            held[kept] = h
            latestHeld[h.activity] = Int32(kept)
            kept += 1
        }
        held.removeLast(held.count - kept)
        heldBytes.removeLast(heldBytes.count - bytesKept)
        heldSuperseded = 0
        heldCompactions += 1
    }

    /// The offline window ends: each held push is delivered, or `expired` if its expiration passed.
    func flushHeld(_ event: SourceEvent) {
        let nowMs = nowMillis(event)
        latestHeld.removeAll(keepingCapacity: true)
        for h in held where !h.superseded {
            if h.expirationMillis < nowMs {
                pipeline.settle(.expired, for: h.activity)
                continue
            }
            let start = Int(h.payloadStart)
            let end = start + Int(h.payloadCount)
            let app = world.sourceApp[sourceOfHeld(h)]
            heldBytes.withUnsafeBytes { bytes in
                pushType.withUnsafeBytes { pt in
                    topics[app].withUnsafeBytes { tp in
                        let headers = PushHeaders(
                            pushType: .string(pt), topic: .string(tp), priority: .integer(Int64(h.priority)),
                            expiration: .integer(0))
                        pipeline.deliverStored(
                            kind: h.broadcast ? .channel : .token, headers: headers,
                            payload: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), to: h.activity,
                            nowMillis: nowMs)
                    }
                }
            }
            let endNanos: UInt64
            if virtual {
                t &+= validateStep &+ decodeStep &+ applyStep
                endNanos = t
            } else {
                payCost()
                endNanos = realNow()
            }
            let source = SourceEvent(index: Int(h.event), intendedNanos: h.intendedNanos, kind: .update, source: 0)
            delivered(h.activity, source, endNanos: endNanos)
        }
        held.removeAll(keepingCapacity: true)
        heldBytes.removeAll(keepingCapacity: true)
        heldSuperseded = 0
    }

    /// The source an activity follows (held pushes are for the activity's own source).
    func sourceOfHeld(_ h: Held) -> Int {
        world.source(device: Int(deviceOf[Int(h.activity)]), slot: Int(slot[Int(h.activity)]))
    }
}
