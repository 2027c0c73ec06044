import FanoutAPNs
import ArgumentParser
import FanoutCore
import FanoutMetrics
import FanoutReport
import FanoutServe
import FanoutSim
import FanoutWire
import Foundation
import UVLoop

/// `fanout serve`'s flags checked and turned into the options of each part (listeners, faults, the backend).
extension Serve {
    func validate() throws {
        if h2c && (tlsCert != nil || tlsKey != nil) { throw ValidationError("--h2c and --tls-cert/--tls-key exclude each other") }
        if !h2c && (tlsCert == nil || tlsKey == nil) {
            throw ValidationError("choose --h2c, or TLS with both --tls-cert FILE and --tls-key FILE")
        }
        if let state, ServeReport.StateDetail(rawValue: state) == nil {
            throw ValidationError("--state: expected full, summary or none, got \(state)")
        }
        if let epochFrom {
            guard epochFrom == "serving" || epochFrom == "first-request" else {
                throw ValidationError("--epoch-from: expected serving or first-request, got \(epochFrom)")
            }
            guard epoch != nil else { throw ValidationError("--epoch-from: the devices' clock reads --epoch, missing") }
        }
        if let stateAt {
            guard stateAt >= 0 && stateAt <= 4_102_444_800 else {
                throw ValidationError("--state-at: expected UNIX seconds from 0 to 4102444800, got \(stateAt)")
            }
            if state == "none" { throw ValidationError("--state-at: --state none writes no state.jsonl") }
        }
        guard auth == "none" || auth == "jwt" else { throw ValidationError("--auth: expected none or jwt, got \(auth)") }
        if auth == "jwt" && (authKeys.isEmpty || team == nil) {
            throw ValidationError("--auth jwt needs --team TEAMID and at least one --auth-key KEYID=FILE")
        }
        if auth == "none" && (!authKeys.isEmpty || team != nil) {
            throw ValidationError("--auth-key and --team need --auth jwt")
        }
        if let duration, !(duration > 0 && duration <= 30 * 86_400) {
            throw ValidationError("--duration: expected seconds from 0 to 2592000, got \(duration)")
        }
        try ScenarioOverrides.check(devices: devices)
        try ScenarioOverrides.check(rateScale: rateScale)
        try ScenarioOverrides.check(epoch: epoch)
        guard (0...256).contains(workers) else { throw ValidationError("--workers: expected 0 to 256, got \(workers)") }
        let cap = ServeOptions.maxConcurrentStreamsCap
        guard (1...cap).contains(maxStreams) else {
            throw ValidationError("--max-streams: expected 1 to \(cap), got \(maxStreams)")
        }
        guard (1...1_000_000).contains(maxConnections) else {
            throw ValidationError("--max-connections: expected 1 to 1000000, got \(maxConnections)")
        }
        guard (64 * 1024...1 << 30).contains(maxUnsentBytes) else {
            throw ValidationError("--max-unsent-bytes: expected 65536 to 1073741824, got \(maxUnsentBytes)")
        }
        guard (1...10_000_000).contains(maxOpenStreams) else {
            throw ValidationError("--max-open-streams: expected 1 to 10000000, got \(maxOpenStreams)")
        }
        guard prefaceTimeout > 0 && prefaceTimeout <= 3600 else {
            throw ValidationError("--preface-timeout: expected seconds above 0, at most 3600, got \(prefaceTimeout)")
        }
        guard idleTimeout > 0 && idleTimeout <= 30 * 86_400 else {
            throw ValidationError("--idle-timeout: expected seconds above 0, at most 2592000, got \(idleTimeout)")
        }
        guard (0...100_000).contains(maxAPIBundles) else {
            throw ValidationError("--max-api-bundles: expected 0 to 100000")
        }
        guard (1...APNsService.channelsPerApp).contains(maxListedChannels) else {
            throw ValidationError("--max-listed-channels: expected 1 to \(APNsService.channelsPerApp)")
        }
        guard requestTimeout > 0 && requestTimeout <= 86_400 else {
            throw ValidationError("--request-timeout: expected seconds above 0, at most 86400")
        }
        guard drainTimeout >= 0 && drainTimeout <= 3600 else {
            throw ValidationError("--drain-timeout: expected seconds from 0 to 3600")
        }
        guard settle >= 0 && settle <= 3600 else { throw ValidationError("--settle: expected seconds from 0 to 3600") }
        if expectEvents, let duration, settle >= duration {
            throw ValidationError(
                "--settle \(settle) with --duration \(duration): no event would be due by time, nothing judged "
                    + "(a --settle shorter than the time served)")
        }
        _ = try Self.parseListen(listen)
        if let manageListen { _ = try Self.parseListen(manageListen, flag: "--manage-listen") }
        _ = try faultOptions(seed: 1)
        _ = try triggerOptions()
        _ = try registerOptions()
    }

    /// `--trigger` and its settings (nil: no trigger); a bad value is a usage error (exit 64, nothing written).
    func triggerOptions() throws -> TriggerOptions? {
        if trigger == nil && register == nil && appEvents == nil
            && (triggerConcurrency != nil || triggerTimeout != nil || triggerHTTP != nil || triggerCA != nil)
        {
            throw ValidationError(
                "--trigger-concurrency, --trigger-timeout, --trigger-http and --trigger-ca need --trigger URL, "
                    + "--register URL or --app-events URL")
        }
        if register == nil && (registerRate != nil || registerAttempts != nil || registerDeadline != nil) {
            throw ValidationError("--register-rate, --register-attempts and --register-deadline need --register URL")
        }
        let urls = try trigger.map { try Self.urlList($0, flag: "--trigger") } ?? []
        var spread = BackendSpread.hash
        if let triggerSpread {
            guard trigger != nil else {
                throw ValidationError("--trigger-spread: how --trigger's URLs share the events, needs --trigger URL,URL")
            }
            guard let s = BackendSpread(rawValue: triggerSpread) else {
                throw ValidationError("--trigger-spread: expected hash or round-robin, got \(triggerSpread)")
            }
            spread = s
        }
        if let triggerMaxLag {
            guard trigger != nil else {
                throw ValidationError("--trigger-max-lag: the trigger's bound, needs --trigger URL")
            }
            guard triggerMaxLag > 0 && triggerMaxLag <= 3_600_000 else {
                throw ValidationError(
                    "--trigger-max-lag: expected milliseconds above 0, at most 3600000, got \(triggerMaxLag)")
            }
        }
        var t = TriggerOptions(urls: urls)
        t.spread = spread
        if let c = try Self.checked(triggerConcurrency, 1...100_000, "--trigger-concurrency") { t.concurrency = c }
        if let s = try Self.checked(seconds: triggerTimeout, atMost: 3600, "--trigger-timeout") {
            t.timeoutSeconds = s
        }
        switch triggerHTTP {
        case nil, "1.1": t.version = .http1_1
        case "2": t.version = .http2
        case let v?: throw ValidationError("--trigger-http: expected 1.1 or 2, got \(v)")
        }
        if let ca = triggerCA {
            guard FileManager.default.isReadableFile(atPath: ca) else { throw ValidationError("--trigger-ca: cannot read \(ca)") }
            t.caFile = ca
        }
        if let triggerMaxLag { t.maxScheduleLagNanos = UInt64((triggerMaxLag * 1e6).rounded()) }
        return trigger == nil ? nil : t
    }

    /// `--register` and its settings (nil: no registration); the backend's HTTP settings are the trigger's flags.
    func registerOptions() throws -> RegisterOptions? {
        guard let register else { return nil }
        var r = RegisterOptions(urls: try Self.urlList(register, flag: "--register"))
        if let rate = registerRate {
            guard rate > 0 && rate <= 1_000_000 else { throw ValidationError("--register-rate: expected 0 < rate <= 1000000, got \(rate)") }
            r.ratePerSecond = rate
        }
        if let a = try Self.checked(registerAttempts, 1...20, "--register-attempts") { r.attempts = a }
        if let d = try Self.checked(seconds: registerDeadline, atMost: 86_400, "--register-deadline") {
            r.deadlineSeconds = d
        }
        if let c = triggerConcurrency, (1...100_000).contains(c) { r.concurrency = c }
        if let s = triggerTimeout, s > 0 && s <= 3600 { r.timeoutSeconds = s }
        if triggerHTTP == "2" { r.version = .http2 }
        r.caFile = triggerCA
        return r
    }

    /// An optional count flag's value when given, in `range` (else a usage error: "expected A to B, got V").
    static func checked(_ value: Int?, _ range: ClosedRange<Int>, _ flag: String) throws -> Int? {
        guard let value else { return nil }
        guard range.contains(value) else {
            throw ValidationError("\(flag): expected \(range.lowerBound) to \(range.upperBound), got \(value)")
        }
        return value
    }

    /// An optional seconds flag's value when given, above 0 and at most `atMost` (else a usage error).
    static func checked(seconds value: Double?, atMost: Int, _ flag: String) throws -> Double? {
        guard let value else { return nil }
        guard value > 0 && value <= Double(atMost) else {
            throw ValidationError("\(flag): expected seconds above 0, at most \(atMost)")
        }
        return value
    }

    /// `--app-events URL[,URL...]`: where the app tells the backend of its app events, with the backend flags of
    /// `--register` (`--trigger-concurrency`, `--trigger-timeout`, `--trigger-http`, `--trigger-ca`; 3 attempts each).
    func appEventOptions() throws -> RegisterOptions? {
        guard let appEvents else { return nil }
        var r = RegisterOptions(urls: try Self.urlList(appEvents, flag: "--app-events"))
        if let c = triggerConcurrency, (1...100_000).contains(c) { r.concurrency = c }
        if let s = triggerTimeout, s > 0 && s <= 3600 { r.timeoutSeconds = s }
        if triggerHTTP == "2" { r.version = .http2 }
        r.caFile = triggerCA
        return r
    }

    /// What the scenario needs of the flags (usage errors, exit 64, before anything is built): tokens rotating while
    /// serving need `--register` (where the app registers each new token); app events need `--app-events` (where the
    /// app tells the backend) and `--expect-events` (their judge), and `--app-events` needs app events.
    func checkScenarioNeeds(_ s: Scenario) throws {
        if s.faults.rotationWhileServing != nil, s.faults.rotationShare > 0, register == nil {
            // Fail closed: without it no backend could learn the new tokens, and the 410s would blame it.
            throw ValidationError(
                "the scenario rotates tokens while serving (faults.rotationWhileServing): give --register URL, "
                    + "where the app registers each new token")
        }
        let app = s.faults.appEvents
        let hasAppEvents = app.map { $0.dismissShare + $0.disableShare + $0.uninstallShare > 0 } ?? false
        if hasAppEvents && appEvents == nil {
            // Fail closed: without it no backend could know, and the pushes after them would blame it.
            throw ValidationError(
                "the scenario has app events (faults.appEvents): give --app-events URL, where the app tells the "
                    + "backend of each")
        }
        if hasAppEvents && !expectEvents {
            throw ValidationError(
                "the scenario has app events (faults.appEvents): they are judged with --expect-events, give it")
        }
        if !hasAppEvents && appEvents != nil {
            throw ValidationError("--app-events: the scenario has no app events (faults.appEvents), nothing to send")
        }
        if let k = s.faults.kickoff, k.share > 0 {
            // Fail closed: without the trigger no backend hears of a start, without registration it knows no
            // push-to-start token nor the started activities, and without the judge nothing is measured.
            let missing = [
                (trigger == nil, "--trigger URL (where each start event goes)"),
                (register == nil, "--register URL (the push-to-start tokens, then each started activity)"),
                (!expectEvents, "--expect-events (the judge)"),
            ].filter(\.0).map(\.1)
            if !missing.isEmpty {
                throw ValidationError(
                    "the scenario starts activities by push-to-start (faults.kickoff): give "
                        + missing.joined(separator: ", "))
            }
            if let shard, shard != "1/1" {
                throw ValidationError("--shard: a scenario with faults.kickoff is served whole (no --shard)")
            }
        }
    }

    /// `--trigger A,B,...` or `--register A,B,...`: the comma-separated URLs, each checked as one (a scheme, a host),
    /// none empty, none twice, at most ``BackendTarget/maxURLs``.
    static func urlList(_ text: String, flag: String) throws -> [String] {
        let urls = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard urls.count <= BackendTarget.maxURLs else {
            throw ValidationError("\(flag): at most \(BackendTarget.maxURLs) URLs, got \(urls.count)")
        }
        var seen = Set<String>()
        for (i, url) in urls.enumerated() {
            guard !url.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw ValidationError(
                    "\(flag): URL \(i + 1) of \(urls.count) is empty (expected URL or URL,URL,..., got \(text))")
            }
            do { _ = try HTTPClient.validate(url: url) } catch {
                let which = urls.count > 1 ? " (URL \(i + 1) of \(urls.count))" : ""
                throw ValidationError("\(flag)\(which): \(error)")
            }
            guard seen.insert(url).inserted else {
                throw ValidationError("\(flag): \(url) given twice (each instance once)")
            }
        }
        return urls
    }

    /// summary.json `flags`' `trigger` and `register`: "-" without the flag, "on" with one URL (as before several
    /// were taken), "2 URLs, hash" with several (a run against two instances is another configuration).
    func backendFlag(_ value: String?, spread: String) -> String {
        guard let value else { return "-" }
        let count = value.split(separator: ",", omittingEmptySubsequences: false).count
        return count > 1 ? "\(count) URLs, \(spread)" : "on"
    }

    /// `--latency` and `--faults`, read (a flag error is a usage error: exit 64, nothing written).
    func faultOptions(seed: UInt64) throws -> ServeFaults {
        var f = ServeFaults()
        f.seed = seed
        do {
            if let latency {
                f.latency = try ServeFaults.parseLatency(latency)
                f.latencyText = latency
            }
            if let faults { try ServeFaults.parseFaults(faults, into: &f) }
        } catch {
            throw ValidationError(error.description)
        }
        return f
    }

    static func parseListen(_ text: String, flag: String = "--listen") throws -> (host: String, port: Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port)
        else { throw ValidationError("\(flag): expected HOST:PORT, got \(text)") }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("\(flag): expected HOST:PORT, got \(text)") }
        return (host, port)
    }

    /// `--shard K/N` parsed (`.whole` without it). A shard refuses what would be counted N times or judged on a slice
    /// as if it were the whole: --trigger (every shard would send every event), --expect-events (each shard would
    /// judge the events on its own devices only) and --register.
    func shardOption() throws -> Shard {
        guard let shard else { return .whole }
        let slice: Shard
        do { slice = try Shard(parsing: shard) } catch { throw ValidationError("--shard: \(error)") }
        let refused = [(expectEvents, "--expect-events"), (trigger != nil, "--trigger"), (register != nil, "--register")]
            .filter(\.0).map(\.1)
        if !refused.isEmpty {
            throw ValidationError(
                "--shard does not combine with \(refused.joined(separator: ", ")): each shard holds 1/N of the "
                    + "devices; run the backend's trigger, registration and event judging against one unsharded serve")
        }
        return slice
    }

    /// `--auth jwt`: the team and the signing keys (`--auth-key KEYID=FILE`), read and parsed; nil for `--auth none`.
    func loadProviderAuth() throws -> ProviderAuth? {
        if auth == "jwt", let team {
            var keys: [String: ProviderKey] = [:]
            for entry in authKeys {
                guard let eq = entry.firstIndex(of: "="), eq != entry.startIndex else {
                    throw ValidationError("--auth-key: expected KEYID=FILE, got \(entry)")
                }
                let id = String(entry[..<eq])
                let file = String(entry[entry.index(after: eq)...])
                guard let data = FileManager.default.contents(atPath: file) else {
                    throw CommandFailure("--auth-key \(id): cannot read \(file)")
                }
                do { keys[id] = ProviderKey(try ES256Key(pem: Array(data), name: file)) } catch { throw CommandFailure("\(error)") }
            }
            return ProviderAuth(team: team, keys: keys)
        }
        return nil
    }
}

enum ServeProgress {
    static func line(_ seconds: Double, _ p: ProgressBoard.Snapshot) -> String {
        let svc = p.serviceP99Nanos == 0 ? "-" : DurationText.text(p.serviceP99Nanos)
        return String(format: "%6.1fs  %d conns  %d req  %.0f req/s  ", seconds, p.connections, p.requests,
            p.ratePerSecond)
            + "4xx/5xx \(p.errors)  deliveries \(p.deliveries)  svc p99 \(svc)"
    }
}
