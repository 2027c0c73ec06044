import FanoutHistogramLog
import FanoutMetrics
import Foundation

/// Every file of a run folder, rendered from a report.
public enum RunFiles {
    /// File name → contents: summary.json, summary.md, report.html, latency.hlog, one `.hgrm` per
    /// metric that has values and, for one shard of a sharded run, completion.tsv.
    public static func all(_ r: RunReport) -> [String: String] {
        var files = [
            "summary.json": SummaryJSON.text(r),
            "summary.md": SummaryMarkdown.text(r),
            "report.html": HTMLReport.render(r),
            "latency.hlog": histogramLog(r),
        ]
        for metric in Metric.allCases where r[metric].totalCount > 0 {
            files["\(metric.fileName).hgrm"] = percentileDistribution(r, metric)
        }
        if r.info.shard != nil, let completion = r.completion {
            files[CompletionFile.name] = CompletionFile.text(completion)
        }
        return files
    }

    /// `latency.hlog`: every metric, one interval per second of run time (per simulated minute in
    /// virtual time), tagged with the metric's file name.
    public static func histogramLog(_ r: RunReport) -> String {
        var writer = HistogramLogWriter(startTimeSeconds: (r.info.startedAtSeconds * 1000).rounded() / 1000)
        let length = Double(r.intervalNanos) / 1e9
        for interval in r.intervals {
            writer.append(
                tag: interval.metric.fileName, startSeconds: Double(interval.index) * length,
                lengthSeconds: length, compressed: interval.bytes, maxValue: interval.maxNanos)
        }
        return writer.text
    }

    /// `<metric>.hgrm`: HdrHistogram's percentile distribution, values in microseconds (as wrk2).
    public static func percentileDistribution(_ r: RunReport, _ metric: Metric) -> String {
        var text =
            "#[fanout \(metric.name) (\(r.info.scenario), seed \(r.info.seed), config \(r.info.configHash)): "
            + "values in microseconds (us), recorded in nanoseconds]\n"
        text += PercentileText.distribution(r[metric], scale: 1000)
        return text
    }

    /// Writes file `name` into `folder` (created if needed) a piece at a time: `produce` hands each piece to the
    /// function it is given. Through a temporary name in the folder, renamed into place once whole (a failed or
    /// killed write leaves no file of that name).
    public static func write(
        folder: String, name: String, produce: ((String) throws -> Void) throws -> Void
    ) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = (folder as NSString).appendingPathComponent(name)
        let temporary = (folder as NSString).appendingPathComponent(".\(name).\(getpid()).tmp")
        guard FileManager.default.createFile(atPath: temporary, contents: nil),
            let handle = FileHandle(forWritingAtPath: temporary)
        else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: temporary]) }
        do {
            try produce { piece in try handle.write(contentsOf: Data(piece.utf8)) }
            try handle.close()
        } catch {
            try? handle.close()
            unlink(temporary)
            throw error
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw CocoaError(
                .fileWriteUnknown,
                userInfo: [NSFilePathErrorKey: path, NSUnderlyingErrorKey: POSIXError(POSIXErrorCode(rawValue: code)!)])
        }
    }

    /// Writes the files into `folder` (created if needed): `FolderFiles.write` (FanoutMetrics).
    public static func write(folder: String, files: [String: String], last: String = "summary.json") throws {
        try FolderFiles.write(folder: folder, files: files, last: last)
    }
}

/// HdrHistogram's percentile distribution text (`outputPercentileDistribution`, the `.hgrm` format
/// wrk2 prints and HdrHistogram's plotters read), from `LatencyHistogram.percentileSteps`: one pass
/// over the counts.
public enum PercentileText {
    public static func distribution(_ h: LatencyHistogram, scale: Double, ticksPerHalfDistance: Int = 5) -> String {
        func padded(_ s: String, _ width: Int) -> String {
            s.count < width ? String(repeating: " ", count: width - s.count) + s : s
        }
        var text = "\(padded("Value", 12)) \(padded("Percentile", 14)) \(padded("TotalCount", 10)) "
        text += "\(padded("1/(1-Percentile)", 14))\n\n"
        for step in h.percentileSteps(ticksPerHalfDistance: ticksPerHalfDistance) {
            if step.percentile != 100 {
                text += String(
                    format: "%12.3f %2.12f %10d %14.2f\n", Double(step.value) / scale, step.percentile / 100,
                    step.totalCount, 1 / (1 - step.percentile / 100))
            } else {
                text += String(
                    format: "%12.3f %2.12f %10d\n", Double(step.value) / scale, step.percentile / 100, step.totalCount)
            }
        }
        let (mean, deviation) = h.meanAndDeviation
        text += String(format: "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", mean / scale, deviation / scale)
        text += String(format: "#[Max     = %12.3f, Total count    = %12d]\n", Double(h.max) / scale, h.totalCount)
        text += String(format: "#[Buckets = %12d, SubBuckets     = %12d]\n", 32, 2048)
        return text
    }
}
