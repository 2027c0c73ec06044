import Foundation
import Testing

/// `deploy/Dockerfile` cannot be built here (no Docker engine), so its package lists are checked against what
/// the project itself needs: every system library of Package.swift is installed by `make deps` and by the
/// image's build stage, and every shared library the built `fanout` links from the system comes from a package
/// the image's runtime stage installs (or that Debian's slim base image has).
@Suite("deploy/Dockerfile covers what fanout needs")
struct DeployTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// The packages an `apt-get install` line of one Dockerfile stage names (`stage` 0: build, 1: runtime), without
    /// their pinned versions.
    static func dockerPackages(stage: Int) throws -> Set<String> {
        Set(try dockerPins(stage: stage).keys)
    }

    /// The packages an `apt-get install` line of one Dockerfile stage names, each with its pinned version (`NAME=V`;
    /// "" when not pinned).
    static func dockerPins(stage: Int) throws -> [String: String] {
        // What precedes the first FROM is comments and the ARGs of the base images.
        let stages = Array(try text("deploy/Dockerfile").components(separatedBy: "\nFROM ").dropFirst())
        #expect(stages.count == 2, "the Dockerfile has a build and a runtime stage")
        guard stage < stages.count else { return [:] }
        // Continuation lines joined, then the words after `install` up to the next `&&`.
        let joined = stages[stage].replacingOccurrences(of: "\\\n", with: " ")
        var packages: [String: String] = [:]
        for line in joined.split(separator: "\n") where line.contains("apt-get install") {
            let tail = line.components(separatedBy: "apt-get install").last!.components(separatedBy: "&&")[0]
            for word in tail.split(separator: " ") where !word.hasPrefix("-") {
                let parts = word.split(separator: "=", maxSplits: 1)
                packages[String(parts[0])] = parts.count == 2 ? String(parts[1]) : ""
            }
        }
        return packages
    }

    @Test("the image builds the same twice: base images by exact tag, Debian packages by version from a snapshot")
    func pinned() throws {
        let dockerfile = try DeployTests.text("deploy/Dockerfile")
        // The base images: the toolchain the tests build with, on bookworm; Debian's dated slim image.
        let swift = try CLI.launch(URL(fileURLWithPath: "/usr/bin/env"), ["swift", "--version"])
        let version = try #require(
            swift.stdout.range(of: #"Swift version [0-9]+\.[0-9]+\.[0-9]+"#, options: .regularExpression).map {
                String(swift.stdout[$0].dropFirst("Swift version ".count))
            }, "\(swift.stdout)")
        #expect(dockerfile.contains("\nARG SWIFT_IMAGE=swift:\(version)-bookworm\n"), "not the toolchain's \(version)")
        #expect(
            dockerfile.range(of: #"\nARG RUNTIME_IMAGE=debian:bookworm-[0-9]{8}-slim\n"#, options: .regularExpression)
                != nil)
        #expect(dockerfile.contains("FROM ${SWIFT_IMAGE} AS build") && dockerfile.contains("FROM ${RUNTIME_IMAGE}\n"))
        // apt: snapshot.debian.org at one instant, in both stages; every package at a version.
        #expect(
            dockerfile.range(of: #"\nARG DEBIAN_SNAPSHOT=[0-9]{8}T[0-9]{6}Z\n"#, options: .regularExpression) != nil)
        #expect(dockerfile.components(separatedBy: "snapshot.debian.org/archive/").count == 3)
        let build = try DeployTests.dockerPins(stage: 0)
        let runtime = try DeployTests.dockerPins(stage: 1)
        for (name, pinned) in build.merging(runtime, uniquingKeysWith: { a, _ in a }) {
            #expect(!pinned.isEmpty, "\(name) is not pinned to a version")
        }
        // A library and its headers from one source package, at one version.
        for (library, headers) in [
            ("libuv1", "libuv1-dev"), ("zlib1g", "zlib1g-dev"), ("libnghttp2-14", "libnghttp2-dev"),
            ("libssl3", "libssl-dev"), ("libcurl4", "libcurl4-openssl-dev"),
        ] {
            #expect(runtime[library] != nil && runtime[library] == build[headers], "\(library) and \(headers)")
        }
        // The Swift packages: every one at an exact version in Package.swift (Package.resolved stays out of git).
        let manifest = try DeployTests.text("Package.swift")
        let dependencies = manifest.components(separatedBy: ".package(url:").dropFirst()
        #expect(!dependencies.isEmpty)
        for dependency in dependencies {
            #expect(dependency.prefix(while: { $0 != ")" }).contains("exact:"), "not pinned: \(dependency.prefix(80))")
        }
        #expect(dockerfile.contains("COPY Package.swift ./"))
    }

    /// The apt providers of Package.swift's system libraries: `.apt(["libuv1-dev"])`.
    static func packageSwiftProviders() throws -> Set<String> {
        let source = try text("Package.swift")
        let regex = try NSRegularExpression(pattern: #"\.apt\(\["([^"]+)"\]\)"#)
        let range = NSRange(source.startIndex..., in: source)
        return Set(regex.matches(in: source, range: range).map { String(source[Range($0.range(at: 1), in: source)!]) })
    }

    /// The library (-dev) packages `make deps` installs when missing.
    static func makeDepsLibraries() throws -> Set<String> {
        let makefile = try text("Makefile")
        let regex = try NSRegularExpression(pattern: #"missing="\$\$missing ([a-z0-9.+-]+-dev)""#)
        let range = NSRange(makefile.startIndex..., in: makefile)
        return Set(regex.matches(in: makefile, range: range).map {
            String(makefile[Range($0.range(at: 1), in: makefile)!])
        })
    }

    /// `packages` and, recursively, every package their Depends and Pre-Depends name (each alternative), as
    /// `dpkg-query` knows them here; a package not installed here adds nothing.
    static func withDependencies(_ packages: Set<String>) throws -> Set<String> {
        var seen = packages
        var queue = Array(packages)
        while let package = queue.popLast() {
            let r = try CLI.launch(
                URL(fileURLWithPath: "/usr/bin/dpkg-query"), ["-W", "-f=${Depends},${Pre-Depends}", package])
            guard r.status == 0 else { continue }
            for choice in r.stdout.split(whereSeparator: { $0 == "," || $0 == "|" }) {
                guard let word = choice.split(separator: " ").first else { continue }
                let name = String(word.split(separator: ":").first ?? word)
                if seen.insert(name).inserted { queue.append(name) }
            }
        }
        return seen
    }

    @Test("make deps and the image's build stage install every system library Package.swift declares")
    func buildStage() throws {
        let declared = try DeployTests.packageSwiftProviders()
        #expect(declared.isSuperset(of: ["libuv1-dev", "zlib1g-dev", "libnghttp2-dev", "libssl-dev"]))
        let deps = try DeployTests.makeDepsLibraries()
        let build = try DeployTests.dockerPackages(stage: 0)
        #expect(declared.subtracting(deps).isEmpty, "make deps misses \(declared.subtracting(deps))")
        #expect(deps.subtracting(build).isEmpty, "the Dockerfile's build stage misses \(deps.subtracting(build))")
    }

    @Test("the image's runtime stage installs the package of every system library the binary links")
    func runtimeStage() throws {
        let ldd = try CLI.launch(URL(fileURLWithPath: "/usr/bin/ldd"), [CLI.binary.path])
        try #require(ldd.status == 0, "ldd: \(ldd.stderr)")
        // Paths under /lib or /usr/lib (the toolchain's own libraries, in a debug build, are not Debian's).
        let paths = ldd.stdout.split(separator: "\n").compactMap { line -> String? in
            guard let arrow = line.range(of: "=> ") else { return nil }
            let path = line[arrow.upperBound...].split(separator: " ").first.map(String.init) ?? ""
            return path.hasPrefix("/lib/") || path.hasPrefix("/usr/lib/") ? path : nil
        }
        #expect(paths.contains { $0.contains("libnghttp2") } && paths.contains { $0.contains("libuv") })
        // What debian:bookworm-slim has without an install (apt and dpkg depend on them).
        let base: Set<String> = ["libc6", "libgcc-s1", "libstdc++6", "zlib1g"]
        // apt installs a package with what it depends on (libcurl4: its protocols' and TLS libraries), so the
        // runtime stage's packages count with their dependencies (this machine's dpkg database, the same Debian).
        let runtime = try DeployTests.withDependencies(DeployTests.dockerPackages(stage: 1))
        for path in paths {
            let owner = try CLI.launch(URL(fileURLWithPath: "/usr/bin/dpkg"), ["-S", path])
            // dpkg names the package as `name:arch: path`; a path only reached through a symlink is retried
            // by its real path.
            var line = owner.stdout
            if owner.status != 0 {
                let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
                line = try CLI.launch(URL(fileURLWithPath: "/usr/bin/dpkg"), ["-S", real]).stdout
            }
            let package = String(line.split(separator: ":").first ?? "")
            try #require(!package.isEmpty, "no Debian package owns \(path)")
            #expect(base.contains(package) || runtime.contains(package),
                "\(path) comes from \(package), which the runtime stage does not install")
        }
    }
}
