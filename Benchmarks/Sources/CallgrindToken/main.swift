import BenchFixtures
import FanoutCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// `callgrind-token N`: builds the Core suite's token workload (1,000 activities, warmed up), then
// runs N token updates (encode → validate → route → apply), each one `applied`. `make callgrind`
// runs it under callgrind for two values of N and divides the difference in instructions by the
// difference in N, so the setup and the process start cancel out; only `runUpdates` is collected
// (`--toggle-collect`), which keeps the function profile free of setup too.

/// The measured loop, kept out of line so that callgrind can collect it alone.
@inline(never)
func runUpdates(_ workload: TokenWorkload, from start: Int, count: Int) -> Int {
    var applied = 0
    for k in start..<start + count where workload.update(k) == .routed(recipients: 1) { applied += 1 }
    return applied
}

let arguments = CommandLine.arguments
guard arguments.count == 2, let count = Int(arguments[1]), count >= 0 else {
    print("usage: callgrind-token N   (runs N token updates)")
    exit(2)
}
let workload = TokenWorkload()
let appliedBefore = workload.pipeline.accounting[.applied]
let routed = runUpdates(workload, from: workload.pipeline.accounting.pushes, count: count)
let applied = workload.pipeline.accounting[.applied] - appliedBefore
guard routed == count, applied == count else {
    print("callgrind-token: of \(count) updates, \(routed) routed and \(applied) applied")
    exit(1)
}
let payload = workload.encoder.withPayload { String(decoding: $0, as: UTF8.self) }
print("callgrind-token: \(count) token updates applied; last payload (\(payload.utf8.count) bytes): \(payload)")
