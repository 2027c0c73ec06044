#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Stateless, seeded randomness: every choice is a hash of the seed and the choice's own keys, so
/// any worker can make any choice without sharing a generator, and the outcome does not depend on
/// how devices are split among workers.
public enum Mix {
    @inline(__always)
    public static func hash(_ a: UInt64, _ b: UInt64, _ c: UInt64 = 0, _ d: UInt64 = 0) -> UInt64 {
        var z = a &* 0x9E37_79B9_7F4A_7C15 ^ b
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9 ^ c
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB ^ d
        z = (z ^ (z >> 31)) &* 0x9E37_79B9_7F4A_7C15
        return z ^ (z >> 29)
    }

    /// Uniform in [0, 1).
    @inline(__always)
    public static func unit(_ h: UInt64) -> Double { Double(h >> 11) * 0x1.0p-53 }
}

/// Popularity by rank: P(k) ∝ 1 / k^s, sampled by inverting the CDF.
public struct Zipf: Sendable {
    public let cdf: [Double]

    public init(count: Int, exponent: Double) {
        var weights = (1...count).map { 1 / pow(Double($0), exponent) }
        let total = weights.reduce(0, +)
        var running = 0.0
        for i in weights.indices {
            running += weights[i] / total
            weights[i] = running
        }
        weights[count - 1] = 1
        cdf = weights
    }

    /// The index (rank − 1) for a uniform `u` in [0, 1).
    @inline(__always)
    public func sample(_ u: Double) -> Int {
        var low = 0
        var high = cdf.count - 1
        while low < high {
            let mid = (low + high) / 2
            if cdf[mid] > u { high = mid } else { low = mid + 1 }
        }
        return low
    }
}

/// One source event: a goal, a clock tick, a delivery stage. Every worker sees the same sequence.
public struct SourceEvent: Sendable, Equatable {
    public enum Kind: UInt8, Sendable {
        case update, end
        /// An offline window ends: held pushes are delivered.
        case offlineWindowEnd
    }

    /// Position in the run's event sequence (0, 1, 2, …); the payload timestamp derives from it.
    public var index: Int
    /// When the event is due, in nanoseconds since the start of the run (open loop: latency is
    /// measured from here, whenever the harness gets to it).
    public var intendedNanos: UInt64
    public var kind: Kind
    public var source: Int

    public init(index: Int, intendedNanos: UInt64, kind: Kind, source: Int) {
        self.index = index
        self.intendedNanos = intendedNanos
        self.kind = kind
        self.source = source
    }
}

/// The deterministic, time-ordered stream of source events of a scenario: arrivals (constant or
/// Poisson, piecewise rates and ramps), bursts, source ends and offline-window ends, merged.
public struct EventSchedule: Sendable {
    public let scenario: Scenario
    private let zipf: Zipf
    private var extra: [SourceEvent]  // bursts, ends, window ends: sorted, consumed from the front
    private var extraNext = 0
    private var arrivalSeconds: Double = 0
    private var arrivalCount: UInt64 = 0
    private var nextArrival: SourceEvent?
    private var emitted = 0
    private let endNanos: UInt64

    public init(scenario: Scenario, world: World) {
        self.scenario = scenario
        zipf = world.zipf
        endNanos = UInt64(scenario.durationSeconds * 1e9)
        var extra: [SourceEvent] = []
        for burst in scenario.arrival.bursts {
            for k in 0..<burst.events {
                let t = burst.atSeconds + burst.overSeconds * Double(k) / Double(max(burst.events, 1))
                guard t < scenario.durationSeconds else { break }  // a run shortened by --duration
                extra.append(
                    SourceEvent(
                        index: 0, intendedNanos: UInt64(t * 1e9), kind: .update,
                        source: burst.sourceRank - 1))
            }
        }
        for source in 0..<scenario.sources.count {
            if let end = world.sourceEndSeconds[source], end < scenario.durationSeconds {
                extra.append(SourceEvent(index: 0, intendedNanos: UInt64(end * 1e9), kind: .end, source: source))
            }
        }
        if let offline = scenario.faults.offline {
            var t = offline.windowSeconds
            while t < scenario.durationSeconds {
                extra.append(SourceEvent(index: 0, intendedNanos: UInt64(t * 1e9), kind: .offlineWindowEnd, source: -1))
                t += offline.windowSeconds
            }
        }
        // A final flush of held pushes at the end of the run.
        if scenario.faults.offline != nil {
            extra.append(SourceEvent(index: 0, intendedNanos: endNanos, kind: .offlineWindowEnd, source: -1))
        }
        self.extra = extra.enumerated().sorted {
            ($0.element.intendedNanos, $0.offset) < ($1.element.intendedNanos, $1.offset)
        }.map(\.element)
        nextArrival = nil
        nextArrival = makeArrival()
    }

    /// The next arrival of the open-loop process, or nil past the end of the run.
    private mutating func makeArrival() -> SourceEvent? {
        while true {
            let rate = scenario.ratePerSecond(at: arrivalSeconds)
            if rate <= 0 {
                // Jump to the next phase that has a rate.
                guard
                    let next = scenario.arrival.phases.first(where: {
                        $0.atSeconds > arrivalSeconds && ($0.ratePerSecond > 0 || ($0.rampToPerSecond ?? 0) > 0)
                    })
                else { return nil }
                arrivalSeconds = next.atSeconds
                continue
            }
            arrivalCount += 1
            let h = Mix.hash(scenario.seed, 0xA5, arrivalCount)
            switch scenario.arrival.process {
            case .constant: arrivalSeconds += 1 / rate
            case .poisson: arrivalSeconds += -log(1 - Mix.unit(h)) / rate
            }
            // Whole nanoseconds, so that accumulated rounding cannot move an arrival across an instant.
            arrivalSeconds = (arrivalSeconds * 1e9).rounded() / 1e9
            guard arrivalSeconds < scenario.durationSeconds else { return nil }
            let source = zipf.sample(Mix.unit(Mix.hash(scenario.seed, 0x5E, arrivalCount)))
            return SourceEvent(index: 0, intendedNanos: UInt64(arrivalSeconds * 1e9), kind: .update, source: source)
        }
    }

    private var peeked: SourceEvent??

    /// The event `next()` will return, without consuming it.
    public mutating func peek() -> SourceEvent? {
        if let p = peeked { return p }
        let event = produce()
        peeked = .some(event)
        return event
    }

    /// The next event in time order, or nil at the end of the run.
    public mutating func next() -> SourceEvent? {
        if let p = peeked {
            peeked = nil
            return p
        }
        return produce()
    }

    private mutating func produce() -> SourceEvent? {
        var event: SourceEvent
        if extraNext < extra.count, nextArrival == nil || extra[extraNext].intendedNanos <= nextArrival!.intendedNanos {
            event = extra[extraNext]
            extraNext += 1
        } else if let arrival = nextArrival {
            event = arrival
            nextArrival = makeArrival()
        } else {
            return nil
        }
        event.index = emitted
        emitted += 1
        return event
    }
}
