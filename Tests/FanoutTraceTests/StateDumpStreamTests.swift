import FanoutCore
import FanoutTrace
import Foundation
import Testing

/// The state dump written in chunks (`StateDump.write`) and several pipelines' dumps merged as it is written
/// (`StateDump.writeMerged`), against the whole dump rendered at once and against the merge `fanout serve` did
/// before it streamed: every dump rendered, its lines split, the activity lines and the device lines each sorted as
/// text, one totals line.
@Suite("StateDump: written in chunks, several pipelines merged as one dump")
struct StateDumpStreamTests {
    /// A replayed trace whose activities live on the given devices; ids as given (some with bytes JSON escapes or
    /// that sort below `"`), an update to each, one ended.
    static func replay(_ activities: [(activity: String, device: String)]) throws -> TraceReplay {
        var t = Trace()
        for (k, a) in activities.enumerated() {
            t.request(1 + k, a.activity, device: a.device, relevance: Double(k) / 4, token: tok(a.activity + "#"))
        }
        for (k, a) in activities.enumerated() {
            t.push(100 + k, .token(tok(a.activity + "#")), update(10 + k, ["home": k, "away": 1]))
        }
        if let first = activities.first { t.push(500, .token(tok(first.activity + "#")), end(600)) }
        t.advance(1_000)
        return try t.run()
    }

    /// What serve did before it streamed: the dumps rendered, their lines sorted as text, one totals line.
    static func reference(_ replays: [TraceReplay]) -> [UInt8] {
        var activities: [Substring] = []
        var devices: [Substring] = []
        var totals = Accounting()
        for r in replays {
            totals += r.pipeline!.accounting
            let text = String(decoding: StateDump.render(r.pipeline!, nowMillis: r.nowMillis), as: UTF8.self)
            for line in text.split(separator: "\n") {
                if line.hasPrefix("{\"activity\"") {
                    activities.append(line)
                } else if line.hasPrefix("{\"device\"") {
                    devices.append(line)
                }
            }
        }
        activities.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        devices.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let text = (activities + devices).joined(separator: "\n") + "\n"
        return Array(text.utf8) + StateDump.totalsLine(totals)
    }

    static func merged(
        _ replays: [TraceReplay], chunkBytes: Int, batchLines: Int = 1024
    ) -> (bytes: [UInt8], chunks: [Int]) {
        var totals = Accounting()
        for r in replays { totals += r.pipeline!.accounting }
        var written: [UInt8] = []
        var chunks: [Int] = []
        var out: [UInt8] = []
        StateDump.writeMerged(
            replays.map { $0.pipeline! }, totals: totals, nowMillis: replays[0].nowMillis, to: &out,
            chunkBytes: chunkBytes, batchLines: batchLines
        ) { chunk in
            chunks.append(chunk.count)
            written += chunk
            chunk.removeAll()
        }
        return (written + out, chunks)
    }

    @Test("written in chunks of any size, the dump is the one rendered at once; each chunk holds chunkBytes or more")
    func chunks() throws {
        let r = try Self.replay((0..<30).map { ("act-\($0)", "dev-\($0 % 7)") })
        let whole = StateDump.render(r.pipeline!, nowMillis: r.nowMillis)
        for size in [1, 7, 100, 1_000, whole.count, .max] {
            var written: [UInt8] = []
            var out: [UInt8] = []
            var chunks = 0
            StateDump.write(r.pipeline!, nowMillis: r.nowMillis, to: &out, chunkBytes: size) { chunk in
                #expect(chunk.count >= size)
                chunks += 1
                written += chunk
                chunk.removeAll()
            }
            #expect(written + out == whole, "chunks of \(size)")
            #expect(size >= whole.count ? chunks == 0 : chunks > 0, "the totals line is left for the caller")
        }
    }

    @Test("two pipelines with plain ids: merged as serve merged them, in chunks or at once")
    func plainIds() throws {
        // Device d lives on pipeline d % 2, as the workers of `fanout serve` share devices.
        let all = (0..<40).map { (activity: "device-\(String(format: "%03d", $0 / 3))-a\($0 % 3)", device: $0 / 3) }
        let parts = try (0..<2).map { k in
            try Self.replay(
                all.filter { $0.device % 2 == k }.map { ($0.activity, "device-\(String(format: "%03d", $0.device))") })
        }
        let expected = Self.reference(parts)
        #expect(Self.merged(parts, chunkBytes: .max).bytes == expected)
        let (bytes, chunks) = Self.merged(parts, chunkBytes: 300)
        #expect(bytes == expected)
        #expect(chunks.count > 5 && chunks.allSatisfy { $0 >= 300 })
        for batch in [1, 2, 3, 7] {
            #expect(Self.merged(parts, chunkBytes: 500, batchLines: batch).bytes == expected, "batches of \(batch)")
        }
    }

    @Test("ids with escaped bytes or bytes below the closing quote sort as their lines' text, not as their bytes")
    func escapedIds() throws {
        // "a" < "a b" as bytes, but the line of "a b" sorts first (space < '"'); "a\"q" escapes to a backslash.
        let parts = [
            try Self.replay([("a", "d 1"), ("a!x", "d\"2"), ("b\\c", "d1")]),
            try Self.replay([("a b", "d!"), ("a\"q", "d\t"), ("a\u{7}", "e")]),
        ]
        let expected = Self.reference(parts)
        let bytes = Self.merged(parts, chunkBytes: 64).bytes
        #expect(bytes == expected, "\(String(decoding: bytes, as: UTF8.self))")
        #expect(Self.merged(parts, chunkBytes: 64, batchLines: 2).bytes == expected)
        let activities = String(decoding: bytes, as: UTF8.self).split(separator: "\n").prefix(6)
        #expect(activities.first?.hasPrefix(#"{"activity": "a b""#) == true)
    }

    @Test("pipelines without devices: a lone newline before the totals, as the joined lines were")
    func empty() throws {
        let parts = [try Trace().run(), try Trace().run()]
        #expect(Self.merged(parts, chunkBytes: 16).bytes == Self.reference(parts))
    }
}
