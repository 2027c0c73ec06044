import FanoutCore
import FanoutMetrics
import FanoutSim
import FanoutWire
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a backend loads (population.jsonl, rotated-tokens.jsonl) and what the loops' token directory is built from.
extension APNsService {

    /// One line per activity, with the fields of docs/INGEST.md §5: what an app would have registered with
    /// its server. Strings are written by `JSONWriter`, as the state dump's are.
    public func populationLines() -> [UInt8] {
        var out: [UInt8] = []
        let store = pipeline.store
        let world = engine.world
        var token: [UInt8] = []
        var name: [UInt8] = []
        for a in 0..<Int32(store.activityCount) {
            let i = Int(a)
            let (d, k) = engine.deviceAndSlot(of: a)
            let source = world.source(device: d, slot: k)
            JSONWriter.append("{\"device\": ", to: &out)
            store.deviceIds.withBytes(store.device[i]) { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append(", \"app\": ", to: &out)
            store.appIds.withBytes(store.app[i]) { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append(", \"activity\": ", to: &out)
            store.activityIds.withBytes(a) { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append(", \"attributes-type\": ", to: &out)
            JSONWriter.appendString(pipeline.schemas[store.schema[i]].name, to: &out)
            token.removeAll(keepingCapacity: true)
            pipeline.router.updateTokens.withBytes(store.token[i]) { token.append(contentsOf: $0) }
            JSONWriter.append(", \"token\": ", to: &out)
            JSONWriter.appendString(APNsService.tokenText(token), to: &out)
            JSONWriter.append(", \"push-to-start-token\": ", to: &out)
            if let start = startTokenOf[APNsService.startTokenKey(device: d, app: store.app[i])] {
                start.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
            } else {
                JSONWriter.append("null", to: &out)
            }
            name.removeAll(keepingCapacity: true)
            world.appendChannelId(source: source, to: &name)
            JSONWriter.append(", \"channel\": ", to: &out)
            if world.sourceIsBroadcast[source] {
                JSONWriter.appendString(Base64.encode(name), to: &out)
            } else {
                JSONWriter.append("null", to: &out)
            }
            // A source's id is its channel's name (`source-NNNNN`), whether it broadcasts or not.
            JSONWriter.append(", \"source\": ", to: &out)
            name.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append("}\n", to: &out)
        }
        return out
    }

    /// One line per update token rotated away at start: the token a backend that missed the rotation would
    /// still push to (answered 410 Unregistered), its activity, and when it stopped being valid.
    public func rotatedTokenLines() -> [UInt8] {
        var out: [UInt8] = []
        for (token, a) in retiredList {
            JSONWriter.append("{\"token\": ", to: &out)
            token.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append(", \"activity\": ", to: &out)
            pipeline.store.activityIds.withBytes(a) { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append(", \"retiredAt\": ", to: &out)
            JSONWriter.appendInt(retired[token] ?? startMillis, to: &out)
            JSONWriter.append("}\n", to: &out)
        }
        return out
    }

    /// The key of a device's push-to-start token for an app: the global device number and the app's id.
    static func startTokenKey(device d: Int, app: Int32) -> Int64 { Int64(d) << 32 | Int64(app) }

    /// The router keeps canonical tokens as bytes behind a tag (see `Router.withTokenKey`): back to hex.
    static func tokenText(_ key: [UInt8]) -> String {
        guard let tag = key.first else { return "" }
        if tag == 1 { return String(decoding: key.dropFirst(), as: UTF8.self) }
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in key.dropFirst() {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Every token this worker answers for (update tokens now and rotated away, push-to-start tokens): the
    /// directory that sends a push to the worker owning its device.
    public func ownedTokens() -> [[UInt8]] {
        var out: [[UInt8]] = []
        let store = pipeline.store
        out.reserveCapacity(store.activityCount + retiredList.count + startTokenOf.count)
        for a in 0..<store.activityCount {
            var key: [UInt8] = []
            pipeline.router.updateTokens.withBytes(store.token[a]) { key.append(contentsOf: $0) }
            out.append(Array(APNsService.tokenText(key).utf8))
        }
        for (token, _) in retiredList { out.append(token) }
        for token in startTokenOf.values { out.append(token) }
        return out
    }
}
