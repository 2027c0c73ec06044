import ArgumentParser
import FanoutSim
import Foundation
import UVLoop

struct Calibrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure this machine's stage costs for a scenario: the costModel that virtual time runs on.",
        discussion: """
            One worker runs the scenario's events unpaced with every stage timed, once with every source \
            delivered by token and once with every source broadcast (--seconds each at most). Prints the \
            medians, less one clock read, as the scenario's "costModel" object (stdout), with how they were \
            measured (stderr). Put the object into a scenario file to make its virtual time model this \
            machine; the built-in scenarios carry the reference machine's (docs/SCENARIOS.md).
            """
    )

    @Argument(help: "A built-in scenario name or a scenario file.")
    var scenario: String = "default"

    @Option(help: "Seconds per pass (token, broadcast), at most.")
    var seconds: Double = 3

    func run() throws {
        guard seconds > 0 && seconds <= 600 else {
            throw ValidationError("--seconds: expected from 0 to 600, got \(seconds)")
        }
        let s = try ScenarioSource.load(scenario)
        let measured = Calibration.measure(s, seconds: seconds) { EventLoop.hrtimeNanos }
        let m = measured.model
        let n = measured.samples
        let note = """
            fanout calibrate \(s.name): medians on this machine, less one clock read (\
            \(String(format: "%.1f", measured.clockReadNanos)) ns)
              encode    \(m.encodeNanos) ns per event (\(n[0]) events)
              validate  \(m.validateNanos) ns per push (\(n[1]) token pushes)
              route     \(m.routeNanos) ns per push (\(n[2]) token pushes)
              decode    \(m.decodeNanos) ns per push reaching a device (token apply − broadcast apply)
              apply     \(m.applyNanos) ns per recipient (\(n[4]) broadcast recipients; token apply: \(n[3]))

            """
        FileHandle.standardError.write(Data(note.utf8))
        print("\"costModel\": \(m.jsonText)")
    }
}
