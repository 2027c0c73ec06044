import ArgumentParser
import FanoutCore
import FanoutTrace
import Foundation

struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replay a trace on the virtual clock and dump the final state (docs/TRACE.md).",
        discussion: """
            Prints a summary (pushes, verdicts, outcomes, whether the accounting identities hold, \
            replay rate). An unreadable trace stops with `line N: what is wrong` on stderr, exit \
            status 1, and no dump is written.
            """
    )

    @Argument(help: "The trace, JSON Lines (docs/TRACE.md).")
    var trace: String

    @Option(name: .long, help: "Write the state dump to this file ('-' for standard output).")
    var dump: String?

    func run() throws {
        let started = ContinuousClock.now
        let replay: TraceReplay
        do {
            replay = try TraceReplay.replay(path: trace)
        } catch let error as TraceError {
            throw CommandFailure("\(trace): \(error)")
        } catch let error as FileError {
            throw CommandFailure("\(error)")
        }
        let elapsed = ContinuousClock.now - started
        let pipeline = replay.pipeline!
        let dumpBytes = StateDump.render(pipeline, nowMillis: replay.nowMillis)
        if let dump {
            if dump == "-" {
                FileHandle.standardOutput.write(Data(dumpBytes))
                return
            }
            do {
                try Data(dumpBytes).write(to: URL(fileURLWithPath: dump), options: .atomic)
            } catch {
                throw CommandFailure("\(dump): cannot write the dump: \(error.localizedDescription)")
            }
        }
        print(ReplaySummary.text(replay: replay, path: trace, elapsed: elapsed, dumpPath: dump))
    }
}

/// An error printed as it is, with exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
