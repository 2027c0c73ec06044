#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Gunther's Universal Scalability Law: X(N) = λN / (1 + σ(N − 1) + κN(N − 1)), throughput at N
/// workers with λ the throughput of one, σ the contention (serial) share and κ the coherency
/// (crosstalk) cost.
public struct USL: Sendable, Equatable {
    public var lambda: Double
    public var sigma: Double
    public var kappa: Double

    public func throughput(_ n: Double) -> Double {
        lambda * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))
    }

    /// The N of peak throughput, √((1 − σ)/κ); nil (unbounded) when κ = 0 and σ < 1; 1 when σ ≥ 1.
    public var peakWorkers: Double? {
        if sigma >= 1 { return 1 }
        guard kappa > 0 else { return nil }
        return ((1 - sigma) / kappa).squareRoot()
    }

    /// The highest throughput any N reaches: X(N*), or the ceiling λ/σ when κ = 0 (nil: unbounded).
    public var maxThroughput: Double? {
        if let peak = peakWorkers { return max(throughput(peak), throughput(1)) }
        return sigma > 0 ? lambda / sigma : nil
    }

    /// Which term limits scaling at `n` workers: σ(N − 1) (contention) or κN(N − 1) (coherency).
    /// They are equal at N = σ/κ.
    public func dominantTerm(at n: Double) -> String {
        let contention = sigma * (n - 1)
        let coherency = kappa * n * (n - 1)
        if contention == 0 && coherency == 0 { return "none (linear)" }
        return coherency > contention ? "coherency (κ)" : "contention (σ)"
    }
}

/// A least-squares fit of the USL to measured (N, X) points.
///
/// 1. Linearised start: N/X = 1/λ + (σ/λ)(N − 1) + (κ/λ)N(N − 1) is linear in (1/λ, σ/λ, κ/λ);
///    it is solved by weighted least squares (weights 1/(N/X)², i.e. relative errors) with σ, κ ≥ 0
///    by trying every active set of the bounds and keeping the best feasible one.
/// 2. Refinement: Levenberg–Marquardt on the original form, minimising Σ((X̂ − X)/X)² (relative
///    residuals: measurement noise is multiplicative), σ and κ projected onto ≥ 0.
///
/// With fewer than three distinct N, three parameters are underdetermined: κ is fixed at 0 (and
/// with one N, σ too); `underdetermined` says so.
public struct USLFit: Sendable {
    public var model: USL
    /// 1 − SS_res/SS_tot on X (nil with a single point: nothing to explain).
    public var rSquared: Double?
    /// Relative root-mean-square residual, √(mean((X̂ − X)/X)²).
    public var relativeRMS: Double
    public var points: Int
    public var distinctWorkers: Int
    public var freeParameters: Int
    /// Fewer distinct N than parameters: some were fixed (κ = 0, maybe σ = 0).
    public var underdetermined: Bool
    /// What was fixed and why, for the report.
    public var note: String

    public static func fit(workers: [Double], throughput: [Double]) -> USLFit? {
        precondition(workers.count == throughput.count)
        let pts = zip(workers, throughput).filter { $0.0 >= 1 && $0.1 > 0 && $0.0.isFinite && $0.1.isFinite }
        guard !pts.isEmpty else { return nil }
        let n = pts.map(\.0)
        let x = pts.map(\.1)
        let distinct = Set(n).count
        var free = [true, true, true]
        var note = ""
        if distinct < 3 { free[2] = false }
        if distinct < 2 { free[1] = false }
        if distinct == 2 {
            note =
                "only 2 distinct worker counts for 3 parameters: κ fixed at 0 (λ and σ pass exactly "
                + "through the points when there is one point per count; R² then says nothing)"
        } else if distinct == 1 {
            note = "a single worker count: σ and κ fixed at 0, λ = X/N"
        }
        var model = linearStart(n, x, free: free)
        model = refine(model, n, x, free: free)
        let predicted = n.map { model.throughput($0) }
        let mean = x.reduce(0, +) / Double(x.count)
        let ssTot = x.reduce(0) { $0 + ($1 - mean) * ($1 - mean) }
        let ssRes = zip(x, predicted).reduce(0) { $0 + ($1.0 - $1.1) * ($1.0 - $1.1) }
        let rel = zip(x, predicted).reduce(0) { $0 + (($1.1 - $1.0) / $1.0) * (($1.1 - $1.0) / $1.0) }
        return USLFit(
            model: model, rSquared: ssTot > 0 ? 1 - ssRes / ssTot : nil,
            relativeRMS: (rel / Double(x.count)).squareRoot(), points: x.count, distinctWorkers: distinct,
            freeParameters: free.filter { $0 }.count, underdetermined: distinct < 3, note: note)
    }

    // MARK: Linearised start

    static func linearStart(_ n: [Double], _ x: [Double], free: [Bool]) -> USL {
        let y = zip(n, x).map { $0 / $1 }
        let w = y.map { 1 / ($0 * $0) }
        let columns: [[Double]] = [n.map { _ in 1 }, n.map { $0 - 1 }, n.map { $0 * ($0 - 1) }]
        var best: (cost: Double, coefficients: [Double])?
        // Active sets: each of σ/λ, κ/λ free (if allowed) or held at 0.
        for mask in 0..<4 {
            let useB = free[1] && mask & 1 != 0
            let useC = free[2] && mask & 2 != 0
            if (mask & 1 != 0 && !free[1]) || (mask & 2 != 0 && !free[2]) { continue }
            var chosen = [0]
            if useB { chosen.append(1) }
            if useC { chosen.append(2) }
            var a = [[Double]](repeating: [Double](repeating: 0, count: chosen.count), count: chosen.count)
            var b = [Double](repeating: 0, count: chosen.count)
            for i in y.indices {
                for (r, cr) in chosen.enumerated() {
                    b[r] += w[i] * columns[cr][i] * y[i]
                    for (c, cc) in chosen.enumerated() { a[r][c] += w[i] * columns[cr][i] * columns[cc][i] }
                }
            }
            guard let solution = solve(a, b) else { continue }
            var coefficients = [0.0, 0.0, 0.0]
            for (k, c) in chosen.enumerated() { coefficients[c] = solution[k] }
            guard coefficients[0] > 0, coefficients[1] >= 0, coefficients[2] >= 0 else { continue }
            var cost = 0.0
            for i in y.indices {
                let fit = coefficients[0] + coefficients[1] * columns[1][i] + coefficients[2] * columns[2][i]
                cost += w[i] * (fit - y[i]) * (fit - y[i])
            }
            if best == nil || cost < best!.cost { best = (cost, coefficients) }
        }
        guard let c = best?.coefficients else {
            // Degenerate data: the best single-worker rate, linear scaling.
            let lambda = zip(n, x).map { $1 / $0 }.max() ?? 1
            return USL(lambda: lambda, sigma: 0, kappa: 0)
        }
        return USL(lambda: 1 / c[0], sigma: c[1] / c[0], kappa: c[2] / c[0])
    }

    // MARK: Levenberg–Marquardt

    static func cost(_ m: USL, _ n: [Double], _ x: [Double]) -> Double {
        var s = 0.0
        for i in n.indices {
            let r = (m.throughput(n[i]) - x[i]) / x[i]
            s += r * r
        }
        return s
    }

    static func refine(_ start: USL, _ n: [Double], _ x: [Double], free: [Bool]) -> USL {
        var p = [start.lambda, start.sigma, start.kappa]
        func model(_ p: [Double]) -> USL { USL(lambda: p[0], sigma: p[1], kappa: p[2]) }
        var current = cost(model(p), n, x)
        var mu = 1e-3
        for _ in 0..<500 {
            // Jacobian of the relative residuals.
            var jtj = [[Double]](repeating: [0, 0, 0], count: 3)
            var jtr = [0.0, 0.0, 0.0]
            for i in n.indices {
                let ni = n[i]
                let d = 1 + p[1] * (ni - 1) + p[2] * ni * (ni - 1)
                let f = p[0] * ni / d
                let r = (f - x[i]) / x[i]
                let g = [
                    ni / d / x[i], -p[0] * ni * (ni - 1) / (d * d) / x[i],
                    -p[0] * ni * ni * (ni - 1) / (d * d) / x[i],
                ]
                for a in 0..<3 {
                    jtr[a] += g[a] * r
                    for b in 0..<3 { jtj[a][b] += g[a] * g[b] }
                }
            }
            // A parameter at its bound whose gradient pushes it below 0 stays there this round.
            var active = free
            for k in 1...2 where active[k] && p[k] <= 0 && jtr[k] > 0 { active[k] = false }
            let index = (0..<3).filter { active[$0] }
            var improved = false
            while mu < 1e16 {
                var a = index.map { r in index.map { c in jtj[r][c] } }
                for k in index.indices { a[k][k] += mu * max(jtj[index[k]][index[k]], 1e-300) }
                guard let step = solve(a, index.map { -jtr[$0] }) else {
                    mu *= 10
                    continue
                }
                var q = p
                for (k, j) in index.enumerated() { q[j] += step[k] }
                if q[0] <= 0 { q[0] = p[0] / 2 }
                q[1] = max(q[1], 0)
                q[2] = max(q[2], 0)
                let c = cost(model(q), n, x)
                if c < current {
                    let change = zip(p, q).map { abs($0 - $1) / max(abs($0), 1e-12) }.max() ?? 0
                    p = q
                    let before = current
                    current = c
                    mu = max(mu / 3, 1e-12)
                    improved = change > 1e-12 && (before - c) > 1e-18 * max(before, 1e-300)
                    break
                }
                mu *= 4
            }
            if !improved || current == 0 { break }
        }
        return model(p)
    }

    /// Gaussian elimination with partial pivoting; nil when singular.
    static func solve(_ a: [[Double]], _ b: [Double]) -> [Double]? {
        let n = b.count
        var m = a
        var v = b
        for col in 0..<n {
            var pivot = col
            for r in col..<n where abs(m[r][col]) > abs(m[pivot][col]) { pivot = r }
            let scale = m.map { abs($0[col]) }.max() ?? 0
            guard abs(m[pivot][col]) > 1e-300, abs(m[pivot][col]) > scale * 1e-14 else { return nil }
            m.swapAt(col, pivot)
            v.swapAt(col, pivot)
            for r in (col + 1)..<n {
                let f = m[r][col] / m[col][col]
                for c in col..<n { m[r][c] -= f * m[col][c] }
                v[r] -= f * v[col]
            }
        }
        var out = [Double](repeating: 0, count: n)
        for r in stride(from: n - 1, through: 0, by: -1) {
            var s = v[r]
            for c in (r + 1)..<n { s -= m[r][c] * out[c] }
            out[r] = s / m[r][r]
        }
        return out
    }
}
