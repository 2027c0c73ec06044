import FanoutCore
import FanoutMetrics
import FanoutSim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The channel-management API (create, read, list, delete) and the channel registry every loop keeps.
extension APNsService {

    /// `idCheck`: the request's `apns-request-id`, judged once by `judge` (``RequestCheck/messageId(_:broadcast:)``).
    func channelRequest(
        _ route: APNsRoute, _ r: RequestInput, _ idCheck: Result<UniqueHeader?, APNsReason>
    ) -> (APNsAnswer, APNsReason?) {
        let idHeader: UniqueHeader
        switch idCheck {
        case .failure(let reason): return failure(reason, id: nil)
        case .success(let id): idHeader = id ?? ids.make("apns-request-id")
        }
        func json(_ status: Int, _ text: String, extra: [(name: String, value: String)] = []) -> (APNsAnswer, APNsReason?) {
            let headers = extra + (text.isEmpty ? [] : [(name: "content-type", value: "application/json")])
            return (APNsAnswer(status: status, id: idHeader, headers: headers, body: Array(text.utf8)), nil)
        }
        switch route {
        case .createChannel(let bundle):
            if r.body.isEmpty { return failure(.payloadEmpty, id: idHeader) }
            guard let object = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any] else {
                return failure(.badRequestPayload, id: idHeader)
            }
            guard object.keys.allSatisfy({ $0 == "message-storage-policy" || $0 == "push-type" }) else {
                return failure(.badRequestParams, id: idHeader)
            }
            guard let type = object["push-type"] as? String else { return failure(.missingPushType, id: idHeader) }
            guard type.lowercased() == "liveactivity" else { return failure(.invalidPushType, id: idHeader) }
            let policy = object["message-storage-policy"] as? Int ?? 0
            guard policy == 0 || policy == 1 else { return failure(.badRequestParams, id: idHeader) }
            if bundle.withUnsafeBytes({ pipeline.store.appIds.lookup($0) }) == nil {
                // A bundle new to this server: interned as an app for good, so their number is capped.
                guard apiBundles < channelLimits.apiBundles else {
                    stats.channelRefusals.bundles += 1
                    return failure(.cannotCreateChannelConfig, id: idHeader)
                }
                apiBundles += 1
            }
            guard (channelOrder[bundle]?.raws.count ?? 0) < APNsService.channelsPerApp else {
                stats.channelRefusals.perApp += 1
                return failure(.cannotCreateChannelConfig, id: idHeader)
            }
            channelsCreated += 1
            let raw = APNsService.channelId(channelsCreated)
            registerChannel(raw, bundle: bundle, storagePolicy: policy)
            if workers > 1 { outgoing.append(.channel(raw: raw, bundle: bundle, storagePolicy: policy, deleted: false)) }
            return json(201, "", extra: [(name: "apns-channel-id", value: Base64.encode(raw))])
        case .readChannel(let bundle), .deleteChannel(let bundle):
            let raw: [UInt8]
            switch RequestCheck.channelId(r.headers) {
            case .failure(let reason): return failure(reason, id: idHeader)
            case .success(let (decoded, _)): raw = decoded
            }
            guard let channel = channels[raw], channel.bundle == bundle else {
                return failure(.channelNotRegistered, id: idHeader)
            }
            if case .deleteChannel = route {
                deleteChannel(raw)
                if workers > 1 { outgoing.append(.channel(raw: raw, bundle: bundle, storagePolicy: 0, deleted: true)) }
                return json(204, "")
            }
            return json(200, "{\"message-storage-policy\":\(channel.storagePolicy),\"push-type\":\"LiveActivity\"}")
        case .listChannels(let bundle):
            // The live channels only, the first `listedChannels` created (the cut is counted).
            let live = channelOrder[bundle]?.raws ?? []
            let shown = live.prefix(channelLimits.listedChannels)
            if shown.count < live.count { stats.channelRefusals.listsCut += 1 }
            var text = "{\"channels\":["
            text.reserveCapacity(16 + shown.count * (APNsService.channelIdBase64Count + 3))
            for (k, raw) in shown.enumerated() {
                text += k == 0 ? "\"" : ",\""
                text += Base64.encode(raw)
                text += "\""
            }
            return json(200, text + "]}")
        default:
            preconditionFailure()
        }
    }
    /// A channel created or deleted on the worker that serves channel management.
    public func channelChanged(_ raw: [UInt8], bundle: [UInt8], storagePolicy: Int, deleted: Bool) {
        if deleted {
            deleteChannel(raw)
        } else {
            registerChannel(raw, bundle: bundle, storagePolicy: storagePolicy)
        }
    }

    /// The raw id of the `n`th channel created through the API: `fanout-ch-` and `n` in 14 digits, 24 bytes
    /// (32 in base64) whatever `n`, so a new channel's id takes over a deleted one's bytes in the router.
    static func channelId(_ n: Int) -> [UInt8] {
        var raw = Array("fanout-ch-00000000000000".utf8)
        var v = n
        var i = raw.count - 1
        while v > 0 && raw[i] != UInt8(ascii: "-") {
            raw[i] = UInt8(ascii: "0") + UInt8(v % 10)
            v /= 10
            i -= 1
        }
        return raw
    }
    static let channelIdBase64Count = 32

    /// A new channel: in this service's registry and in the router (no subscriber yet).
    func registerChannel(_ raw: [UInt8], bundle: [UInt8], storagePolicy: Int) {
        guard addChannel(raw, bundle: bundle, storagePolicy: storagePolicy) else { return }
        let app = bundle.withUnsafeBytes { pipeline.store.internApp($0) }
        _ = raw.withUnsafeBytes { pipeline.router.registerChannel($0, app: app) }
    }

    /// The registry's side of a channel (the scenario's are in the router from the start). False when the
    /// channel is registered already.
    @discardableResult
    func addChannel(_ raw: [UInt8], bundle: [UInt8], storagePolicy: Int) -> Bool {
        guard channels[raw] == nil else { return false }
        channelSerial += 1
        channels[raw] = Channel(bundle: bundle, storagePolicy: storagePolicy, serial: channelSerial)
        channelOrder[bundle, default: BundleChannels()].serials.append(channelSerial)
        channelOrder[bundle]!.raws.append(raw)
        return true
    }

    /// Removes a live channel everywhere on this worker: the registry, its bundle's list and the router
    /// (at once, or after the pending fan-outs that still target its router id).
    func deleteChannel(_ raw: [UInt8]) {
        guard let channel = channels.removeValue(forKey: raw) else { return }
        if var list = channelOrder.removeValue(forKey: channel.bundle) {
            var low = 0
            var high = list.serials.count
            while low < high {
                let mid = (low + high) / 2
                if list.serials[mid] < channel.serial { low = mid + 1 } else { high = mid }
            }
            if low < list.serials.count && list.serials[low] == channel.serial {
                list.serials.remove(at: low)
                list.raws.remove(at: low)
            }
            if !list.serials.isEmpty { channelOrder[channel.bundle] = list }
        }
        guard let c = raw.withUnsafeBytes({ pipeline.router.channels.lookup($0) }) else { return }
        if pending.contains(where: { $0.channel == c }) {
            dyingChannels.append(c)
        } else {
            pipeline.removeChannel(c)
        }
    }

    /// The channels deleted while fan-outs to them were pending leave the router (those fan-outs have run).
    func releaseDyingChannels() {
        for c in dyingChannels { pipeline.removeChannel(c) }
        dyingChannels.removeAll()
    }
}
