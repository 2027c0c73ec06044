import FanoutAPNs
import FanoutWire

/// Several workers: the inbox drained (forwarded requests judged here, their answers handed back, peer messages),
/// and the messages for each peer gathered and handed over in one batch.
extension APNsServer {
    func drainInbox() {
        guard let cluster else { return }
        cluster.take(index, into: &inboxMessages)
        defer { inboxMessages.removeAll(keepingCapacity: true) }
        for i in inboxMessages.indices {
            // Moved out, not copied (a copy retained every buffer of a forwarded request's input, or of an answer,
            // and released them at the drain's end): a forwarded request's buffers are let go here, before its
            // answer is handed back, so its origin reuses them for its next stream without copying them.
            var message = ClusterMessage.allDrained
            swap(&message, &inboxMessages[i])
            switch consume message {
            case .request(let id, let origin, let input):
                var became = false
                let response = service.handle(
                    input, auth: nil, wallMillis: wallMillis, becameAuthenticated: &became)
                sendOutgoing()  // channel changes reach the peers before the answer does
                post(.response(id: id, response: response), to: origin)
            case .response(let id, let response):
                guard let (connection, request) = forwarded.remove(id) else {
                    connectionStats[.answersDropped] += 1  // its connection closed while the answer was on its way
                    continue
                }
                // Its stream closes after this answer (or has, then it was not pooled): reusable again, with its
                // buffers (the peer is done with the input that shared them), so the next stream takes no new one.
                request.retained = false
                if !connection.holdsOutput {
                    connection.holdOutput()
                    answering.append(connection)
                }
                answer(connection, request, response)
            case .peer(let peer):
                switch peer {
                case .broadcast(let b): service.acceptRemoteBroadcast(b)
                case .fanoutPart(_, let id, let end): service.fanoutPart(id: id, endNanos: end)
                case .channel(let raw, let bundle, let policy, let deleted):
                    service.channelChanged(raw, bundle: bundle, storagePolicy: policy, deleted: deleted)
                }
            case .allDrained:
                allDrainedSeen = true
            case .shutdown:
                beginShutdown()
            }
        }
        if service.pendingFanouts > 0 { service.runPendingFanouts(wallMillis: wallMillis) }
        sendOutgoing()
        for connection in answering { connection.releaseOutput() }
        answering.removeAll(keepingCapacity: true)
        flushOutbox()
        if allDrainedSeen && service.pendingFanouts == 0 && service.outstanding.isEmpty { closeUp() }
    }

    func sendOutgoing() {
        guard let cluster else { return }
        for message in service.takeOutgoing() {
            switch message {
            case .fanoutPart(let origin, _, _):
                post(.peer(message), to: origin)
            default:
                for k in 0..<cluster.count where k != index { post(.peer(message), to: k) }
            }
        }
    }

    /// Gathers a message for worker `k` (handed over by `flushOutbox`, at the end of the read or drain).
    /// Taken as its own (`consuming`): moved into the outbox, not copied (a copy retained each of its buffers).
    func post(_ message: consuming ClusterMessage, to k: Int) {
        if outbox.isEmpty, let cluster { outbox = Array(repeating: [], count: cluster.count) }
        outbox[k].append(message)
    }

    /// Hands each worker the messages gathered for it, in the order they were made, in one batch.
    func flushOutbox() {
        guard let cluster else { return }
        for k in outbox.indices where !outbox[k].isEmpty { cluster.send(&outbox[k], to: k) }
    }
}
