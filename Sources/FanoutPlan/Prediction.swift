/// What a target needs, read off the fitted USL curve.
public struct Prediction: Sendable {
    public var target: PlanTarget
    /// Deliveries per second the target needs: fanout ÷ within.
    public var requiredPerSecond: Double
    public var coresPerMachine: Int
    public var measuredWorkers: [Int]
    /// The fewest workers (one core each) whose fitted throughput reaches the requirement; nil when
    /// no worker count does (beyond the USL's peak).
    public var workersNeeded: Int?
    public var throughputAtNeeded: Double?
    /// Spare capacity at `workersNeeded`: X(N) / required − 1.
    public var margin: Double?
    /// Machines of this size for `workersNeeded` workers.
    public var machines: Int?
    /// `workersNeeded` lies outside the measured worker counts: the curve is extrapolated.
    public var extrapolated: Bool
    /// The requirement is above the most the fitted curve ever gives (X(N*), or λ/σ with κ = 0):
    /// unreachable by adding workers; the devices must be sharded across independent machines.
    public var beyondPeak: Bool
    /// When beyond the peak: workers per machine (the best count up to the machine's cores and N*),
    /// their fitted throughput, and machines needed if shards add linearly.
    public var shardWorkersPerMachine: Int?
    public var shardThroughputPerMachine: Double?
    public var shardMachines: Int?
    /// Caveats in words.
    public var notes: [String]

    public static func make(
        fit: USLFit, target: PlanTarget, measuredWorkers: [Int], coresPerMachine: Int
    )
        -> Prediction
    {
        let m = fit.model
        let required = target.requiredPerSecond
        let cores = max(coresPerMachine, 1)
        var p = Prediction(
            target: target, requiredPerSecond: required, coresPerMachine: cores, measuredWorkers: measuredWorkers,
            workersNeeded: nil, throughputAtNeeded: nil, margin: nil, machines: nil, extrapolated: false,
            beyondPeak: false, shardWorkersPerMachine: nil, shardThroughputPerMachine: nil, shardMachines: nil,
            notes: [])
        let maxMeasured = measuredWorkers.max() ?? 0
        if let ceiling = m.maxThroughput, required > ceiling {
            p.beyondPeak = true
            let limit = min(cores, max(Int((m.peakWorkers ?? Double(cores)).rounded(.down)), 1))
            let best = (1...limit).max { m.throughput(Double($0)) < m.throughput(Double($1)) } ?? 1
            let perMachine = m.throughput(Double(best))
            p.shardWorkersPerMachine = best
            p.shardThroughputPerMachine = perMachine
            p.shardMachines = Int((required / perMachine).rounded(.up))
            let peak = m.peakWorkers.map { "N* = \(PlanText.fixed($0, 1))" } ?? "N* = ∞ (κ = 0)"
            p.notes.append(
                "the requirement is above the fitted curve's maximum \(PlanText.rate(ceiling))/s "
                    + "(\(peak)): no number of workers in one pool reaches it; shard the devices across machines "
                    + "(fanout run --shard K/N). The machine count assumes shards add linearly, which is optimistic: "
                    + "every shard still encodes, validates and routes every event")
        } else {
            var n = 1
            while n < 10_000_000, m.throughput(Double(n)) < required { n += n < 1024 ? 1 : n / 1024 }
            p.workersNeeded = n
            p.throughputAtNeeded = m.throughput(Double(n))
            p.margin = m.throughput(Double(n)) / required - 1
            p.machines = (n + cores - 1) / cores
            p.extrapolated = n > maxMeasured || n < (measuredWorkers.min() ?? 1)
            if p.extrapolated {
                p.notes.append(
                    "extrapolated: \(n) workers lies beyond the measured "
                        + "\(PlanText.list(measuredWorkers)) worker\(maxMeasured == 1 ? "" : "s")")
            }
            if let peak = m.peakWorkers, Double(n) > peak {
                p.notes.append("beyond the USL peak N* = \(PlanText.fixed(peak, 1))")
            }
            if n > cores {
                p.notes.append(
                    "more workers than this machine's \(cores) cores: \(p.machines!) machines of this "
                        + "size, assuming workers on other machines behave like local ones (they share nothing, and "
                        + "each handles every event for its own devices)")
            }
        }
        if fit.underdetermined {
            p.notes.append("the fit is underdetermined (\(fit.note)); the prediction leans on that assumption")
        }
        p.notes.append(
            "assumes the target's deliveries cost what the scenario's cost on average (same payloads, "
                + "same mix of broadcast and per-token pushes) and that the SLOs hold at the knee rate")
        return p
    }
}
