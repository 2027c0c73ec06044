import Foundation
import Histogram
import Testing

@testable import FanoutHistogramLog

func makeHistogram(_ values: [UInt64]) -> Histogram<UInt64> {
    var h = Histogram<UInt64>(
        lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000_000,
        numberOfSignificantValueDigits: .three)
    for v in values { _ = h.record(v) }
    return h
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

@Suite("HdrHistogram V2 encoding")
struct HistogramCodecTests {
    /// Produced by the reference implementation HdrHistogram_py 0.10:
    /// `h = HdrHistogram(1, 3600*10**9, 3); [h.record_value(v) for v in (1, 2, 1000, 1500, 10**6, 3*10**9)];
    /// zlib.decompress(base64.b64decode(h.encode())[8:]).hex()`
    static let referenceEncoding =
        "1c84931300000011000000000000000300000000000000010000034630b8a0003ff0000000000000"
        + "010202c90f02e5070287970102e7b70102"

    @Test("the uncompressed encoding matches the reference implementation byte for byte")
    func golden() {
        let h = makeHistogram([1, 2, 1000, 1500, 1_000_000, 3_000_000_000])
        #expect(hex(HistogramCodec.encode(h)) == Self.referenceEncoding)
    }

    @Test("decoding the reference encoding gives the same counts")
    func decodeReference() throws {
        var bytes: [UInt8] = []
        var i = Self.referenceEncoding.startIndex
        while i < Self.referenceEncoding.endIndex {
            let j = Self.referenceEncoding.index(i, offsetBy: 2)
            bytes.append(UInt8(Self.referenceEncoding[i..<j], radix: 16)!)
            i = j
        }
        let h = try HistogramCodec.decode(bytes)
        #expect(h.totalCount == 6)
        #expect(h.valuesAreEquivalent(h.max, 3_000_000_000))
        #expect(h.count(within: 1500...1500) == 1)
    }

    @Test("compressed round trip: encode → decode gives identical counts", arguments: [1, 2, 3, 4, 5])
    func roundTrip(seed: UInt64) throws {
        var state = seed
        var values: [UInt64] = []
        for _ in 0..<5000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            values.append((state >> 20) % (1 << (state % 40 + 1)) + 1)
        }
        let h = makeHistogram(values)
        let back = try HistogramCodec.decode(HistogramCodec.encodeCompressed(h))
        #expect(back.totalCount == h.totalCount)
        #expect(
            Array(back.recordedValues().map { [$0.value, $0.count] })
                == Array(h.recordedValues().map { [$0.value, $0.count] }))
    }

    @Test("an empty histogram and bad input")
    func edges() throws {
        let empty = try HistogramCodec.decode(HistogramCodec.encodeCompressed(makeHistogram([])))
        #expect(empty.totalCount == 0)
        #expect(throws: HistogramCodec.DecodeError.self) { try HistogramCodec.decode([1, 2, 3]) }
        #expect(throws: HistogramCodec.DecodeError.self) {
            try HistogramCodec.decode([0x1c, 0x84, 0x93, 0x14, 0, 0, 0, 4, 1, 2, 3, 4])
        }
    }
}

@Suite("Histogram log 1.3")
struct HistogramLogTests {
    static func sampleLog() -> (String, [String: Histogram<UInt64>]) {
        var writer = HistogramLogWriter(startTimeSeconds: 1_700_000_000)
        var expected: [String: Histogram<UInt64>] = [:]
        for (k, tag) in ["endToEnd", "apply"].enumerated() {
            var values: [UInt64] = []
            for i in 1...20_000 { values.append(UInt64(i * (k + 1) * 997 % 50_000_000 + 1)) }
            let h = makeHistogram(values)
            expected[tag] = h
            writer.append(tag: tag, startSeconds: 0, lengthSeconds: 1, histogram: h)
        }
        return (writer.text, expected)
    }

    @Test("the log reads back with identical histograms")
    func roundTrip() throws {
        let (text, expected) = Self.sampleLog()
        #expect(
            text.hasPrefix(
                "#[Histogram log format version 1.3]\n#[StartTime: 1700000000.000 (seconds since epoch), 2023-11-14T22:13:20Z]\n\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\nTag=endToEnd,0.000,1.000,"
            ))
        let intervals = try HistogramLogReader.read(text)
        #expect(intervals.count == 2)
        for interval in intervals {
            let want = try #require(expected[interval.tag ?? ""])
            #expect(try interval.histogram().totalCount == want.totalCount)
            #expect(try interval.histogram().valueAtPercentile(99) == want.valueAtPercentile(99))
        }
    }

    /// `python3` as found on PATH (the one `make deps` installs HdrHistogram_py into), if any.
    static let python: String? = ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":")
        .map { "\($0)/python3" }.first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(
        "HdrHistogram_py's HistogramLogReader reads the log: same counts and percentiles",
        .enabled(if: python != nil, "python3 is not installed"))
    func pythonInterop() throws {
        let (text, expected) = Self.sampleLog()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlog-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let log = dir.appendingPathComponent("latency.hlog")
        try text.write(to: log, atomically: true, encoding: .utf8)
        let script = """
            import sys
            from hdrh.log import HistogramLogReader
            from hdrh.histogram import HdrHistogram
            reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600 * 10**9, 3))
            while True:
                h = reader.get_next_interval_histogram()
                if h is None:
                    break
                print(h.get_tag(), h.get_total_count(), h.get_value_at_percentile(50), h.get_value_at_percentile(99),
                      h.get_value_at_percentile(99.9))
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python!)
        process.arguments = ["-c", script, log.path]
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(
            process.terminationStatus == 0,
            "python failed (is `pip install hdrhistogram` done? make deps does it): \(errors)")
        let lines = output.split(separator: "\n")
        #expect(lines.count == 2)
        for line in lines {
            let f = line.split(separator: " ").map(String.init)
            let want = try #require(expected[f[0]])
            #expect(UInt64(f[1]) == want.totalCount)
            // Within the histogram's precision: the same equivalent-value bucket.
            for (text, percentile) in zip(f[2...4], [50.0, 99.0, 99.9]) {
                #expect(
                    want.valuesAreEquivalent(UInt64(text)!, want.valueAtPercentile(percentile)),
                    "\(f[0]) p\(percentile): python \(text), ours \(want.valueAtPercentile(percentile))")
            }
        }
    }
}
