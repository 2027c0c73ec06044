import FanoutAPNs
import FanoutCore
import FanoutMetrics
import FanoutTrace

/// What `fanout serve` writes from its live services at the end, apart from the report (FanoutReport renders that
/// from a `ServeResults`): state.jsonl, in the trace state-dump format (docs/TRACE.md, FanoutTrace's `StateDump`).
public enum ServeState {
    /// state.jsonl at `path`: what users see at `nowMillis` (the trace state-dump format), streamed to disk as it
    /// is produced (chunks of `StreamedFile.chunkBytes`, a temporary name renamed into place; nothing under `path`
    /// if a write fails). Several workers: their dumps merged (lines sorted as one dump sorts them, one totals
    /// line). `detail` `.summary`: the totals line alone; `.none`: no file (any earlier one is left as it is).
    /// `progress` counts the bytes written; returns their number.
    @discardableResult
    public static func write(
        services: [APNsService], nowMillis: Int64, path: String, detail: ServeResults.StateDetail = .full,
        progress: ProgressCounter? = nil
    ) throws -> Int {
        if detail == .none { return 0 }
        let file = try StreamedFile(path: path, progress: progress)
        var chunk: [UInt8] = []
        chunk.reserveCapacity(StreamedFile.chunkBytes + StreamedFile.chunkBytes / 4)
        let size = StreamedFile.chunkBytes
        if detail == .summary {
            var accounting = Accounting()
            for s in services { accounting += s.pipeline.accounting }
            chunk = StateDump.totalsLine(accounting)
        } else if services.count == 1 {
            try StateDump.write(services[0].pipeline, nowMillis: nowMillis, to: &chunk, chunkBytes: size) {
                try file.write(&$0)
            }
        } else {
            var accounting = Accounting()
            for s in services { accounting += s.pipeline.accounting }
            try StateDump.writeMerged(
                services.map(\.pipeline), totals: accounting, nowMillis: nowMillis, to: &chunk, chunkBytes: size
            ) { try file.write(&$0) }
        }
        try file.write(&chunk)
        try file.commit()
        return file.bytesWritten
    }
}

extension ServeResults {
    /// The results of a run served by several workers, once their loops have returned: their counts added
    /// (answers and findings, the devices' accounting), their measurements merged interval by interval
    /// (`ServeMeasurements`, shared by the workers). A measurement that could not be merged or stored is thrown.
    public init(
        _ info: Info, services: [APNsService], connections: ConnectionStats, bytes: (read: Int, written: Int),
        elapsedSeconds: Double
    ) throws(MetricsError) {
        let measured = try services[0].measurements.finish()
        self.init(
            info, services: services, measured: measured, connections: connections, bytes: bytes,
            elapsedSeconds: elapsedSeconds)
    }

    /// The same with the measurements already read back (`measured`: the totals and every interval).
    public init(
        _ info: Info, services: [APNsService], measured: (totals: LatencyRecorder, intervals: [LoggedInterval]),
        connections: ConnectionStats, bytes: (read: Int, written: Int), elapsedSeconds: Double
    ) {
        var stats = ServeStats()
        var accounting = Accounting()
        for s in services {
            stats += s.stats
            accounting += s.pipeline.accounting
        }
        self.init(
            info: info, stats: stats, accounting: accounting, latency: measured.totals, intervals: measured.intervals,
            connections: connections, bytes: bytes, elapsedSeconds: elapsedSeconds)
    }
}
