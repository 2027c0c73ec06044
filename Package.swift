// swift-tools-version:6.1
import PackageDescription

/// The request paths of `fanout serve` (FanoutAPNs's service, FanoutServe's server) and `fanout push` (FanoutPush's
/// run, FanoutWire's connections, UVLoop's streams) in release builds: exclusivity checked at compile time only.
/// The stored properties serve reads per request are `@exclusivity(unchecked)` where they are declared (H2Request's,
/// H2ServerConnection's in FanoutWire), but an access inlined into another module checked them at run time anyway
/// (callgrind at 1ab45d0: `swift_beginAccess` and its access set ~700 instructions a request, 13 calls in
/// `APNsServer.connection(_:received:)` alone, every one of an unchecked property); push paid one check a request
/// in `PushRun.route` and one a write in `TCPStream` and `H2Transport` (callgrind at 79fd3dd: ~115 instructions a
/// request). Debug builds (every test, the sanitizers) keep the run-time checks.
let wirePath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "fanout",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "fanout", targets: ["fanout"]),
        .library(name: "FanoutCore", targets: ["FanoutCore"]),
        .library(name: "FanoutTrace", targets: ["FanoutTrace"]),
        // For the nested benchmark package (Benchmarks/), which measures these layers on their own.
        .library(name: "FanoutMetrics", targets: ["FanoutMetrics"]),
        .library(name: "FanoutHistogramLog", targets: ["FanoutHistogramLog"]),
        .library(name: "UVLoop", targets: ["UVLoop"]),
        // For the nested fuzz package (Fuzz/), whose scenario target reads scenario files.
        .library(name: "FanoutSim", targets: ["FanoutSim"]),
        // For the fuzz package's serve target (the server side of `fanout serve`, in memory).
        .library(name: "FanoutServe", targets: ["FanoutServe"]),
        .library(name: "FanoutAPNs", targets: ["FanoutAPNs"]),
        .library(name: "FanoutWire", targets: ["FanoutWire"]),
    ],
    dependencies: [
        // Exact versions: a build (deploy/Dockerfile's image included) resolves these and nothing newer;
        // Package.resolved stays out of git.
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", exact: "0.2.0"),
    ],
    targets: [
        // The hot path: pure Swift, no Foundation, no per-update allocation.
        .target(name: "FanoutCore"),
        // Trace reading, replay on the virtual clock, state dump (docs/TRACE.md).
        .target(name: "FanoutTrace", dependencies: ["FanoutCore"]),
        // libuv (system library) and the only Swift code that touches it: event loop, timers, wakeups.
        .systemLibrary(name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .target(name: "UVLoop", dependencies: ["CLibUV", "FanoutCore"], swiftSettings: wirePath),
        // nghttp2 and OpenSSL (system libraries) and the only Swift that touches them: HTTP/2 server
        // sessions over UVLoop TCP streams, TLS over memory BIOs, ES256 signatures.
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // libcurl (system library): the HTTP client to a user's backend (trigger, registration), multi-socket
        // on a UVLoop loop.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .target(
            name: "FanoutWire", dependencies: ["FanoutCore", "UVLoop", "CNGHTTP2", "COpenSSL", "CCurl"],
            swiftSettings: wirePath),
        // Scenarios, population, arrival processes, workers on event loops, virtual and real time.
        .target(name: "FanoutSim", dependencies: ["FanoutCore", "FanoutMetrics", "FanoutHistogramLog", "UVLoop"]),
        // APNs without a socket (docs/INGEST.md): the request check in APNs's order, reasons and error bodies,
        // provider-token rules, the channel API, the service over the devices' pipeline, correlation and the judge.
        .target(
            name: "FanoutAPNs", dependencies: ["FanoutCore", "FanoutSim", "FanoutMetrics"], swiftSettings: wirePath),
        // The server on libuv loops: listeners, cross-loop handoff, faults, held answers, retries; the backend
        // clients (trigger, registration); a run's results (ServeResults, rendered by FanoutReport) and state.jsonl
        // (FanoutTrace's state dump of the live services).
        .target(
            name: "FanoutServe",
            dependencies: [
                "FanoutAPNs", "FanoutWire", "FanoutSim", "FanoutCore", "FanoutMetrics", "FanoutTrace", "UVLoop",
            ],
            swiftSettings: wirePath
        ),
        // `fanout push`: a scenario's pushes, or a trace's push lines, over HTTP/2 (FanoutWire's client) at their
        // intended times, its per-second intervals (the run folder it makes is written by FanoutReport).
        .target(
            name: "FanoutPush",
            dependencies: [
                "FanoutAPNs", "FanoutWire", "FanoutSim", "FanoutCore", "FanoutTrace", "FanoutMetrics", "UVLoop",
            ],
            swiftSettings: wirePath
        ),
        // HdrHistogram's V2 compressed encoding and interval log (hlog 1.3), DEFLATE through zlib.
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .target(
            name: "FanoutHistogramLog",
            dependencies: ["CZlib", .product(name: "Histogram", package: "hdrhistogram-swift")]
        ),
        // Everything about a sample's life: recording in HdrHistogram's layout, interval handover, per-event
        // completion, merge across workers and shards, the result types reports read.
        .target(name: "FanoutMetrics", dependencies: ["FanoutCore", "FanoutHistogramLog"]),
        // Run reports: summary.json/.md, report.html, .hgrm, latency.hlog; read back, compare, merge.
        .target(
            name: "FanoutReport",
            dependencies: [
                "FanoutCore", "FanoutMetrics", "FanoutHistogramLog",
            ]
        ),
        // Capacity planning: saturation search in real time, USL fit over worker counts, prediction.
        .target(
            name: "FanoutPlan",
            dependencies: [
                "FanoutCore", "FanoutMetrics", "FanoutHistogramLog", "FanoutSim", "FanoutReport",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        .executableTarget(
            name: "fanout",
            dependencies: [
                "FanoutCore",
                "FanoutTrace",
                "FanoutMetrics",
                "FanoutHistogramLog",
                "FanoutSim",
                "FanoutReport",
                "FanoutPlan",
                "FanoutAPNs",
                "FanoutServe",
                "FanoutPush",
                "FanoutWire",
                "UVLoop",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(name: "FanoutCoreTests", dependencies: ["FanoutCore"]),
        .testTarget(
            name: "FanoutTraceTests",
            dependencies: ["FanoutTrace", "FanoutCore"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "FanoutMetricsTests",
            dependencies: [
                "FanoutMetrics", "FanoutCore", "FanoutHistogramLog",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        .testTarget(
            name: "FanoutHistogramLogTests",
            dependencies: ["FanoutHistogramLog", .product(name: "Histogram", package: "hdrhistogram-swift")]
        ),
        .testTarget(name: "UVLoopTests", dependencies: ["UVLoop"]),
        .testTarget(name: "FanoutWireTests", dependencies: ["FanoutWire", "FanoutCore", "UVLoop"]),
        .testTarget(name: "FanoutAPNsTests", dependencies: ["FanoutAPNs", "FanoutWire", "FanoutSim", "FanoutCore"]),
        .testTarget(
            name: "FanoutServeTests",
            dependencies: [
                "FanoutServe", "FanoutAPNs", "FanoutWire", "FanoutSim", "FanoutCore", "FanoutMetrics", "FanoutReport",
            ],
            exclude: ["Golden"]  // read from the source tree (#filePath), so FANOUT_UPDATE_GOLDEN=1 can rewrite it
        ),
        .testTarget(name: "FanoutSimTests", dependencies: ["FanoutSim", "FanoutCore", "FanoutMetrics"]),
        .testTarget(
            name: "FanoutReportTests",
            dependencies: [
                "FanoutReport", "FanoutSim", "FanoutPlan", "FanoutCore", "FanoutMetrics", "FanoutHistogramLog",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            resources: [.copy("Golden")]
        ),
        .testTarget(
            name: "FanoutPlanTests", dependencies: ["FanoutPlan", "FanoutSim", "FanoutReport", "FanoutMetrics"]
        ),
        .testTarget(
            name: "FanoutCLITests", dependencies: ["fanout", "FanoutHistogramLog"],
            exclude: ["Golden"],  // read from the source tree (#filePath), so FANOUT_UPDATE_GOLDEN=1 can rewrite it
            resources: [.copy("Resources")]
        ),
        .testTarget(
            name: "FanoutPushTests",
            dependencies: ["FanoutPush", "FanoutSim", "FanoutWire", "FanoutReport", "FanoutMetrics"],
            exclude: ["Golden"]  // read from the source tree (#filePath), so FANOUT_UPDATE_GOLDEN=1 can rewrite it
        ),
    ],
    swiftLanguageModes: [.v6]
)
