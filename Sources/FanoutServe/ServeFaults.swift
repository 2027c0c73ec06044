import FanoutAPNs
import FanoutCore
import FanoutMetrics
import FanoutSim

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// APNs as it behaves in production, injected by `fanout serve --latency` and `--faults` (docs/INGEST.md §3,
/// *Fault injection*): answers delayed, a share of requests answered 503/429/500 or reset, connections sent a
/// graceful GOAWAY every so often, answers stalled for a while. Every draw comes from the seed (each event loop
/// its own stream), so a run against the same traffic repeats its faults. The default injects nothing and costs
/// one branch per request (`isActive`).
public struct ServeFaults: Sendable, Equatable {
    /// What `fanout serve`'s start line says of `--latency` and `--faults` (nothing when neither is given).
    public var startLineText: String {
        guard latencyText != nil || faultsText != nil else { return "" }
        return "; injecting --latency \(latencyText ?? "none") --faults \(faultsText ?? "none") (seed \(seed))"
    }

    /// How long each answer is held before it is sent.
    public enum Latency: Sendable, Equatable {
        case none
        case fixed(nanos: UInt64)
        /// Lognormal: `exp(mu + sigma·z)` nanoseconds, z standard normal (`mu = ln p50`,
        /// `sigma = ln(p99/p50)/2.3263`).
        case lognormal(mu: Double, sigma: Double)
    }

    public var latency = Latency.none
    /// Shares of requests answered 503 `ServiceUnavailable`, 429 `TooManyRequests`, 500 `InternalServerError`,
    /// or reset (RST_STREAM INTERNAL_ERROR), in parts per million (exact sums; together at most 1,000,000).
    public var serviceUnavailablePPM = 0
    public var tooManyRequestsPPM = 0
    public var internalServerErrorPPM = 0
    public var resetPPM = 0
    /// Every this many nanoseconds, every open connection gets a graceful GOAWAY (0: never).
    public var goAwayEveryNanos: UInt64 = 0
    /// For `stallNanos` out of every `stallEveryNanos` (the windows [k·every, k·every + stall), k ≥ 1, from when
    /// the loop started serving), no answer is sent: answers due then are held until the window ends.
    public var stallEveryNanos: UInt64 = 0
    public var stallNanos: UInt64 = 0
    /// The seed of every draw (`--seed`; the scenario's by default).
    public var seed: UInt64 = 1
    /// The flags as given (for the run folder).
    public var latencyText: String?
    public var faultsText: String?

    public init() {}

    /// The per-million threshold below which a draw is one of the answered or reset faults.
    var sharePPM: Int { serviceUnavailablePPM + tooManyRequestsPPM + internalServerErrorPPM + resetPPM }
    /// Whether any request may be answered otherwise than by the service, or later.
    public var isActive: Bool { sharePPM > 0 || holdsAnswers || goAwayEveryNanos > 0 }
    /// Whether answers may be held (a latency, or stalls).
    public var holdsAnswers: Bool { latency != .none || stallEveryNanos > 0 }

    /// What a request gets instead of the service's answer.
    public enum Fault: Sendable, Equatable {
        case answer(APNsReason)
        case reset
    }

    /// The fault for a uniform draw `u` in [0, 1,000,000): the shares stacked in the order 503, 429, 500, reset.
    func fault(forDraw u: Int) -> Fault? {
        var edge = serviceUnavailablePPM
        if u < edge { return .answer(.serviceUnavailable) }
        edge += tooManyRequestsPPM
        if u < edge { return .answer(.tooManyRequests) }
        edge += internalServerErrorPPM
        if u < edge { return .answer(.internalServerError) }
        edge += resetPPM
        if u < edge { return .reset }
        return nil
    }

    /// The delay for the `n`th latency draw of loop `loop` (a request without an identity).
    func delayNanos(loop: Int, draw n: UInt64) -> UInt64 {
        delayNanos(stream: Mix.hash(seed, 0x1A7E, UInt64(loop)), n)
    }

    /// The delay of a request whose identity and attempt hash to `key` (`H2Request.drawKey`): the same seed holds the
    /// same push as long, whatever the connections, loops and arrival order.
    func delayNanos(key: UInt64) -> UInt64 { delayNanos(stream: Mix.hash(seed, 0x1A7F, key), 0) }

    /// A request's `drawKey` from its identity and attempt (never 0: that is "none").
    static func drawKey(_ key: UInt64, attempt: UInt64) -> UInt64 { Mix.hash(key, attempt) | 1 }

    private func delayNanos(stream: UInt64, _ n: UInt64) -> UInt64 {
        switch latency {
        case .none: return 0
        case .fixed(let nanos): return nanos
        case .lognormal(let mu, let sigma):
            // Box–Muller from two uniforms of the stream (u1 in (0, 1], so its logarithm is finite).
            let u1 = 1 - Mix.unit(Mix.hash(stream, n << 1))
            let u2 = Mix.unit(Mix.hash(stream, n << 1 | 1))
            let z = (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
            let nanos = exp(mu + sigma * z)
            // At most an hour (the histograms' ceiling); a draw beyond it is that hour.
            return nanos >= 3.6e12 ? 3_600_000_000_000 : UInt64(nanos)
        }
    }

    /// The fault draw of a push or broadcast, uniform in [0, 1,000,000): keyed by its identity (the token or channel
    /// and its `aps.timestamp`, ``identity(_:tape:)``) and its attempt (how many times that identity arrived before,
    /// on any loop: ``FaultAttempts``), so the same seed refuses the same pushes whatever the connections, loops and
    /// arrival order.
    func faultDraw(key: UInt64, attempt: UInt64) -> Int {
        Int(Mix.hash(Mix.hash(seed, 0xFA17, key), attempt) % 1_000_000)
    }

    /// What a fault draw is keyed by: a token push's token or a broadcast's channel, with its body's `aps.timestamp`
    /// (nil for a request without both: channel management, a body without a readable timestamp; those draw from the
    /// loop's sequence, ``faultDraw(loop:draw:)``).
    static func identity(_ r: RequestInput, tape: inout JSONTape) -> UInt64? {
        let device = "/3/device/".utf8
        let target: UInt64
        if r.path.count > device.count, r.path.starts(with: device) {
            target = RetryTracker.hash(r.path[device.count...], salt: 0x70CE)
        } else if r.path.starts(with: "/4/broadcasts/".utf8),
            case .success(let (channel, _)) = RequestCheck.channelId(r.headers)
        {
            target = RetryTracker.hash(channel, salt: 0xC4A7)
        } else {
            return nil
        }
        guard let timestamp = apsTimestamp(r.body, tape: &tape) else { return nil }
        return Mix.hash(target, UInt64(bitPattern: timestamp))
    }

    /// The `n`th fault draw of loop `loop`, uniform in [0, 1,000,000).
    ///
    /// Each loop's stream is keyed by (seed, loop), and the draw's number goes where `Mix.hash` mixes it most (its
    /// second word): a counter in its last word gives correlated neighbours (Box–Muller's p99 came out 60% low).
    func faultDraw(loop: Int, draw n: UInt64) -> Int {
        Int(Mix.hash(Mix.hash(seed, 0xFA17, UInt64(loop)), n) % 1_000_000)
    }

    /// Whether `elapsed` (nanoseconds since the loop started serving) is inside a stall window; if so, when the
    /// window ends (nanoseconds since the start).
    func stallEnd(elapsedNanos elapsed: UInt64) -> UInt64? {
        guard stallEveryNanos > 0, elapsed >= stallEveryNanos else { return nil }
        let into = elapsed % stallEveryNanos
        return into < stallNanos ? elapsed - into + stallNanos : nil
    }

    // MARK: Parsing the flags

    /// A flag's text that could not be read.
    public struct ParseError: Error, CustomStringConvertible, Equatable {
        public var description: String
        init(_ d: String) { description = d }
    }

    /// A duration such as `30ms`, `1.5s`, `250us`, `2m`.
    static func parseDuration(_ text: Substring, _ flag: String) throws(ParseError) -> UInt64 {
        let units: [(String, Double)] = [("ms", 1e6), ("us", 1e3), ("µs", 1e3), ("ns", 1), ("s", 1e9), ("m", 6e10)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            guard let value = Double(text.dropLast(suffix.count)), value.isFinite, value >= 0 else { break }
            let nanos = value * scale
            guard nanos <= 3.6e12 else { throw ParseError("\(flag): \(text) is over an hour") }
            return UInt64(nanos.rounded())
        }
        throw ParseError("\(flag): expected a duration such as 30ms, 1.5s or 250us, got \"\(text)\"")
    }

    /// `--latency 30ms` (fixed) or `--latency p50=20ms,p99=250ms` (lognormal through both).
    public static func parseLatency(_ text: String) throws(ParseError) -> Latency {
        let flag = "--latency"
        guard text.contains("=") else {
            let nanos = try parseDuration(Substring(text), flag)
            return nanos == 0 ? .none : .fixed(nanos: nanos)
        }
        var p50: UInt64?
        var p99: UInt64?
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2 else {
                throw ParseError("\(flag): expected p50=DURATION,p99=DURATION, got \"\(part)\"")
            }
            let value = try parseDuration(pair[1], flag)
            switch pair[0] {
            case "p50" where p50 == nil: p50 = value
            case "p99" where p99 == nil: p99 = value
            default: throw ParseError("\(flag): expected p50=DURATION,p99=DURATION, got \"\(part)\"")
            }
        }
        guard let p50, let p99 else { throw ParseError("\(flag): give both p50= and p99=, got \"\(text)\"") }
        guard p50 > 0, p99 > p50 else {
            throw ParseError("\(flag): expected 0 < p50 < p99, got \"\(text)\"")
        }
        let mu = log(Double(p50))
        return .lognormal(mu: mu, sigma: (log(Double(p99)) - mu) / 2.3263)
    }

    /// `--faults 503=1%,429=0.5%,500=0.1%,reset=0.1%,goaway-every=30s,stall-every=10s:1s` into `faults`.
    public static func parseFaults(_ text: String, into faults: inout ServeFaults) throws(ParseError) {
        let flag = "--faults"
        var seen = Set<Substring>()
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2, !pair[1].isEmpty else {
                throw ParseError(
                    "\(flag): expected KIND=VALUE (503=1%, 429=0.5%, 500=0.1%, reset=0.1%, goaway-every=30s, "
                        + "stall-every=10s:1s), got \"\(part)\"")
            }
            let (kind, value) = (pair[0], pair[1])
            guard seen.insert(kind).inserted else { throw ParseError("\(flag): \(kind) given twice") }
            switch kind {
            case "503": faults.serviceUnavailablePPM = try parseShare(value, kind)
            case "429": faults.tooManyRequestsPPM = try parseShare(value, kind)
            case "500": faults.internalServerErrorPPM = try parseShare(value, kind)
            case "reset": faults.resetPPM = try parseShare(value, kind)
            case "goaway-every":
                faults.goAwayEveryNanos = try parseDuration(value, "\(flag) goaway-every")
                guard faults.goAwayEveryNanos >= 1_000_000 else {
                    throw ParseError("\(flag): goaway-every must be at least 1ms, got \"\(value)\"")
                }
            case "stall-every":
                let times = value.split(separator: ":", omittingEmptySubsequences: false)
                guard times.count == 2 else {
                    throw ParseError("\(flag): expected stall-every=EVERY:FOR (e.g. 10s:1s), got \"\(value)\"")
                }
                faults.stallEveryNanos = try parseDuration(times[0], "\(flag) stall-every")
                faults.stallNanos = try parseDuration(times[1], "\(flag) stall-every")
                guard faults.stallNanos >= 1_000_000, faults.stallNanos < faults.stallEveryNanos else {
                    throw ParseError("\(flag): stall-every=EVERY:FOR needs 1ms <= FOR < EVERY, got \"\(value)\"")
                }
            default:
                throw ParseError(
                    "\(flag): unknown kind \"\(kind)\" (expected 503, 429, 500, reset, goaway-every, stall-every)")
            }
        }
        guard faults.sharePPM <= 1_000_000 else {
            throw ParseError("\(flag): the shares of 503, 429, 500 and reset add up to over 100%")
        }
        faults.faultsText = text
    }

    /// A share such as `1%`, `0.5%` or `0.0001%` in parts per million (at most 100%, in steps of 0.0001%).
    static func parseShare(_ text: Substring, _ kind: Substring) throws(ParseError) -> Int {
        guard text.hasSuffix("%"), let percent = Double(text.dropLast()), percent.isFinite, percent >= 0,
            percent <= 100
        else { throw ParseError("--faults: \(kind) expects a share from 0% to 100%, such as 0.5%, got \"\(text)\"") }
        let ppm = percent * 10_000
        guard abs(ppm - ppm.rounded()) < 1e-6 else {
            throw ParseError("--faults: \(kind)=\(text) is finer than 0.0001%")
        }
        return Int(ppm.rounded())
    }
}

/// How many times each push identity (``ServeFaults/identity(_:tape:)``) has arrived, every loop of a serve
/// together (one table, under a lock: `--faults` only). At most `capacity` identities; past them an identity's
/// attempt reads 0 (counted in `overCapacity`).
final class FaultAttempts: @unchecked Sendable {
    // @unchecked: `counts` and `overCapacity` are touched only under `lock`.
    private let lock = Lock()
    private var counts: [UInt64: UInt32] = [:]
    private var over = 0
    let capacity: Int

    init(capacity: Int = 1 << 20) { self.capacity = capacity }

    /// This arrival's attempt (0 the first time), counted.
    func next(_ key: UInt64) -> UInt64 {
        lock.withLock {
            if let n = counts[key] {
                counts[key] = n &+ 1
                return UInt64(n)
            }
            guard counts.count < capacity else {
                over += 1
                return 0
            }
            counts[key] = 1
            return 0
        }
    }

    var overCapacity: Int { lock.withLock { over } }
}
