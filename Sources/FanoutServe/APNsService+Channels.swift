import FanoutCore
import FanoutMetrics
import FanoutSim
import FanoutWire
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The channel-management API (create, read, list, delete) and the channel registry every loop keeps.
extension APNsService {

    func channelRequest(_ route: APNsRoute, _ r: RequestInput) -> (H2Response, APNsReason?) {
        let idHeader: H2UniqueHeader
        switch RequestCheck.requestId(r.headers) {
        case .failure(let reason): return failure(reason, id: nil)
        case .success(let id): idHeader = id ?? ids.make("apns-request-id")
        }
        func json(_ status: Int, _ text: String, extra: [(name: String, value: String)] = []) -> (H2Response, APNsReason?) {
            let headers = extra + (text.isEmpty ? [] : [(name: "content-type", value: "application/json")])
            return (H2Response(status: status, id: idHeader, headers: headers, body: Array(text.utf8)), nil)
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
            guard liveChannels[bundle, default: 0] < APNsService.channelsPerApp else { return failure(.cannotCreateChannelConfig, id: idHeader) }
            channelsCreated += 1
            let raw = Array("fanout-channel-\(channelsCreated)".utf8)
            registerChannel(raw, bundle: bundle, storagePolicy: policy)
            if workers > 1 { outgoing.append(.channel(raw: raw, bundle: bundle, storagePolicy: policy, deleted: false)) }
            return json(201, "", extra: [(name: "apns-channel-id", value: Base64.encode(raw))])
        case .readChannel(let bundle), .deleteChannel(let bundle):
            let raw: [UInt8]
            switch RequestCheck.channelId(r.headers) {
            case .failure(let reason): return failure(reason, id: idHeader)
            case .success(let (decoded, _)): raw = decoded
            }
            guard let channel = channels[raw], !channel.deleted, channel.bundle == bundle else {
                return failure(.channelNotRegistered, id: idHeader)
            }
            if case .deleteChannel = route {
                deleteChannel(raw)
                if workers > 1 { outgoing.append(.channel(raw: raw, bundle: bundle, storagePolicy: 0, deleted: true)) }
                return json(204, "")
            }
            return json(200, "{\"message-storage-policy\":\(channel.storagePolicy),\"push-type\":\"LiveActivity\"}")
        case .listChannels(let bundle):
            let ids = channelOrder[bundle, default: []].filter { channels[$0]?.deleted == false }
            return json(200, "{\"channels\":[" + ids.map { "\"\(Base64.encode($0))\"" }.joined(separator: ",") + "]}")
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

    /// A new channel: in this service's registry and in the router (no subscriber yet).
    func registerChannel(_ raw: [UInt8], bundle: [UInt8], storagePolicy: Int) {
        addChannel(raw, bundle: bundle, storagePolicy: storagePolicy)
        let app = bundle.withUnsafeBytes { pipeline.store.internApp($0) }
        _ = raw.withUnsafeBytes { pipeline.router.registerChannel($0, app: app) }
    }

    /// The registry's side of a channel (the scenario's are in the router from the start).
    func addChannel(_ raw: [UInt8], bundle: [UInt8], storagePolicy: Int) {
        channels[raw] = Channel(bundle: bundle, storagePolicy: storagePolicy)
        channelOrder[bundle, default: []].append(raw)
        liveChannels[bundle, default: 0] += 1
    }

    func deleteChannel(_ raw: [UInt8]) {
        guard let channel = channels[raw], !channel.deleted else { return }
        channels[raw]!.deleted = true
        liveChannels[channel.bundle, default: 1] -= 1
    }
}
