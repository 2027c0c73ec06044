import FanoutCore
import FanoutTrace

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// libFuzzer target: arbitrary bytes as a trace file, through the streaming line reader and the
// replay (TRACE.md). Every failure must be a clean `TraceError` naming a line of the input; nothing
// may trap. The input is written to a scratch file and read back with a buffer of 1 to 61 bytes (so
// that lines straddle, and outgrow, the buffer).
//
// Beyond "no crash", it checks: the reader hands out exactly the input's lines; an error's line number
// is a line the replay has read; a replayed trace satisfies the accounting identities and its state
// dump is strict JSON, one object per line.

/// In memory when /dev/shm exists: rewriting a file on ext4 flushes it to disk (auto_da_alloc).
private let scratchPath: String = {
    let directory = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
    atexit { unlink(scratchPath) }
    return "\(directory)/fanout-fuzz-trace-\(getpid()).jsonl"
}()

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("fuzz invariant: \(message())") }
}

private func writeScratch(_ input: UnsafeRawBufferPointer) {
    let fd = open(scratchPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    check(fd >= 0, "cannot create \(scratchPath)")
    var offset = 0
    while offset < input.count {
        let written = write(fd, input.baseAddress! + offset, input.count - offset)
        check(written > 0, "cannot write \(scratchPath)")
        offset += written
    }
    close(fd)
}

/// The input's lines as the format defines them: split at `\n`, a final `\n` ends the last line.
private func expectedLines(_ input: UnsafeRawBufferPointer) -> [Range<Int>] {
    var lines: [Range<Int>] = []
    var start = 0
    while start < input.count {
        guard let newline = memchr(input.baseAddress! + start, 0x0A, input.count - start) else {
            lines.append(start..<input.count)
            break
        }
        let end = UnsafeRawPointer(newline) - input.baseAddress!
        lines.append(start..<end)
        start = end + 1
    }
    return lines
}

private func equal(_ line: UnsafeRawBufferPointer, _ expected: UnsafeRawBufferPointer) -> Bool {
    guard line.count == expected.count else { return false }
    return line.count == 0 || memcmp(line.baseAddress!, expected.baseAddress!, line.count) == 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTrace(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
    writeScratch(input)
    let expected = expectedLines(input)
    var seen = 0
    let replay = TraceReplay()
    var failure: TraceError?
    do {
        var reader = try LineReader(path: scratchPath, chunkBytes: 1 + size % 61)
        var stopped = false
        while try reader.nextLine({ line in
            check(seen < expected.count && equal(line, UnsafeRawBufferPointer(rebasing: input[expected[seen]])),
                  "line \(seen + 1) read wrong")
            seen += 1
            if !stopped {
                do throws(TraceError) {
                    try replay.apply(line: line)
                } catch {
                    failure = error
                    stopped = true
                }
            }
        }) {}
        check(seen == expected.count, "read \(seen) lines of \(expected.count)")
        if failure == nil {
            do throws(TraceError) { try replay.finish() } catch { failure = error }
        }
    } catch {
        fatalError("fuzz invariant: not a TraceError: \(error)")
    }
    if let failure {
        check(failure.line >= 1 && failure.line <= max(replay.lineCount, 1), "error names line \(failure.line)")
        check(!failure.message.isEmpty, "error without a message")
        return 0
    }
    guard let pipeline = replay.pipeline else { fatalError("fuzz invariant: replayed without a pipeline") }
    check(pipeline.accounting.identitiesHold, "accounting identities")
    var tape = JSONTape()
    let dump = StateDump.render(pipeline, nowMillis: replay.nowMillis)
    check(dump.last == UInt8(ascii: "\n"), "dump does not end with a newline")
    for line in dump.split(separator: UInt8(ascii: "\n")) {
        Array(line).withUnsafeBytes { bytes in
            check(tape.scan(bytes) == nil && tape[0].kind == .object,
                  "dump line is not a JSON object: \(String(decoding: line, as: UTF8.self))")
        }
    }
    return 0
}
