// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "fanout",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "fanout", targets: ["fanout"]),
        .library(name: "FanoutCore", targets: ["FanoutCore"]),
        .library(name: "FanoutTrace", targets: ["FanoutTrace"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2")
    ],
    targets: [
        // The hot path: pure Swift, no Foundation, no per-update allocation.
        .target(name: "FanoutCore"),
        // Trace reading, replay on the virtual clock, state dump (spec/TRACE.md).
        .target(name: "FanoutTrace", dependencies: ["FanoutCore"]),
        .executableTarget(
            name: "fanout",
            dependencies: [
                "FanoutCore",
                "FanoutTrace",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(name: "FanoutCoreTests", dependencies: ["FanoutCore"]),
        .testTarget(
            name: "FanoutTraceTests",
            dependencies: ["FanoutTrace", "FanoutCore"],
            resources: [.copy("Fixtures")], swiftSettings: []
        ),
        .testTarget(name: "FanoutCLITests", dependencies: ["fanout"], resources: [.copy("Resources")]),
    ],
    swiftLanguageModes: [.v6]
)
