/// How the offered rate is stepped to find the knee: the highest rate factor that passes.
public struct SearchSettings: Sendable, Equatable {
    /// The first factor tried.
    public var startFactor: Double = 1
    /// Geometric steps: up by this while steps pass, down while they fail.
    public var growth: Double = 2
    public var minFactor: Double = 1.0 / 16
    public var maxFactor: Double = 1000
    /// Bisection (at geometric midpoints) stops when first fail ÷ last pass is at most this.
    public var precision: Double = 1.05
    /// At most this many steps per search.
    public var maxSteps: Int = 16

    public init() {}
}

/// The result of a search: the bracket around the knee.
public struct SearchOutcome: Sendable, Equatable {
    /// The highest factor that passed (the knee); nil: none did, down to `minFactor`.
    public var lastPass: Double?
    /// The lowest factor that failed above it; nil: every factor passed, up to `maxFactor`.
    public var firstFail: Double?
    public var steps: Int
    /// Why the search stopped, in words.
    public var conclusion: String
    /// The search ended at a step the harness itself could not run (fanout's own trigger behind): why; the bracket
    /// is what was known before it (a lower bound on the knee).
    public var halted: String? = nil
}

/// Saturation search: geometric steps from `startFactor` (×growth while passing, ÷growth while
/// failing) until the outcome flips, then bisection at geometric midpoints between the last pass
/// and the first fail. The search assumes that passing is monotone in the rate; on a noisy machine
/// a spurious failure only moves the knee down (conservative).
public enum SaturationSearch {
    /// `measure` runs a step at a factor and says whether it passed; `proceed` is asked before every
    /// step (false: out of time, stop with what is known); `halt`, after every step, names why the search must end
    /// there (the harness could not run the step: it is neither a pass nor a fail).
    public static func run(
        _ s: SearchSettings, proceed: () -> Bool = { true }, halt: () -> String? = { nil },
        measure: (Double) throws -> Bool
    )
        rethrows -> SearchOutcome
    {
        precondition(s.growth > 1 && s.precision > 1 && s.minFactor > 0 && s.maxFactor >= s.minFactor)
        var steps = 0
        var pass: Double?
        var fail: Double?
        var f = min(max(s.startFactor, s.minFactor), s.maxFactor)
        var outOfTime = false
        var halted: (factor: Double, why: String)?
        func allowed() -> Bool {
            if steps >= s.maxSteps || outOfTime || halted != nil { return false }
            if !proceed() { outOfTime = true }
            return !outOfTime
        }
        /// nil: halted (neither pass nor fail).
        func step(_ factor: Double) throws -> Bool? {
            steps += 1
            let passed = try measure(factor)
            if let why = halt() {
                halted = (factor, why)
                return nil
            }
            return passed
        }
        // Bracket.
        while allowed() {
            guard let passed = try step(f) else { break }
            if passed {
                pass = f
                if fail != nil { break }
                if f >= s.maxFactor { break }
                f = min(f * s.growth, s.maxFactor)
            } else {
                fail = f
                if pass != nil { break }
                if f <= s.minFactor { break }
                f = max(f / s.growth, s.minFactor)
            }
        }
        // Bisect.
        while let lo = pass, let hi = fail, hi / lo > s.precision, allowed() {
            let mid = (lo * hi).squareRoot()
            guard let passed = try step(mid) else { break }
            if passed { pass = mid } else { fail = mid }
        }
        var conclusion: String
        switch (pass, fail) {
        case (let lo?, let hi?):
            conclusion =
                hi / lo <= s.precision
                ? "knee between ×\(PlanText.factor(lo)) (pass) and ×\(PlanText.factor(hi)) (fail)"
                : "stopped after \(steps) steps with the knee between ×\(PlanText.factor(lo)) and "
                    + "×\(PlanText.factor(hi))"
        case (let lo?, nil):
            conclusion = "every factor passed up to ×\(PlanText.factor(lo)): the knee lies beyond (a lower bound)"
        case (nil, let hi?):
            conclusion = "no factor passed down to ×\(PlanText.factor(hi))"
        case (nil, nil):
            conclusion = halted == nil ? "no step ran" : "no step judged"
        }
        if outOfTime { conclusion += " (stopped: out of time)" }
        if let halted {
            conclusion += "; harness-limited at ×\(PlanText.factor(halted.factor)): \(halted.why) (the search ended "
                + "there, neither pass nor fail)"
        }
        return SearchOutcome(
            lastPass: pass, firstFail: fail, steps: steps, conclusion: conclusion, halted: halted?.why)
    }
}
