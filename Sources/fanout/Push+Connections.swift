import ArgumentParser
import FanoutPush

/// `fanout push`'s connection flags (deadlines, queue bound, reconnects), range-checked: any input, `inf`, `nan`,
/// `1e30` or a negative number included, is a value in range or a usage error (exit 64), never a trap later.
extension Push {
    /// `value` when it is a finite number in `range` (or 0 when `zeroAllowed`), else the usage error naming the
    /// flag and what it expects.
    static func seconds(
        _ flag: String, _ value: Double, in range: ClosedRange<Double>, expected: String, zeroAllowed: Bool = false
    ) throws -> Double {
        if zeroAllowed && value == 0 { return 0 }
        guard value.isFinite, range.contains(value) else {
            throw ValidationError("--\(flag): expected seconds \(expected), got \(value)")
        }
        return value
    }

    /// `--connect-timeout`, `--request-timeout`, `--ping-interval`, `--max-queued`, `--reconnect-budget` and the
    /// hidden `--first-stream-id` into `options`.
    func applyConnectionFlags(to options: inout PushOptions) throws {
        let aboveZero = Double.leastNonzeroMagnitude
        options.connectTimeoutSeconds = try Push.seconds(
            "connect-timeout", connectTimeout, in: aboveZero...600, expected: "above 0, at most 600")
        options.requestTimeoutSeconds = try Push.seconds(
            "request-timeout", requestTimeout, in: aboveZero...3600, expected: "above 0, at most 3600")
        options.pingIntervalSeconds = try Push.seconds(
            "ping-interval", pingInterval, in: 0.1...3600, expected: "0 (no PING) or 0.1 to 3600", zeroAllowed: true)
        options.reconnectBudgetSeconds = try Push.seconds(
            "reconnect-budget", reconnectBudget, in: 0...604_800, expected: "0 to 604800")
        guard (1...10_000_000).contains(maxQueued) else {
            throw ValidationError("--max-queued: expected 1 to 10000000, got \(maxQueued)")
        }
        options.maxQueued = maxQueued
        guard (1...Int(Int32.max)).contains(firstStreamId), firstStreamId % 2 == 1 else {
            throw ValidationError("--first-stream-id: expected an odd id from 1 to 2147483647, got \(firstStreamId)")
        }
        options.firstStreamId = Int32(firstStreamId)
    }
}
