import Foundation
import Testing

@testable import FanoutAPNs
@testable import FanoutServe

@Suite("LineFile (population.jsonl read line by line for --register)")
struct LineFileTests {
    func write(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("lines-\(UUID().uuidString)").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("lines across 1 MiB chunk boundaries come back whole, in order, counted first")
    func acrossChunks() throws {
        // About 3.5 MiB of lines of varying length, so that lines straddle every chunk boundary.
        let lines = (0..<40_000).map { k in "{\"n\": \(k), \"pad\": \"" + String(repeating: "x", count: k % 173) + "\"}" }
        let path = try write(lines.joined(separator: "\n") + "\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try LineFile(path: path)
        defer { file.close() }
        #expect(file.count == lines.count)
        var read: [String] = []
        while let line = file.next() { read.append(String(decoding: line, as: UTF8.self)) }
        #expect(read == lines)
    }

    @Test("a last line without its newline counts and is read; an empty file has none")
    func edges() throws {
        let path = try write("a\nbb\nccc")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try LineFile(path: path)
        #expect(file.count == 3)
        #expect([file.next(), file.next(), file.next(), file.next()].map { $0.map { String(decoding: $0, as: UTF8.self) } }
            == ["a", "bb", "ccc", nil])
        file.close()
        let empty = try write("")
        defer { try? FileManager.default.removeItem(atPath: empty) }
        let none = try LineFile(path: empty)
        #expect(none.count == 0 && none.next() == nil)
        none.close()
        #expect(throws: (any Error).self) { _ = try LineFile(path: "/nonexistent/population.jsonl") }
    }
}
