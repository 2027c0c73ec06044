import FanoutCore
import FanoutMetrics
import FanoutSim

/// What a backend loads (population.jsonl, rotated-tokens.jsonl) and what the loops' token directory is built from.
extension APNsService {

    /// One line per activity, with the fields of docs/INGEST.md §5: what an app would have registered with
    /// its server; then one per activity a kickoff will start (`kickoffLine`). Strings are written by `JSONWriter`,
    /// as the state dump's are.
    public func populationLines() -> [UInt8] {
        Self.whole { appendPopulation(to: &$0, chunkBytes: .max, flush: $1) }
    }

    /// The population's lines (those of the activities built at start), appended to `out`; whenever `out` holds
    /// `chunkBytes` or more it is handed to `flush` (which writes and empties it). Nothing is allocated per line.
    public func appendPopulation(
        to out: inout [UInt8], chunkBytes: Int, flush: (inout [UInt8]) throws -> Void
    ) rethrows {
        // Read once: each read through the pipeline is a copy (a retain per column), once per line adds up.
        let store = pipeline.store
        let tokens = pipeline.router.updateTokens
        let types = quotedTypeNames()
        let world = engine.world
        var token: [UInt8] = []
        var name: [UInt8] = []
        var encoded: [UInt8] = []
        try forEachPopulationLine { a, d, source, startToken in
            let i = Int(a)
            let lineStart = out.count
            JSONWriter.append(PopulationLine.device, to: &out)
            store.deviceIds.withBytes(store.device[i]) { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append(PopulationLine.app, to: &out)
            store.appIds.withBytes(store.app[i]) { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append(PopulationLine.activity, to: &out)
            store.activityIds.withBytes(a) { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append(PopulationLine.type, to: &out)
            out.append(contentsOf: types[Int(store.schema[i])])
            token.removeAll(keepingCapacity: true)
            tokens.withBytes(store.token[i]) { WorkerEngine.appendTokenText($0, to: &token) }
            JSONWriter.append(PopulationLine.token, to: &out)
            let tokenStart = out.count
            token.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
            let tokenEnd = out.count
            JSONWriter.append(PopulationLine.startToken, to: &out)
            if startToken {
                token.removeAll(keepingCapacity: true)
                world.appendToken(device: d, slot: 0xFFFF, generation: 0, to: &token)
                token.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
            } else {
                JSONWriter.append("null", to: &out)
            }
            name.removeAll(keepingCapacity: true)
            world.appendChannelId(source: source, to: &name)
            JSONWriter.append(PopulationLine.channel, to: &out)
            if world.sourceIsBroadcast[source] {
                encoded.removeAll(keepingCapacity: true)
                Base64.append(encoding: name, to: &encoded)
                encoded.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
            } else {
                JSONWriter.append("null", to: &out)
            }
            // A source's id is its channel's name (`source-NNNNN`), whether it broadcasts or not.
            JSONWriter.append(PopulationLine.source, to: &out)
            name.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append(PopulationLine.end, to: &out)
            keepRotationLine(a, out, lineStart: lineStart, token: tokenStart..<tokenEnd)
            if out.count >= chunkBytes { try flush(&out) }
        }
        // Then the activities a kickoff will start: the device's push-to-start token and the source, nothing else.
        for k in kickoff.list.indices {
            out.append(contentsOf: kickoffLine(Int32(k), started: false))
            if out.count >= chunkBytes { try flush(&out) }
        }
    }

    /// Each activity built at start, in order, with what its population line says besides the store's columns:
    /// its device, the source it follows, and whether it carries its device's push-to-start token (a device's
    /// push-to-start token is for the app of its first activity; its activities are consecutive). The one walk
    /// behind `appendPopulation` and `populationByteCount`.
    func forEachPopulationLine(_ body: (_ a: Int32, _ device: Int, _ source: Int, _ startToken: Bool) throws -> Void)
        rethrows
    {
        let app = pipeline.store.app
        let world = engine.world
        let sources = engine.sourcesOfActivities()
        var previousDevice = -1
        var startApp: Int32 = -1
        for a in 0..<Int32(engine.activityCount) {
            let i = Int(a)
            let (d, k) = engine.deviceAndSlot(of: a)
            if d != previousDevice {
                previousDevice = d
                startApp = app[i]
            }
            try body(a, d, sources[i] >= 0 ? Int(sources[i]) : world.source(device: d, slot: k), app[i] == startApp)
        }
    }

    /// Each schema's `attributes-type` name as a JSON string, by schema id.
    func quotedTypeNames() -> [[UInt8]] {
        pipeline.schemas.schemas.map { schema in
            var name: [UInt8] = []
            JSONWriter.appendString(schema.name, to: &name)
            return name
        }
    }

    /// The bytes `appendPopulation` writes, counted without writing them (a loop's part of population.jsonl then
    /// goes straight to its place in the file): each line's fixed text and its strings' quoted lengths (a string
    /// with a byte JSON escapes is escaped into a scratch buffer to be counted).
    public func populationByteCount() -> Int {
        let store = pipeline.store
        let world = engine.world
        var total = 0
        var scratch: [UInt8] = []
        func quoted(_ bytes: UnsafeRawBufferPointer) -> Int {
            guard bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                return bytes.count + 2
            }
            scratch.removeAll(keepingCapacity: true)
            JSONWriter.appendString(bytes, to: &scratch)
            return scratch.count
        }
        let typeBytes = quotedTypeNames().map(\.count)
        let tokens = pipeline.router.updateTokens
        var name: [UInt8] = []
        forEachPopulationLine { a, _, source, startToken in
            let i = Int(a)
            total += PopulationLine.fixedBytes + typeBytes[Int(store.schema[i])]
            total += store.deviceIds.withBytes(store.device[i]) { quoted($0) }
            total += store.appIds.withBytes(store.app[i]) { quoted($0) }
            total += store.activityIds.withBytes(a) { quoted($0) }
            total += tokens.withBytes(store.token[i]) { key in
                guard key.first == 1 else { return 2 * (key.count - 1) + 2 }  // hex digits
                return quoted(UnsafeRawBufferPointer(rebasing: key.dropFirst()))
            }
            total += startToken ? World.tokenBytes + 2 : 4
            name.removeAll(keepingCapacity: true)
            world.appendChannelId(source: source, to: &name)
            total += world.sourceIsBroadcast[source] ? (name.count + 2) / 3 * 4 + 2 : 4
            total += name.count + 2  // `source-NNNNN`: nothing to escape
        }
        for k in kickoff.list.indices { total += kickoffLine(Int32(k), started: false).count }
        return total
    }

    /// One line per update token rotated away at start: the token a backend that missed the rotation would
    /// still push to (answered 410 Unregistered), its activity, and when it stopped being valid.
    public func rotatedTokenLines() -> [UInt8] {
        Self.whole { appendRotatedTokens(to: &$0, chunkBytes: .max, flush: $1) }
    }

    /// The rotated tokens' lines, appended to `out` and handed to `flush` as `appendPopulation` does.
    public func appendRotatedTokens(
        to out: inout [UInt8], chunkBytes: Int, flush: (inout [UInt8]) throws -> Void
    ) rethrows {
        for (token, a) in retiredList {
            JSONWriter.append("{\"token\": ", to: &out)
            token.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append(", \"activity\": ", to: &out)
            pipeline.store.activityIds.withBytes(a) { JSONWriter.appendString($0, to: &out) }
            JSONWriter.append(", \"retiredAt\": ", to: &out)
            JSONWriter.appendInt(retired[token] ?? startMillis, to: &out)
            JSONWriter.append("}\n", to: &out)
            if out.count >= chunkBytes { try flush(&out) }
        }
    }

    /// The directory hash (`TokenDirectory.hash`) of every token this worker answers for: update tokens now and
    /// rotated away, push-to-start tokens. The directory sends a push to the worker owning its device.
    public func ownedTokenHashes() -> [UInt64] {
        var out: [UInt64] = []
        let store = pipeline.store
        let world = engine.world
        out.reserveCapacity(engine.activityCount * 6 / 5 + retiredList.count)
        let tokens = pipeline.router.updateTokens
        var text: [UInt8] = []
        var previousDevice = -1
        for a in 0..<Int32(engine.activityCount) {
            text.removeAll(keepingCapacity: true)
            tokens.withBytes(store.token[Int(a)]) { WorkerEngine.appendTokenText($0, to: &text) }
            out.append(text.withUnsafeBytes { TokenDirectory.hash($0) })
            let d = engine.deviceAndSlot(of: a).device
            if d != previousDevice {  // the device's push-to-start token
                previousDevice = d
                text.removeAll(keepingCapacity: true)
                world.appendToken(device: d, slot: 0xFFFF, generation: 0, to: &text)
                out.append(text.withUnsafeBytes { TokenDirectory.hash($0) })
            }
        }
        for (token, _) in retiredList { out.append(token.withUnsafeBytes { TokenDirectory.hash($0) }) }
        // Tokens a rotation while serving will mint (drawn at build): they route here from the start.
        out.append(contentsOf: rotationTokenHashes)
        // Kickoff's push-to-start tokens and the update tokens of the activities it will start.
        out.append(contentsOf: kickoff.tokenHashes)
        return out
    }

    /// What an `append…(to:chunkBytes:flush:)` writes, in one array (never flushed).
    static func whole(_ append: (inout [UInt8], (inout [UInt8]) -> Void) -> Void) -> [UInt8] {
        var out: [UInt8] = []
        append(&out) { _ in }
        return out
    }
}

/// The fixed text of a population.jsonl line, shared by the writer and the byte count.
enum PopulationLine {
    static let device: StaticString = "{\"device\": "
    static let app: StaticString = ", \"app\": "
    static let activity: StaticString = ", \"activity\": "
    static let type: StaticString = ", \"attributes-type\": "
    static let token: StaticString = ", \"token\": "
    static let startToken: StaticString = ", \"push-to-start-token\": "
    static let channel: StaticString = ", \"channel\": "
    static let source: StaticString = ", \"source\": "
    static let end: StaticString = "}\n"

    /// Every fixed piece of one line together.
    static let fixedBytes = [device, app, activity, type, token, startToken, channel, source, end]
        .reduce(0) { $0 + $1.utf8CodeUnitCount }
}
