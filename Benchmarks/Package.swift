// swift-tools-version:6.1
// The benchmark suites of fanout (package-benchmark), kept out of the main build: `make bench`,
// `make bench-check`, `make callgrind` in the root Makefile drive them. See README.md here.
import PackageDescription

let package = Package(
    name: "fanout-benchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "fanout", path: ".."),
        // MallocInterposer only: the default traits also pull a runtime interposer that is not mirrored here,
        // and the retain/release metrics it provides crash in 1.38.1 anyway.
        .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
    ],
    targets: [
        // Inputs shared by the suites and the callgrind driver: the match schema, content variants, populations
        // built through FanoutCore's public API, and a deterministic in-memory trace.
        .target(
            name: "BenchFixtures",
            dependencies: [.product(name: "FanoutCore", package: "fanout")]
        ),
        // What every suite shares: the thread-CPU-time metric and the threshold tolerances.
        .target(name: "BenchSupport", dependencies: [.product(name: "Benchmark", package: "benchmark")]),
        // The same timer churn and wakeups as the Loop suite, written against libuv directly in C.
        .target(name: "CRawUV", linkerSettings: [.linkedLibrary("uv")]),
        // Runs N token updates (encode → validate → route → apply) for `make callgrind`.
        .executableTarget(
            name: "callgrind-token",
            dependencies: ["BenchFixtures", .product(name: "FanoutCore", package: "fanout")],
            path: "Sources/CallgrindToken"
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The suites: one executable per folder under Benchmarks/, run by `swift package benchmark`.
let benchmarkPlugin: Target.PluginUsage = .plugin(name: "BenchmarkPlugin", package: "benchmark")
let benchmarkLibrary: Target.Dependency = .product(name: "Benchmark", package: "benchmark")
let benchSupport: Target.Dependency = "BenchSupport"

package.targets += [
    .executableTarget(
        name: "Core",
        dependencies: [
            benchmarkLibrary, benchSupport, "BenchFixtures",
            .product(name: "FanoutCore", package: "fanout"),
            .product(name: "FanoutTrace", package: "fanout"),
        ],
        path: "Benchmarks/Core",
        plugins: [benchmarkPlugin]
    ),
    .executableTarget(
        name: "Peer",
        dependencies: [
            benchmarkLibrary, benchSupport, "BenchFixtures", .product(name: "FanoutCore", package: "fanout"),
        ],
        path: "Benchmarks/Peer",
        plugins: [benchmarkPlugin]
    ),
    .executableTarget(
        name: "Metrics",
        dependencies: [
            benchmarkLibrary, benchSupport,
            .product(name: "FanoutMetrics", package: "fanout"),
            .product(name: "FanoutHistogramLog", package: "fanout"),
            .product(name: "Histogram", package: "hdrhistogram-swift"),
        ],
        path: "Benchmarks/Metrics",
        plugins: [benchmarkPlugin]
    ),
    .executableTarget(
        name: "Loop",
        dependencies: [benchmarkLibrary, benchSupport, "CRawUV", .product(name: "UVLoop", package: "fanout")],
        path: "Benchmarks/Loop",
        plugins: [benchmarkPlugin]
    ),
]
