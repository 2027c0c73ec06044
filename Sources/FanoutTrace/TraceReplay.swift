import FanoutCore

/// Replays a trace on the virtual clock (TRACE.md): each line is read and checked completely, then
/// applied to a `Pipeline`, so an unreadable line stops the replay with nothing half-applied.
public final class TraceReplay {
    public private(set) var header: TraceHeader?
    public private(set) var pipeline: Pipeline?
    /// The clock of the last line, in UNIX milliseconds.
    public private(set) var nowMillis: Int64 = 0
    /// Lines read so far (including the header and blank lines).
    public private(set) var lineCount = 0
    private var lastAt: Int64 = 0
    private var firstBlankLine: Int?
    private var scanner = JSONTape()
    /// The current line as scanned, read with its bytes: set by `apply(line:)` while it holds them, reset
    /// before it returns (no pointer to a line outlives the call that lends it).
    private var tape = JSONDocument()
    /// Unescaped strings of the current line, back to back.
    private var scratch: [UInt8] = []
    private var record: [UInt8] = []
    private var slots: [Int32] = []
    /// When set, every push line is collected into it as sent to APNs, and the other ops are counted
    /// (`TracePushes.read`).
    var collectedPushes: TracePushes?

    public init() {
        scratch.reserveCapacity(8192)
    }

    /// Replays a whole file.
    public static func replay(path: String) throws -> TraceReplay {
        let replay = TraceReplay()
        var reader = try LineReader(path: path)
        while try reader.nextLine({ try replay.apply(line: $0) }) {}
        try replay.finish()
        return replay
    }

    /// Replays lines held in memory (tests).
    public static func replay(text: String) throws -> TraceReplay {
        let replay = TraceReplay()
        var lines = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if text.utf8.last == UInt8(ascii: "\n") { lines.removeLast() }
        for line in lines {
            try Array(line).withUnsafeBytes { try replay.apply(line: $0) }
        }
        try replay.finish()
        return replay
    }

    /// Checks the end of the trace: it must have a header.
    public func finish() throws(TraceError) {
        if header == nil { throw TraceError(line: max(lineCount, 1), "empty trace: expected a header line") }
    }

    /// Reads and applies the next line of the trace.
    public func apply(line raw: UnsafeRawBufferPointer) throws(TraceError) {
        lineCount += 1
        var line = raw
        if line.last == UInt8(ascii: "\r") { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) {
            // Blank lines are allowed only at the end of the file.
            if firstBlankLine == nil { firstBlankLine = lineCount }
            return
        }
        if let blank = firstBlankLine { throw TraceError(line: blank, "blank line before the end of the trace") }
        if let offset = scanner.scan(line) {
            if !JSONTape.isValidUTF8(line) { throw fail("invalid UTF-8") }
            throw fail("invalid JSON at byte \(offset + 1)")
        }
        tape = scanner.reading(line)
        defer { tape = JSONDocument() }
        guard let pipeline else {
            header = try TraceHeader(tape: tape)
            pipeline = Pipeline(schemas: header!.schemas, rules: header!.rules)
            nowMillis = header!.epochSeconds * 1000
            collectedPushes?.epochSeconds = header!.epochSeconds
            return
        }
        guard tape[0].kind == .object else { throw fail("expected a JSON object") }
        let at = try integer("at")
        if at < 0 { throw fail("field at: negative (\(at))") }
        if at < lastAt { throw fail("field at: \(at) is earlier than the line before (\(lastAt))") }
        scratch.removeAll(keepingCapacity: true)
        let op = try string("op")
        let now = header!.epochSeconds * 1000 + at
        let kind = withScratch({ Op(op.bytes($0)) })
        if collectedPushes != nil, let kind, kind != .push { collectedPushes!.otherOps[kind.rawValue, default: 0] += 1 }
        switch kind {
        case .push: try push(pipeline, now: now, at: at)
        case .request: try request(pipeline, now: now)
        case .startToken: try startToken(pipeline)
        case .rotate: try rotate(pipeline)
        case .subscribe: try subscribe(pipeline)
        case .dismiss: try dismiss(pipeline, now: now)
        case .advance: break
        case nil: throw fail("field op: unknown op \"\(op.string(scratch))\"")
        }
        lastAt = at
        nowMillis = now
    }

    // MARK: Operations

    private func request(_ pipeline: Pipeline, now: Int64) throws(TraceError) {
        let device = try string("device")
        let app = try string("app")
        let activity = try string("activity")
        let type = try string("type")
        _ = try object("attributes")
        let state = try object("state")
        let staleDate = try optionalNumber("staleDate")
        let relevance = try optionalNumber("relevance") ?? 0
        let token = try string("token")
        let channel = try optionalString("channel")
        guard let schema = withScratch({ pipeline.schemas.id(named: type.bytes($0)) }) else {
            throw fail("field type: no schema named \"\(type.string(scratch))\" in the header")
        }
        record.removeAll(keepingCapacity: true)
        guard pipeline.schemas[schema].decode(tape: tape, object: state, into: &record, slots: &slots) else {
            throw fail("field state: does not decode as \(pipeline.schemas[schema].name)")
        }
        if withScratch({ pipeline.store.activityIds.lookup(activity.bytes($0)) }) != nil {
            throw fail("field activity: activity \"\(activity.string(scratch))\" already exists")
        }
        if withScratch({ pipeline.router.activity(holding: token.bytes($0)) }) != nil {
            throw fail("field token: update token \"\(token.string(scratch))\" already exists")
        }
        scratch.withUnsafeBytes { s in
            record.withUnsafeBytes { content in
                _ = pipeline.request(
                    id: activity.bytes(s), device: device.bytes(s), app: app.bytes(s), schema: schema,
                    content: content, staleDate: staleDate, relevance: relevance, token: token.bytes(s),
                    channel: channel?.bytes(s), nowMillis: now)
            }
        }
    }

    private func startToken(_ pipeline: Pipeline) throws(TraceError) {
        let device = try string("device")
        let app = try string("app")
        let token = try string("token")
        let heldElsewhere = withScratch { s in
            guard let holder = pipeline.router.holder(ofStartToken: token.bytes(s)) else { return false }
            return pipeline.store.deviceIds.lookup(device.bytes(s)) != holder.device
                || pipeline.store.appIds.lookup(app.bytes(s)) != holder.app
        }
        if heldElsewhere {
            throw fail("field token: start token \"\(token.string(scratch))\" is held by another device or app")
        }
        scratch.withUnsafeBytes { s in
            pipeline.setStartToken(device: device.bytes(s), app: app.bytes(s), token: token.bytes(s))
        }
    }

    private func push(_ pipeline: Pipeline, now: Int64, at: Int64) throws(TraceError) {
        var targets: [(TargetKind, Slice)] = []
        for (key, kind) in [("token", TargetKind.token), ("channel", .channel), ("startToken", .startToken)] {
            let index = key.utf8.withContiguousStorageIfAvailable { tape.member(0, UnsafeRawBufferPointer($0)) }!
            if index < 0 || tape[index].kind == .null { continue }
            guard tape[index].kind == .string else { throw fail("field \(key): expected a string") }
            targets.append((kind, unescape(index)))
        }
        guard targets.count == 1 else {
            throw fail("a push needs exactly one of token, channel, startToken (found \(targets.count))")
        }
        let (kind, target) = targets[0]
        let pushType = try header("pushType")
        let topic = try header("topic")
        let priority = try header("priority")
        let expiration = try header("expiration")
        let collapseId = try header("collapseId")
        let apnsId = try header("apnsId")
        let payload = try string("payload")
        var newActivity: Slice?
        var newToken: Slice?
        if kind == .startToken {
            newActivity = try string("newActivity")
            newToken = try string("newToken")
            if withScratch({ pipeline.store.activityIds.lookup(newActivity!.bytes($0)) }) != nil {
                throw fail("field newActivity: activity \"\(newActivity!.string(scratch))\" already exists")
            }
            if withScratch({ pipeline.router.activity(holding: newToken!.bytes($0)) }) != nil {
                throw fail("field newToken: update token \"\(newToken!.string(scratch))\" already exists")
            }
        }
        if collectedPushes != nil { collect(kind: kind, target: target, payload: payload, at: at) }
        scratch.withUnsafeBytes { s in
            let headers = PushHeaders(
                pushType: pushType.value(s), topic: topic.value(s), priority: priority.value(s),
                expiration: expiration.value(s), collapseId: collapseId.value(s), apnsId: apnsId.value(s))
            pipeline.push(
                kind: kind, target: target.bytes(s), headers: headers, payload: payload.bytes(s), nowMillis: now,
                newActivity: newActivity?.bytes(s), newToken: newToken?.bytes(s))
        }
    }

    /// The current push line into `collectedPushes`, its header values as they go on the wire (`TracePushes.Push`).
    private func collect(kind: TargetKind, target: Slice, payload: Slice, at: Int64) {
        var pushes = collectedPushes!
        collectedPushes = nil
        defer { collectedPushes = pushes }
        func value(_ key: StaticString) -> Range<Int>? {
            let i = tape.member(0, key)
            switch tape[i].kind {
            case .null: return nil
            case .string:
                var bytes: [UInt8] = []
                tape.appendUnescaped(i, to: &bytes)
                return pushes.intern(bytes)
            case .number:
                if let integer = tape.int64(i) { return pushes.intern(Array(String(integer).utf8)) }
                return pushes.intern(Array(tape.rawBytes(i)))
            default:
                return pushes.intern(Array(tape.rawBytes(i)))
            }
        }
        let targetKind: TracePushes.Target = kind == .token ? .token : kind == .channel ? .channel : .startToken
        let address = withScratch { pushes.store(target.bytes($0)) }
        let body = withScratch { pushes.store(payload.bytes($0)) }
        pushes.pushes.append(TracePushes.Push(
            line: lineCount, atMillis: at, target: targetKind, address: address, pushType: value("pushType"),
            topic: value("topic"), priority: value("priority"), expiration: value("expiration"),
            collapseId: value("collapseId"), apnsId: value("apnsId"), payload: body))
    }

    /// The pushes collected (`collectedPushes`), with the count of lines read.
    func takeCollectedPushes() -> TracePushes {
        var pushes = collectedPushes ?? TracePushes()
        pushes.lineCount = lineCount
        collectedPushes = nil
        return pushes
    }

    private func rotate(_ pipeline: Pipeline) throws(TraceError) {
        let activity = try string("activity")
        let token = try string("token")
        guard let a = withScratch({ pipeline.store.activityIds.lookup(activity.bytes($0)) }) else { return }
        if let holder = withScratch({ pipeline.router.activity(holding: token.bytes($0)) }) {
            if holder == a { return }
            throw fail("field token: update token \"\(token.string(scratch))\" already exists")
        }
        scratch.withUnsafeBytes { pipeline.rotate(a, token: token.bytes($0)) }
    }

    private func subscribe(_ pipeline: Pipeline) throws(TraceError) {
        let activity = try string("activity")
        let channel = try string("channel")
        guard let a = withScratch({ pipeline.store.activityIds.lookup(activity.bytes($0)) }) else { return }
        scratch.withUnsafeBytes { pipeline.subscribe(a, channel: channel.bytes($0)) }
    }

    private func dismiss(_ pipeline: Pipeline, now: Int64) throws(TraceError) {
        let activity = try string("activity")
        guard let a = withScratch({ pipeline.store.activityIds.lookup(activity.bytes($0)) }) else { return }
        pipeline.dismiss(a, nowMillis: now)
    }

    // MARK: Fields of the current line

    /// A string of the current line, unescaped into `scratch`.
    struct Slice {
        var range: Range<Int>

        func bytes(_ base: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(rebasing: base[range])
        }

        func string(_ scratch: [UInt8]) -> String { String(decoding: scratch[range], as: UTF8.self) }
    }

    /// A push header value, judged later by validation.
    enum HeaderSlot {
        case null
        case string(Slice)
        case integer(Int64)
        case other

        func value(_ base: UnsafeRawBufferPointer) -> HeaderValue {
            switch self {
            case .null: .null
            case .string(let slice): .string(slice.bytes(base))
            case .integer(let value): .integer(value)
            case .other: .other
            }
        }
    }

    private func fail(_ message: String) -> TraceError { TraceError(line: lineCount, message) }

    private func index(_ key: String) throws(TraceError) -> Int {
        let index = key.utf8.withContiguousStorageIfAvailable { tape.member(0, UnsafeRawBufferPointer($0)) }!
        if index < 0 { throw fail("missing field \(key)") }
        return index
    }

    private func unescape(_ index: Int) -> Slice {
        let start = scratch.count
        tape.appendUnescaped(index, to: &scratch)
        return Slice(range: start..<scratch.count)
    }

    private func string(_ key: String) throws(TraceError) -> Slice {
        let i = try index(key)
        guard tape[i].kind == .string else { throw fail("field \(key): expected a string") }
        return unescape(i)
    }

    private func optionalString(_ key: String) throws(TraceError) -> Slice? {
        let i = try index(key)
        if tape[i].kind == .null { return nil }
        guard tape[i].kind == .string else { throw fail("field \(key): expected a string or null") }
        return unescape(i)
    }

    private func integer(_ key: String) throws(TraceError) -> Int64 {
        let i = try index(key)
        guard tape[i].kind == .number else { throw fail("field \(key): expected an integer") }
        guard let value = tape.int64(i), abs(value) < 1 << 52 else {
            throw fail("field \(key): expected an integer, found \(String(decoding: tape.rawBytes(i), as: UTF8.self))")
        }
        return value
    }

    private func optionalNumber(_ key: String) throws(TraceError) -> Double? {
        let i = try index(key)
        if tape[i].kind == .null { return nil }
        guard let value = tape.double(i) else { throw fail("field \(key): expected a number or null") }
        return value
    }

    private func object(_ key: String) throws(TraceError) -> Int {
        let i = try index(key)
        guard tape[i].kind == .object else { throw fail("field \(key): expected an object") }
        return i
    }

    private func header(_ key: String) throws(TraceError) -> HeaderSlot {
        let i = try index(key)
        switch tape[i].kind {
        case .null: return .null
        case .string: return .string(unescape(i))
        case .number: return tape.int64(i).map { .integer($0) } ?? .other
        default: return .other
        }
    }

    /// Runs `body` with the unescaped strings of the current line.
    private func withScratch<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        scratch.withUnsafeBytes(body)
    }

    enum Op: String {
        case push, request, startToken, rotate, subscribe, dismiss, advance

        init?(_ bytes: UnsafeRawBufferPointer) {
            self.init(rawValue: String(decoding: bytes, as: UTF8.self))
        }
    }
}
