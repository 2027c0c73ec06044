// swift-tools-version:6.1
import PackageDescription

// libFuzzer targets, kept out of the main build and CI (`make fuzz` builds and runs them).
// Build with `swift build -c release -Xswiftc -sanitize=fuzzer,address`: every module gets coverage
// instrumentation and AddressSanitizer, and libFuzzer is linked in. Each executable's `main.swift` hands
// its `LLVMFuzzerTestOneInput` to libFuzzer's driver (`LLVMFuzzerRunDriver`), so SwiftPM links it as
// any executable (with `-parse-as-library` and libFuzzer's own `main`, SwiftPM's `--defsym
// main=<Module>_main` finds no symbol on Linux).
let package = Package(
    name: "fanout-fuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "fanout", path: "..")
    ],
    targets: [
        // Declares libFuzzer's driver entry point; the symbol comes with `-sanitize=fuzzer`.
        .systemLibrary(name: "CLibFuzzer"),
        // Arbitrary bytes as a push (headers + payload) through validate → route → apply on devices.
        .executableTarget(
            name: "FuzzPayload",
            dependencies: [
                "CLibFuzzer",
                .product(name: "FanoutCore", package: "fanout"),
                .product(name: "FanoutTrace", package: "fanout"),
            ]
        ),
        // Arbitrary bytes as a trace file through the line reader and the replay.
        .executableTarget(
            name: "FuzzTrace",
            dependencies: [
                "CLibFuzzer",
                .product(name: "FanoutTrace", package: "fanout"),
                .product(name: "FanoutCore", package: "fanout"),
            ]
        ),
        // Arbitrary bytes as a scenario file through Scenario.parse.
        .executableTarget(
            name: "FuzzScenario",
            dependencies: ["CLibFuzzer", .product(name: "FanoutSim", package: "fanout")]
        ),
        // Arbitrary bytes after a valid HTTP/2 preface into the server side of `fanout serve` (in memory).
        .executableTarget(
            name: "FuzzServe",
            dependencies: [
                "CLibFuzzer",
                .product(name: "FanoutAPNs", package: "fanout"),
                .product(name: "FanoutServe", package: "fanout"),
                .product(name: "FanoutWire", package: "fanout"),
                .product(name: "FanoutSim", package: "fanout"),
                // ServeEventsReport (the judge's value; its judge is FanoutAPNs').
                .product(name: "FanoutMetrics", package: "fanout"),
            ]
        ),
        // Arbitrary bytes as a server's side of the HTTP/2 client `fanout push` uses (in memory), requests submitted.
        .executableTarget(
            name: "FuzzPush",
            dependencies: [
                "CLibFuzzer",
                .product(name: "FanoutCore", package: "fanout"),
                .product(name: "FanoutWire", package: "fanout"),
                .product(name: "UVLoop", package: "fanout"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
