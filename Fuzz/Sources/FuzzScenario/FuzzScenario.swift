import FanoutSim

// libFuzzer target: arbitrary bytes as a scenario file through `Scenario.parse`. Every failure must be
// a clean `ScenarioError` naming the file and a line of the input; nothing may trap.
//
// Beyond "no crash", it checks that an accepted scenario's canonical text (`fanout scenarios show`)
// parses back to the same scenario with the same configuration hash.

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("fuzz invariant: \(message())") }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzScenario(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let text = data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    let scenario: Scenario
    do {
        scenario = try Scenario.parse(text, file: "fuzz.json")
    } catch {
        let lines = 1 + text.lazy.filter { $0 == UInt8(ascii: "\n") }.count
        check(error.file == "fuzz.json", "error names file \(error.file)")
        check(error.line >= 1 && error.line <= lines, "error names line \(error.line) of \(lines)")
        check(!error.message.isEmpty, "error without a message")
        return 0
    }
    let canonical = scenario.canonicalText
    do {
        let again = try Scenario.parse(Array(canonical.utf8), file: "canonical.json")
        check(again == scenario, "canonical text reads back differently:\n\(canonical)")
        check(again.configHash == scenario.configHash, "configuration hash changes on reading back")
    } catch {
        fatalError("fuzz invariant: canonical text does not parse: \(error)\n\(canonical)")
    }
    return 0
}
