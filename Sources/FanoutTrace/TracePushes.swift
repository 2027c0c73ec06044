/// A trace's `push` lines as a client sends them to APNs (`fanout push TARGET TRACE.jsonl`), collected while the
/// trace is replayed (so a trace `fanout replay` refuses is refused here too, with the same line number), and how many
/// lines of each other op it holds. Every string lives in one byte buffer (`bytes`); a push holds ranges into it.
public struct TracePushes: Sendable {
    /// Which of `token`, `channel`, `startToken` the push names.
    public enum Target: UInt8, Sendable {
        case token, channel, startToken
    }

    /// One `push` line. Header values are the bytes sent: a JSON string's unescaped bytes, an integral number in
    /// Int64 range as its decimal digits (`10.0` → `10`), any other value as its JSON text (`true`, `3.5`); nil for
    /// `null` (the header is not sent).
    public struct Push: Sendable {
        /// The line number in the file (1-based; the header is line 1).
        public var line: Int
        /// Milliseconds since the trace's epoch.
        public var atMillis: Int64
        public var target: Target
        /// The token, channel or start token.
        public var address: Range<Int>
        public var pushType: Range<Int>?
        public var topic: Range<Int>?
        public var priority: Range<Int>?
        public var expiration: Range<Int>?
        public var collapseId: Range<Int>?
        public var apnsId: Range<Int>?
        /// The exact payload bytes (`payload`, unescaped): a malformed payload is kept as it is.
        public var payload: Range<Int>
    }

    public var pushes: [Push] = []
    public var bytes: [UInt8] = []
    /// Lines of the file read (the header and blank lines at the end included).
    public var lineCount = 0
    /// The lines of every op other than `push` (`request`, `startToken`, `rotate`, `subscribe`, `dismiss`,
    /// `advance`), zero counts left out.
    public var otherOps: [String: Int] = [:]
    /// The header's `epoch` (UNIX seconds).
    public var epochSeconds: Int64 = 0
    /// Header values stored once each (a trace repeats its topics, priorities and push types on every line).
    private var interned: [[UInt8]: Range<Int>] = [:]

    public init() {}

    /// The bytes of a range of `bytes`.
    public subscript(range: Range<Int>) -> ArraySlice<UInt8> { bytes[range] }

    /// Reads, and replays to check, a whole trace file; a line that cannot be read throws its ``TraceError``.
    public static func read(path: String) throws -> TracePushes {
        let replay = TraceReplay()
        replay.collectedPushes = TracePushes()
        var reader = try LineReader(path: path)
        while try reader.nextLine({ try replay.apply(line: $0) }) {}
        try replay.finish()
        return replay.takeCollectedPushes()
    }

    /// The same for lines held in memory (tests).
    public static func read(text: String) throws -> TracePushes {
        let replay = TraceReplay()
        replay.collectedPushes = TracePushes()
        var lines = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if text.utf8.last == UInt8(ascii: "\n") { lines.removeLast() }
        for line in lines {
            try Array(line).withUnsafeBytes { try replay.apply(line: $0) }
        }
        try replay.finish()
        return replay.takeCollectedPushes()
    }

    /// Appends `value` to `bytes` and returns its range.
    mutating func store(_ value: UnsafeRawBufferPointer) -> Range<Int> {
        let start = bytes.count
        bytes.append(contentsOf: value)
        return start..<bytes.count
    }

    /// A header value, stored once however many lines carry it.
    mutating func intern(_ value: [UInt8]) -> Range<Int> {
        if let range = interned[value] { return range }
        let range = value.withUnsafeBytes { store($0) }
        interned[value] = range
        return range
    }
}
