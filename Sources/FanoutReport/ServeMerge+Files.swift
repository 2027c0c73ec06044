import FanoutCore
import FanoutMetrics
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The merged state.jsonl of serve shards.
extension ServeMerge {
    /// state.jsonl of the shards merged into `path`: every line in the order serve writes them (activity lines,
    /// then device lines, each sorted as text; each shard's file is, and their devices are disjoint), then one
    /// totals line, the shards' added. Streamed; a temporary file renamed into place, nothing left on a failure.
    public static func writeState(_ parts: [ServeFolder], to path: String) throws {
        let files = try parts.map { p -> UnsafeMutablePointer<FILE> in
            let name = (p.folder as NSString).appendingPathComponent("state.jsonl")
            guard let f = fopen(name, "r") else { throw ReportReadError(file: name, "cannot open the file") }
            return f
        }
        defer { for f in files { fclose(f) } }
        var heads: [[UInt8]?] = []
        var buffer: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(buffer) }
        func next(_ k: Int) -> [UInt8]? {
            let n = getline(&buffer, &capacity, files[k])
            guard n > 0, let buffer else { return nil }
            return buffer.withMemoryRebound(to: UInt8.self, capacity: n) {
                Array(UnsafeBufferPointer(start: $0, count: n))
            }
        }
        for k in files.indices { heads.append(next(k)) }
        let out = try StreamedFile(path: path)
        var chunk: [UInt8] = []
        var totals: Accounting?
        let totalsPrefix = Array("{\"totals\": ".utf8)
        do {
            while true {
                var best = -1
                for k in heads.indices {
                    guard let line = heads[k] else { continue }
                    if best < 0 || line.lexicographicallyPrecedes(heads[best]!) { best = k }
                }
                guard best >= 0, let line = heads[best] else { break }
                heads[best] = next(best)
                if line.starts(with: totalsPrefix) {
                    let name = (parts[best].folder as NSString).appendingPathComponent("state.jsonl")
                    let t = try stateTotals(line, file: name)
                    if totals == nil { totals = Accounting() }
                    totals? += t
                    continue
                }
                chunk.append(contentsOf: line)
                if line.last != UInt8(ascii: "\n") { chunk.append(UInt8(ascii: "\n")) }
                if chunk.count >= StreamedFile.chunkBytes { try out.write(&chunk) }
            }
            if let totals { chunk.append(contentsOf: totalsLine(totals)) }
            try out.write(&chunk)
            try out.commit()
        } catch {
            out.discard()
            throw error
        }
    }

    /// A totals line of state.jsonl read back (`StateDump`'s keys; the zero counts of a kind left out).
    static func stateTotals(_ line: [UInt8], file: String) throws(ReportReadError) -> Accounting {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line)) else {
            throw ReportReadError(file: file, "the totals line: not JSON")
        }
        let t = try Fields(file: file, path: "", value: object).object("totals")
        var a = Accounting()
        a.pushes = try t.int("pushes")
        a.routed = try t.int("routed")
        a.deliveries = try t.int("deliveries")
        a.requests = try t.int("requests")
        a.requestsLimitExceeded = try t.int("limitExceeded")
        func read(_ key: String, _ names: [String], into counts: inout [Int]) throws(ReportReadError) {
            for (name, n) in try t.counts(key) {
                guard let k = names.firstIndex(of: name) else {
                    throw ReportReadError(file: file, "field totals.\(key).\(name): unknown")
                }
                counts[k] = n
            }
        }
        try read("rejected", RejectReason.allCases.map(\.name), into: &a.rejected)
        try read("unroutable", UnroutableReason.allCases.map(\.name), into: &a.unroutable)
        try read("outcomes", Outcome.allCases.map(\.name), into: &a.outcomes)
        return a
    }

    /// The totals line as `StateDump` writes it (its keys in its order, the counts of each kind in the order of
    /// their cases, the zero ones left out).
    static func totalsLine(_ a: Accounting) -> [UInt8] {
        func counts(_ values: [Int], _ names: [String]) -> String {
            zip(names, values).compactMap { $1 > 0 ? "\"\($0)\": \($1)" : nil }.joined(separator: ", ")
        }
        var line = "{\"totals\": {\"pushes\": \(a.pushes), "
        line += "\"rejected\": {\(counts(a.rejected, RejectReason.allCases.map(\.name)))}, "
        line += "\"unroutable\": {\(counts(a.unroutable, UnroutableReason.allCases.map(\.name)))}, "
        line += "\"routed\": \(a.routed), \"deliveries\": \(a.deliveries), "
        line += "\"outcomes\": {\(counts(a.outcomes, Outcome.allCases.map(\.name)))}, "
        line += "\"requests\": \(a.requests), \"limitExceeded\": \(a.requestsLimitExceeded)}}\n"
        return Array(line.utf8)
    }
}
