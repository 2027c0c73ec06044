import FanoutMetrics
import FanoutReport
import Foundation
import Testing

/// A large file written in chunks under a temporary name and renamed into place: whole or absent; parts written by
/// threads at their offsets.
@Suite("StreamedFile: chunks written, renamed into place on commit, nothing left otherwise")
struct StreamedFileTests {
    static func folder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("streamed-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static func names(_ url: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: url.path).sorted()
    }

    @Test("chunks are written as handed over (each emptied), counted, and appear under the name only on commit")
    func commit() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("state.jsonl").path
        let progress = ProgressCounter()
        let file = try StreamedFile(path: path, progress: progress)
        var chunk = Array("first line\n".utf8)
        try file.write(&chunk)
        #expect(chunk.isEmpty)
        chunk = Array(repeating: UInt8(ascii: "x"), count: 3 * StreamedFile.chunkBytes / 2) + [10]
        try file.write(&chunk)
        #expect(try Self.names(dir) == [".state.jsonl.tmp-\(getpid())"], "only the temporary name so far")
        try file.commit()
        #expect(try Self.names(dir) == ["state.jsonl"])
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.count == 11 + 3 * StreamedFile.chunkBytes / 2 + 1)
        #expect(file.bytesWritten == bytes.count && progress.value == bytes.count)
        #expect(bytes.prefix(11) == Data("first line\n".utf8))
    }

    @Test("a file discarded, or dropped without a commit, leaves nothing; an earlier file of that name is kept")
    func discard() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("population.jsonl").path
        try Data("old\n".utf8).write(to: URL(fileURLWithPath: path))
        let file = try StreamedFile(path: path)
        var chunk = Array("half of it".utf8)
        try file.write(&chunk)
        file.discard()
        #expect(try Self.names(dir) == ["population.jsonl"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data("old\n".utf8))
        do {
            let dropped = try StreamedFile(path: path, tag: "part1")
            var more = Array("never committed".utf8)
            try dropped.write(&more)
        }
        #expect(try Self.names(dir) == ["population.jsonl"])
    }

    @Test("parts written at their offsets by threads at once land in order, whole")
    func parts() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("population.jsonl").path
        let progress = ProgressCounter()
        let file = try StreamedFile(path: path, progress: progress)
        // Part k: `size(k)` bytes of the letter k, in chunks of 1,000 bytes.
        @Sendable func size(_ k: Int) -> Int { 300_000 + k * 77_777 }
        final class Shared: @unchecked Sendable {
            let file: StreamedFile
            var failures: [String] = []
            let lock = NSLock()
            init(_ file: StreamedFile) { self.file = file }
        }
        let shared = Shared(file)
        let group = DispatchGroup()
        for k in 0..<4 {
            let start = (0..<k).reduce(0) { $0 + size($1) }
            DispatchQueue.global().async(group: group) {
                var offset = start
                var written = 0
                while written < size(k) {
                    let n = min(1_000, size(k) - written)
                    var chunk = [UInt8](repeating: UInt8(ascii: "a") + UInt8(k), count: n)
                    do {
                        try shared.file.write(&chunk, at: offset)
                    } catch {
                        shared.lock.lock()
                        shared.failures.append("\(error)")
                        shared.lock.unlock()
                        return
                    }
                    offset += n
                    written += n
                }
            }
        }
        group.wait()
        #expect(shared.failures.isEmpty)
        try file.commit()
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let expected = (0..<4).flatMap { [UInt8](repeating: UInt8(ascii: "a") + UInt8($0), count: size($0)) }
        #expect(bytes == expected)
        #expect(progress.value == expected.count)
        #expect(try Self.names(dir) == ["population.jsonl"])
    }

    @Test("a folder that does not exist: a FileWriteError naming the file and the system's reason")
    func missingFolder() throws {
        let path = "/nonexistent-\(UUID().uuidString)/state.jsonl"
        #expect {
            _ = try StreamedFile(path: path)
        } throws: { error in
            "\(error)" == "cannot write \(path): No such file or directory"
        }
    }
}
