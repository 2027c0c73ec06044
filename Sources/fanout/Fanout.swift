import ArgumentParser

@main
struct Fanout: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout",
        abstract: "Load and performance test harness for Live Activity update fan-out.",
        subcommands: [Run.self, Serve.self, Push.self, Replay.self, Compare.self, Merge.self, Plan.self, Calibrate.self, Scenarios.self]
    )
}
