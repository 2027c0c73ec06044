#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One metric's histogram of one finished interval of the log, as spooled: its index, the metric's
/// index (`Metric.rawValue` for `fanout run`), its real start and length in nanoseconds from the log's
/// start (0 and 0 when the interval is `intervalNanos` long by construction, as in `fanout run`), its
/// encoding and its summary.
public struct LoggedInterval: Sendable, Equatable {
    public var index: Int
    public var metricIndex: Int
    public var startNanos: UInt64
    public var lengthNanos: UInt64
    public var bytes: [UInt8]
    public var summary: LatencySummary

    public init(
        index: Int, metricIndex: Int, startNanos: UInt64, lengthNanos: UInt64, bytes: [UInt8], summary: LatencySummary
    ) {
        self.index = index
        self.metricIndex = metricIndex
        self.startNanos = startNanos
        self.lengthNanos = lengthNanos
        self.bytes = bytes
        self.summary = summary
    }

    /// Encodes and summarises a histogram, once.
    public init(index: Int, metricIndex: Int, startNanos: UInt64, lengthNanos: UInt64, histogram: LatencyHistogram) {
        self.init(
            index: index, metricIndex: metricIndex, startNanos: startNanos, lengthNanos: lengthNanos,
            bytes: histogram.encodedCompressed(), summary: LatencySummary(histogram))
    }
}

/// Finished log intervals on disk while the run goes on, read back once at the end: a run's log
/// grows with its length (about 7 MB per 1,000 one-second intervals), its memory should not.
/// An unnamed temporary file: removed as soon as it is created, gone with the descriptor.
public final class IntervalSpool {
    private let fd: Int32
    private var buffer: [UInt8] = []
    /// Intervals appended so far.
    public private(set) var count = 0

    public init() throws {
        let fromEnvironment = getenv("TMPDIR").map { String(cString: $0) } ?? ""
        let directory = fromEnvironment.isEmpty ? "/tmp" : fromEnvironment
        var template = Array("\(directory)/fanout-intervals-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw MetricsError("cannot create the interval spool in \(directory): errno \(errno)")
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Appends one interval of `fanout run`'s metrics.
    public func append(_ interval: MergedInterval) throws {
        try append(
            LoggedInterval(
                index: interval.index, metricIndex: interval.metric.rawValue, startNanos: 0, lengthNanos: 0,
                bytes: interval.bytes, summary: interval.summary))
    }

    /// Appends one interval: index (8 bytes), metric (1), start and length (16), its summary (count,
    /// mean, six values: 64), the encoding's length (4), the encoded histogram.
    public func append(_ interval: LoggedInterval) throws {
        guard (0...255).contains(interval.metricIndex) else {
            throw MetricsError("interval \(interval.index): metric index \(interval.metricIndex) is not 0 to 255")
        }
        IntervalSpool.encode(interval, into: &buffer)
        count += 1
        if buffer.count >= 1 << 16 { try flush() }
    }

    static func encode(_ interval: LoggedInterval, into buffer: inout [UInt8]) {
        func put<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { buffer.append(contentsOf: $0) } }
        put(Int64(interval.index))
        put(UInt8(interval.metricIndex))
        put(interval.startNanos)
        put(interval.lengthNanos)
        let s = interval.summary
        for v in [s.count, s.mean.bitPattern, s.p50, s.p90, s.p99, s.p999, s.p9999, s.max] { put(v) }
        put(UInt32(interval.bytes.count))
        buffer.append(contentsOf: interval.bytes)
    }

    private func flush() throws {
        var offset = 0
        while offset < buffer.count {
            let n = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw MetricsError("cannot write the interval spool: errno \(errno)")
            }
            offset += n
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Every interval of `fanout run`'s metrics written, in order of writing.
    public func readAll() throws -> [MergedInterval] {
        try readAllLogged().map { i in
            guard let metric = Metric(rawValue: i.metricIndex) else {
                throw MetricsError("interval \(i.index): no metric of index \(i.metricIndex)")
            }
            return MergedInterval(index: i.index, metric: metric, bytes: i.bytes, summary: i.summary)
        }
    }

    /// Every interval written, in order of writing.
    public func readAllLogged() throws -> [LoggedInterval] {
        var out: [LoggedInterval] = []
        out.reserveCapacity(count)
        try forEachLogged { out.append($0) }
        return out
    }

    /// Every interval written, in order of writing, handed to `body` one at a time: the file is read
    /// `chunkBytes` at a time, so a long run's log is never in memory at once (`fanout push`'s
    /// latency.hlog is written this way).
    public func forEachLogged(chunkBytes: Int = 1 << 20, _ body: (LoggedInterval) throws -> Void) throws {
        precondition(chunkBytes > 0)
        try flush()
        let size = Int(lseek(fd, 0, SEEK_END))
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: min(chunkBytes, size))
        var offset = 0
        while offset < size {
            let want = min(chunk.count, size - offset)
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, want, off_t(offset)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw MetricsError("cannot read the interval spool: errno \(errno)") }
            offset += n
            pending.append(contentsOf: chunk[0..<n])
            var p = 0
            while let interval = IntervalSpool.record(pending, at: &p) {
                try body(interval)
            }
            pending.removeFirst(p)
        }
        if !pending.isEmpty { _ = try IntervalSpool.decode(pending) }  // throws: the last record is cut short
    }

    /// The intervals of a spool's bytes; a truncated or inconsistent record is a `MetricsError`.
    static func decode(_ bytes: [UInt8]) throws -> [LoggedInterval] {
        var out: [LoggedInterval] = []
        var p = 0
        while p < bytes.count {
            guard let interval = record(bytes, at: &p) else {
                throw MetricsError("interval spool: record \(out.count + 1) is cut short at byte \(bytes.count)")
            }
            out.append(interval)
        }
        return out
    }

    /// A record's bytes before its encoded histogram.
    static let headerBytes = 8 + 1 + 16 + 64 + 4

    /// The record at `p` (moved past it), or nil when `bytes` end before it does (`p` unmoved).
    static func record(_ bytes: [UInt8], at p: inout Int) -> LoggedInterval? {
        guard bytes.count - p >= headerBytes else { return nil }
        var q = p
        func get<T: FixedWidthInteger>(_: T.Type) -> T {
            var v: T = 0
            withUnsafeMutableBytes(of: &v) { $0.copyBytes(from: bytes[q..<q + MemoryLayout<T>.size]) }
            q += MemoryLayout<T>.size
            return T(littleEndian: v)
        }
        let index = Int(get(Int64.self))
        let metric = Int(get(UInt8.self))
        let start = get(UInt64.self)
        let length = get(UInt64.self)
        var v: [UInt64] = []
        for _ in 0..<8 { v.append(get(UInt64.self)) }
        let n = Int(get(UInt32.self))
        guard bytes.count - q >= n else { return nil }
        let summary = LatencySummary(
            count: v[0], mean: Double(bitPattern: v[1]), p50: v[2], p90: v[3], p99: v[4], p999: v[5], p9999: v[6],
            max: v[7])
        p = q + n
        return LoggedInterval(
            index: index, metricIndex: metric, startNanos: start, lengthNanos: length, bytes: Array(bytes[q..<q + n]),
            summary: summary)
    }
}
