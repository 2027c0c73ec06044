import ArgumentParser
import FanoutPush
import FanoutSim
import FanoutTrace
import Foundation

/// `fanout push TARGET TRACE.jsonl`: a trace's push lines instead of a scenario's schedule.
extension Push {
    /// Whether the SCENARIO argument is a trace: not a built-in scenario name, and a file whose first line is a JSON
    /// object with a `trace` member (a trace's header, docs/TRACE.md), or whose name ends in `.jsonl` (so a trace with
    /// a broken header gets the trace's error, with its line number). A scenario file is one JSON object that does not
    /// fit on its first line, or has no `trace` member.
    static func isTrace(_ argument: String) -> Bool {
        guard BuiltinScenarios.named(argument) == nil, let file = FileHandle(forReadingAtPath: argument) else {
            return false
        }
        defer { try? file.close() }
        if argument.hasSuffix(".jsonl") { return true }
        let head = (try? file.read(upToCount: 1 << 16)) ?? Data()
        let line = head.prefix { $0 != UInt8(ascii: "\n") }
        guard let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any] else { return false }
        return object["trace"] != nil
    }

    /// The run folder's name for a trace: its file name without `.jsonl`.
    static func traceName(_ path: String) -> String {
        let name = (path as NSString).lastPathComponent
        return name.hasSuffix(".jsonl") ? String(name.dropLast(6)) : name
    }

    /// The trace, read and checked (an unreadable line: `PATH: line N: what is wrong`, exit status 1 as `fanout
    /// replay`, nothing sent or written); --devices and --epoch belong to scenarios and are refused.
    func traceToSend() throws -> PushTrace {
        if devices != nil { throw ValidationError("--devices: a trace names its own devices and tokens") }
        if epoch != nil {
            throw ValidationError("--epoch: a trace's payloads and headers are sent as recorded (its own epoch)")
        }
        do {
            return try PushTrace(path: scenario, rateScale: rateScale ?? 1, durationSeconds: duration, seed: seed ?? 0)
        } catch let error as TraceError {
            throw CommandFailure("\(scenario): \(error)")
        } catch {
            throw CommandFailure("\(error)")
        }
    }
}
