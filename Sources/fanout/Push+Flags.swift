import ArgumentParser
import FanoutMetrics
import FanoutPush
import FanoutReport
import FanoutSim
import Foundation

/// `fanout push`'s flags checked before anything starts (ArgumentParser calls `validate()` after parsing): every
/// number within its range, so that nothing traps converting it later (`--drain inf` once did, at the end of the
/// schedule, losing the run), and every combination that would be ignored or contradict itself refused. A refusal
/// names its flag and is a usage error: exit 64, nothing written.
extension Push {
    /// The ranges the help texts state.
    enum Bounds {
        static let connections = 1...1024
        static let streams = 1...100_000
        static let durationSeconds = 30.0 * 86_400
        static let maxScheduleLagMillis = 3_600_000.0
        static let reconnects = 0...1_000_000
        static let drainSeconds = 3600.0
        static let maxStartSkewSeconds = 0.001...3600.0
        static let barrierTimeoutSeconds = 0.001...86_400.0
        static let barrierMarginSeconds = 0.0...3600.0
        static let targets = 256
    }

    func validate() throws {
        _ = try thresholdGates()
        try ScenarioOverrides.check(devices: devices)
        try ScenarioOverrides.check(epoch: epoch)
        guard Bounds.connections.contains(connections) else {
            throw ValidationError("--connections: expected 1 to 1024, got \(connections)")
        }
        guard Bounds.streams.contains(streams) else {
            throw ValidationError("--streams: expected 1 to 100000, got \(streams)")
        }
        // Written so that NaN fails too.
        guard maxScheduleLag > 0 && maxScheduleLag <= Bounds.maxScheduleLagMillis else {
            throw ValidationError("--max-schedule-lag: expected milliseconds above 0, at most 3600000, got "
                + "\(maxScheduleLag)")
        }
        guard drain >= 0 && drain <= Bounds.drainSeconds else {
            throw ValidationError("--drain: expected seconds from 0 to 3600, got \(drain)")
        }
        guard Bounds.reconnects.contains(reconnects) else {
            throw ValidationError("--reconnects: expected 0 to 1000000, got \(reconnects)")
        }
        let targets = try pushTargets()
        try checkTLSAndAuth(targets)
        _ = try shardOption()
        _ = try startAtNanos()
        if let maxStartSkew {
            guard startAt != nil || barrier != nil else {
                throw ValidationError("--max-start-skew: only with --start-at or --barrier")
            }
            guard Bounds.maxStartSkewSeconds.contains(maxStartSkew) else {
                throw ValidationError("--max-start-skew: expected seconds from 0.001 to 3600, got \(maxStartSkew)")
            }
        }
        try checkBarrier()
    }

    /// `--barrier DIR` with `--shard K/N` and not with `--start-at` (the barrier fixes the start); its timeout and
    /// margin only with it, each in its range (written so that NaN fails too).
    func checkBarrier() throws {
        guard let barrier else {
            if barrierTimeout != nil { throw ValidationError("--barrier-timeout: only with --barrier") }
            if barrierMargin != nil { throw ValidationError("--barrier-margin: only with --barrier") }
            return
        }
        guard !barrier.isEmpty else { throw ValidationError("--barrier: expected a directory, got an empty string") }
        guard startAt == nil else {
            throw ValidationError("--barrier and --start-at exclude each other (the barrier fixes the start)")
        }
        guard shard != nil else { throw ValidationError("--barrier: needs --shard K/N (the N shards it waits for)") }
        if let barrierTimeout {
            guard barrierTimeout >= Bounds.barrierTimeoutSeconds.lowerBound
                && barrierTimeout <= Bounds.barrierTimeoutSeconds.upperBound
            else {
                throw ValidationError("--barrier-timeout: expected seconds from 0.001 to 86400, got \(barrierTimeout)")
            }
        }
        if let barrierMargin {
            guard barrierMargin >= 0 && barrierMargin <= Bounds.barrierMarginSeconds.upperBound else {
                throw ValidationError("--barrier-margin: expected seconds from 0 to 3600, got \(barrierMargin)")
            }
        }
    }

    /// `--threshold`s, read (a flag error is a usage error); `--rate-scale` and `--duration` in their ranges.
    func thresholdGates() throws -> [PushThreshold] {
        var gates: [PushThreshold] = []
        for text in thresholds {
            do {
                gates.append(try PushThreshold(parsing: text))
            } catch {
                throw ValidationError("--threshold: \(error)")
            }
        }
        try ScenarioOverrides.check(rateScale: rateScale)
        if let duration {
            guard duration > 0 && duration <= Bounds.durationSeconds else {
                throw ValidationError("--duration: expected seconds from 0 to 2592000, got \(duration)")
            }
        }
        return gates
    }

    /// TARGET,TARGET,...: target i is serve shard i/N (`fanout serve --shard i/N`).
    func pushTargets() throws -> [PushTarget] {
        let all: [PushTarget]
        do {
            all = try target.split(separator: ",", omittingEmptySubsequences: false).map {
                try PushTarget.parse(String($0))
            }
        } catch {
            throw ValidationError("TARGET: \(error)")
        }
        guard all.count <= Bounds.targets else { throw ValidationError("TARGET: at most 256 targets") }
        return all
    }

    /// TLS flags only with an https:// target and not against each other; `--auth-key` and `--team` together.
    func checkTLSAndAuth(_ targets: [PushTarget]) throws {
        let tls = targets.contains(where: \.tls)
        if ca != nil && insecure {
            throw ValidationError("--ca and --insecure exclude each other (--insecure verifies no certificate)")
        }
        if let ca {
            guard tls else { throw ValidationError("--ca: no https:// target (an http:// target has no certificate)") }
            guard FileManager.default.isReadableFile(atPath: ca) else {
                throw ValidationError("--ca: cannot read \(ca)")
            }
        }
        if insecure && !tls {
            throw ValidationError("--insecure: no https:// target (an http:// target has no certificate)")
        }
        if let authKey {
            guard team != nil else { throw ValidationError("--auth-key needs --team") }
            guard let eq = authKey.firstIndex(of: "="), eq != authKey.startIndex,
                authKey.index(after: eq) != authKey.endIndex
            else {
                throw ValidationError("--auth-key: expected KEYID=FILE, got \(authKey)")
            }
        } else if team != nil {
            throw ValidationError("--team: the team of provider tokens signed with --auth-key, which is missing")
        }
    }

    /// `--shard K/N` parsed (`.whole` without it).
    func shardOption() throws -> Shard {
        guard let shard else { return .whole }
        do { return try Shard(parsing: shard) } catch { throw ValidationError("--shard: \(error)") }
    }

    /// `--start-at` as UNIX nanoseconds (nil without it): at most 1 s in the past, at most 7 days ahead.
    func startAtNanos() throws -> Int64? {
        guard let startAt else { return nil }
        guard let seconds = Push.parseStartAt(startAt) else {
            throw ValidationError(
                "--start-at: expected an RFC 3339 time (2026-11-26T10:00:00Z) or UNIX seconds, got \(startAt)")
        }
        let now = Date().timeIntervalSince1970
        guard seconds >= now - Push.startAtToleranceSeconds else {
            throw ValidationError(
                "--start-at: \(startAt) is " + String(format: "%.3f", now - seconds)
                    + " s in the past (at most \(Push.startAtToleranceSeconds) s late is accepted)")
        }
        guard seconds <= now + 7 * 86_400 else {
            throw ValidationError("--start-at: \(startAt) is more than 7 days ahead")
        }
        return Int64((seconds * 1e9).rounded())
    }
}
