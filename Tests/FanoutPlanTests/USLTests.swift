import Testing

@testable import FanoutPlan

@Suite("USL fit")
struct USLTests {
    /// Deterministic multiplicative noise in [-amplitude, +amplitude] (a fixed LCG, no global state).
    static func noisy(_ values: [Double], amplitude: Double, seed: UInt64 = 42) -> [Double] {
        var state = seed
        return values.map { v in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let u = Double(state >> 11) / Double(1 << 53)  // [0, 1)
            return v * (1 + amplitude * (2 * u - 1))
        }
    }

    static func relativeError(_ a: Double, _ b: Double) -> Double { abs(a - b) / abs(b) }

    static let truth = USL(lambda: 250_000, sigma: 0.04, kappa: 0.0005)

    @Test("exact synthetic data: λ, σ, κ recovered within 1% (to 1e-6 in fact), R² = 1")
    func exact() throws {
        let n = (1...32).map(Double.init)
        let x = n.map { Self.truth.throughput($0) }
        let fit = try #require(USLFit.fit(workers: n, throughput: x))
        #expect(Self.relativeError(fit.model.lambda, Self.truth.lambda) < 1e-6)
        #expect(Self.relativeError(fit.model.sigma, Self.truth.sigma) < 1e-6)
        #expect(Self.relativeError(fit.model.kappa, Self.truth.kappa) < 1e-6)
        #expect(try #require(fit.rSquared) > 0.999_999)
        #expect(!fit.underdetermined && fit.freeParameters == 3)
        let peak = try #require(fit.model.peakWorkers)
        #expect(abs(peak - (0.96 / 0.0005).squareRoot()) < 1e-3)
        // σ(N−1) against κN(N−1): coherency takes over from N = σ/κ = 80.
        #expect(fit.model.dominantTerm(at: 32) == "contention (σ)")
        #expect(fit.model.dominantTerm(at: 100) == "coherency (κ)")
    }

    @Test(
        "noisy synthetic data (±0.1% multiplicative, 3 repeats per N): λ, σ, κ within 1%",
        arguments: [UInt64(1), 7, 42])
    func noisy(seed: UInt64) throws {
        let base = (1...48).map(Double.init)
        let n = base + base + base
        let x = Self.noisy(n.map { Self.truth.throughput($0) }, amplitude: 0.001, seed: seed)
        let fit = try #require(USLFit.fit(workers: n, throughput: x))
        #expect(Self.relativeError(fit.model.lambda, Self.truth.lambda) < 0.01, "λ \(fit.model.lambda)")
        #expect(Self.relativeError(fit.model.sigma, Self.truth.sigma) < 0.01, "σ \(fit.model.sigma)")
        #expect(Self.relativeError(fit.model.kappa, Self.truth.kappa) < 0.01, "κ \(fit.model.kappa)")
        #expect(try #require(fit.rSquared) > 0.999)
    }

    @Test("κ = 0 in the data: the fit keeps κ at its bound 0 (not negative), σ within 1%")
    func contentionOnly() throws {
        let truth = USL(lambda: 1000, sigma: 0.1, kappa: 0)
        let n = (1...16).map(Double.init)
        let x = Self.noisy(n.map { truth.throughput($0) }, amplitude: 0.0005)
        let fit = try #require(USLFit.fit(workers: n, throughput: x))
        #expect(fit.model.kappa >= 0 && fit.model.kappa < 1e-5)
        #expect(Self.relativeError(fit.model.sigma, 0.1) < 0.01)
        #expect(Self.relativeError(fit.model.lambda, 1000) < 0.01)
        #expect(fit.model.peakWorkers == nil && fit.model.dominantTerm(at: 16) == "contention (σ)")
        #expect(abs(try #require(fit.model.maxThroughput) - fit.model.lambda / fit.model.sigma) < 1e-6)
    }

    @Test("super-linear looking data does not give a negative σ: σ is held at 0")
    func boundSigma() throws {
        let n: [Double] = [1, 2, 3, 4]
        let x: [Double] = [100, 205, 310, 415]
        let fit = try #require(USLFit.fit(workers: n, throughput: x))
        #expect(fit.model.sigma >= 0 && fit.model.kappa >= 0)
    }

    @Test("two worker counts: underdetermined, κ fixed at 0, λ and σ through the points")
    func twoPoints() throws {
        let fit = try #require(USLFit.fit(workers: [1, 2], throughput: [600_000, 1_000_000]))
        #expect(fit.underdetermined && fit.freeParameters == 2 && fit.model.kappa == 0)
        #expect(Self.relativeError(fit.model.lambda, 600_000) < 1e-9)
        #expect(Self.relativeError(fit.model.sigma, 0.2) < 1e-9)  // 2·600k/(1+σ) = 1M
        #expect(fit.note.contains("κ fixed at 0"))
        #expect(fit.model.peakWorkers == nil)
        #expect(Self.relativeError(try #require(fit.model.maxThroughput), 3_000_000) < 1e-9)
    }

    @Test("one worker count: λ = X/N, σ = κ = 0, no R²")
    func onePoint() throws {
        let fit = try #require(USLFit.fit(workers: [1], throughput: [5000]))
        #expect(fit.model == USL(lambda: 5000, sigma: 0, kappa: 0) && fit.rSquared == nil && fit.underdetermined)
    }

    @Test("no usable points: no fit")
    func empty() {
        #expect(USLFit.fit(workers: [], throughput: []) == nil)
        #expect(USLFit.fit(workers: [1], throughput: [0]) == nil)
    }
}
