import Foundation
import Testing

/// deploy/kubernetes/: every manifest valid against Kubernetes' own schemas (PyPI `kubernetes-validate`, strict,
/// which `make deps` installs), the manifests agreeing with one another (image, shard counts, serve targets, run
/// id), and push-shards.yaml's own command run here N times as its pods would run it (scripts/k8s-local.py),
/// merged, equal to one unsharded run.
@Suite("deploy/kubernetes: schemas, agreement, the push Job's command run locally", .serialized)
struct KubernetesDeployTests {
    /// The Kubernetes version the manifests are validated against: the oldest they are written for
    /// (backoffLimitPerIndex and podFailurePolicy's FailIndex are beta, on by default, from 1.29).
    static let kubernetesVersion = "1.30.0"
    static let folder = DeployTests.root.appendingPathComponent("deploy/kubernetes")

    static func manifests() throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "yaml" }.sorted { $0.path < $1.path }
    }

    static func python(_ arguments: [String]) throws -> CLI.Result {
        try CLI.launch(URL(fileURLWithPath: "/usr/bin/env"), ["python3"] + arguments)
    }

    /// `kubernetes-validate --strict` of `files`; its report is one line per resource (on stdout).
    static func validate(_ files: [URL]) throws -> CLI.Result {
        try python(["-m", "kubernetes_validate", "-k", kubernetesVersion, "--strict"] + files.map(\.path))
    }

    /// Every manifest's documents, by file name, read by PyYAML (which kubernetes-validate brings).
    static func documents() throws -> [String: [[String: Any]]] {
        let script = """
            import json, os, sys, yaml
            json.dump({os.path.basename(f): [d for d in yaml.safe_load_all(open(f)) if d] for f in sys.argv[1:]},
                      sys.stdout)
            """
        let r = try python(["-c", script] + manifests().map(\.path))
        try #require(r.status == 0, "PyYAML: \(r.stderr)")
        return try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as! [String: [[String: Any]]]
    }

    @Test("every manifest in deploy/kubernetes/ is valid against Kubernetes 1.30's schemas, strict")
    func schemas() throws {
        let files = try Self.manifests()
        #expect(
            Set(files.map(\.lastPathComponent)).isSuperset(of: [
                "fanout-shards.yaml", "fanout-merge.yaml", "push-shards.yaml", "push-merge.yaml", "serve.yaml",
            ]))
        let r = try Self.validate(files)
        let report = r.stdout + r.stderr
        #expect(r.status == 0, "\(report)")
        // One "passed" line per resource of each file: none skipped.
        let documents = try Self.documents()
        for file in files {
            let passed = report.split(separator: "\n").filter { $0.contains("\(file.path) passed for resource") }
            #expect(passed.count == documents[file.lastPathComponent]?.count, "\(file.lastPathComponent): \(report)")
        }
    }

    @Test("a broken copy of a manifest fails the validation, naming what is wrong")
    func brokenManifestFails() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let breaks: [(file: String, from: String, to: String, error: String)] = [
            (
                "push-shards.yaml", "backoffLimitPerIndex: 0", "backoffLimitPerIndx: 0",
                "'backoffLimitPerIndx' was unexpected"
            ),
            ("push-shards.yaml", "completions: 4", "completions: four", "'four' is not of type 'integer'"),
            ("serve.yaml", "readinessProbe:", "readinesProbe:", "'readinesProbe' was unexpected"),
        ]
        for (i, b) in breaks.enumerated() {
            let text = try String(contentsOf: Self.folder.appendingPathComponent(b.file), encoding: .utf8)
            try #require(text.contains(b.from), "\(b.file) no longer has \(b.from)")
            // The intact copy passes where the broken one is: what fails is the break.
            let intact = dir.appendingPathComponent("intact-\(i)-\(b.file)")
            let broken = dir.appendingPathComponent("broken-\(i)-\(b.file)")
            try text.write(to: intact, atomically: true, encoding: .utf8)
            try text.replacingOccurrences(of: b.from, with: b.to).write(to: broken, atomically: true, encoding: .utf8)
            #expect(try Self.validate([intact]).status == 0)
            let r = try Self.validate([broken])
            #expect(r.status != 0, "\(b.to) passed")
            let report = r.stdout + r.stderr
            #expect(report.contains("\(broken.path) did not validate") && report.contains(b.error), "\(report)")
        }
    }

    // MARK: the manifests agree with one another

    static func job(_ docs: [String: [[String: Any]]], _ file: String) throws -> [String: Any] {
        try #require(docs[file]?.first { $0["kind"] as? String == "Job" })
    }

    static func spec(_ job: [String: Any]) -> [String: Any] { job["spec"] as! [String: Any] }
    static func podSpec(_ job: [String: Any]) -> [String: Any] {
        (spec(job)["template"] as! [String: Any])["spec"] as! [String: Any]
    }
    static func container(_ job: [String: Any]) -> [String: Any] {
        (podSpec(job)["containers"] as! [[String: Any]])[0]
    }
    static func env(_ job: [String: Any]) -> [String: String] {
        var env: [String: String] = [:]
        for entry in container(job)["env"] as? [[String: Any]] ?? [] {
            if let value = entry["value"] as? String { env[entry["name"] as! String] = value }
        }
        return env
    }
    static func args(_ job: [String: Any]) -> String { (container(job)["args"] as! [String]).joined(separator: " ") }

    @Test("one image; completions, parallelism and shard counts agree; TARGETS names every serve pod in order")
    func agreement() throws {
        let docs = try Self.documents()
        let push = try Self.job(docs, "push-shards.yaml")
        let merge = try Self.job(docs, "push-merge.yaml")
        let serve = try Self.job(docs, "serve.yaml")
        let runShards = try Self.job(docs, "fanout-shards.yaml")
        let runMerge = try Self.job(docs, "fanout-merge.yaml")
        let all = [push, merge, serve, runShards, runMerge]
        let images = Set(all.map { Self.container($0)["image"] as! String })
        #expect(images.count == 1, "\(images)")

        // The Indexed Jobs: N pods at once, N their shard count, no pod retried or restarted.
        for (job, count) in [(push, "SHARDS"), (serve, "SERVE_SHARDS"), (runShards, "SHARDS")] {
            let spec = Self.spec(job)
            let name = (job["metadata"] as! [String: Any])["name"] as! String
            #expect(spec["completionMode"] as? String == "Indexed", "\(name)")
            let n = spec["completions"] as? Int
            let shards = Self.env(job)[count].flatMap(Int.init)
            #expect(
                n != nil && spec["parallelism"] as? Int == n && shards == n,
                "\(name): completions, parallelism and \(count) differ: \(spec) \(Self.env(job))")
            #expect(Self.podSpec(job)["restartPolicy"] as? String == "Never", "\(name)")
            #expect(Self.args(job).contains("${JOB_COMPLETION_INDEX}/${\(count)}"), "\(name): \(Self.args(job))")
        }
        // A retried push shard would send its slice twice, a retried serve shard lose its devices' state.
        for job in [push, serve] {
            #expect(Self.spec(job)["backoffLimitPerIndex"] as? Int == 0)
            let rules = (Self.spec(job)["podFailurePolicy"] as? [String: Any])?["rules"] as? [[String: Any]] ?? []
            #expect(rules.allSatisfy { $0["action"] as? String == "FailIndex" }, "\(rules)")
        }
        let exit3 = ((Self.spec(push)["podFailurePolicy"] as! [String: Any])["rules"] as! [[String: Any]]).contains {
            ($0["onExitCodes"] as? [String: Any])?["values"] as? [Int] == [3]
        }
        #expect(exit3, "push-shards.yaml: exit 3 (saturated) fails its index")

        // TARGETS: serve pod i (hostname fanout-serve-i under the headless Service fanout-serve) for i < M.
        let pushEnv = Self.env(push)
        let serveEnv = Self.env(serve)
        let m = Self.spec(serve)["completions"] as! Int
        let targets = (0..<m).map { "http://fanout-serve-\($0).fanout-serve:2197" }.joined(separator: ",")
        #expect(pushEnv["TARGETS"] == targets)
        #expect((serve["metadata"] as! [String: Any])["name"] as? String == "fanout-serve")
        #expect(Self.podSpec(serve)["subdomain"] as? String == "fanout-serve")
        let service = try #require(docs["serve.yaml"]?.first { $0["kind"] as? String == "Service" })
        let serviceSpec = service["spec"] as! [String: Any]
        #expect((service["metadata"] as! [String: Any])["name"] as? String == "fanout-serve")
        #expect(serviceSpec["clusterIP"] as? String == "None")
        #expect(serviceSpec["selector"] as? [String: String] == ["batch.kubernetes.io/job-name": "fanout-serve"])
        #expect((serviceSpec["ports"] as! [[String: Any]]).map { $0["port"] as? Int } == [2197])
        #expect(Self.args(serve).contains("--listen 0.0.0.0:2197"))
        let probe = (Self.container(serve)["readinessProbe"] as? [String: Any])?["tcpSocket"] as? [String: Any]
        #expect(probe?["port"] as? Int == 2197)

        // One run: the same scenario and seed on both sides, one RUN_ID, serve waiting for N push shards.
        #expect(pushEnv["SCENARIO"] != nil && pushEnv["SCENARIO"] == serveEnv["SCENARIO"])
        #expect(pushEnv["SEED"] != nil && pushEnv["SEED"] == serveEnv["SEED"])
        #expect(serveEnv["PUSH_SHARDS"] == pushEnv["SHARDS"])
        #expect(pushEnv["RUN_ID"] != nil && Set([push, merge, serve].map { Self.env($0)["RUN_ID"] }).count == 1)
        let runId = try #require(Self.env(runShards)["RUN_ID"])
        #expect(Self.env(runMerge)["RUN_ID"] == runId)
        // The folders: push writes push-shard-K, the merge reads push-shard-*, serve waits for their summaries.
        #expect(Self.args(push).contains("/results/${RUN_ID}/push-shard-${JOB_COMPLETION_INDEX}"))
        #expect(Self.args(merge).contains("/results/${RUN_ID}/push-shard-* --out /results/${RUN_ID}/push-merged"))
        #expect(Self.args(serve).contains("/results/${RUN_ID}/push-shard-*/summary.json"))
        // The start: a barrier on the shared volume, one directory per RUN_ID (no START to set by hand).
        #expect(Self.args(push).contains("--barrier \"/results/${RUN_ID}/barrier\""), "\(Self.args(push))")
        #expect(!Self.args(push).contains("--start-at") && pushEnv["BARRIER_MARGIN"] != nil)
        // Spread over the nodes where there are nodes, never left Pending where there are not (ScheduleAnyway).
        for (job, name) in [(push, "fanout-push-shards"), (serve, "fanout-serve")] {
            let spread = Self.podSpec(job)["topologySpreadConstraints"] as? [[String: Any]] ?? []
            #expect(spread.count == 1, "\(name)")
            #expect(spread.first?["whenUnsatisfiable"] as? String == "ScheduleAnyway", "\(name)")
            #expect(spread.first?["topologyKey"] as? String == "kubernetes.io/hostname", "\(name)")
            let labels = (spread.first?["labelSelector"] as? [String: Any])?["matchLabels"] as? [String: String]
            #expect(labels == ["batch.kubernetes.io/job-name": name], "\(name)")
        }
        // One volume claim, declared alike where it is declared.
        let claims = docs.values.flatMap { $0 }.filter { $0["kind"] as? String == "PersistentVolumeClaim" }
        #expect(claims.count == 2 && NSDictionary(dictionary: claims[0]).isEqual(to: claims[1]))
        for job in all {
            let volumes = Self.podSpec(job)["volumes"] as! [[String: Any]]
            let claim = (volumes[0]["persistentVolumeClaim"] as? [String: Any])?["claimName"] as? String
            #expect(claim == "fanout-results")
        }
    }

    @Test("push-shards.yaml's command as 2 pods against serve.yaml's as 2, merged, equals one unsharded run")
    func jobCommandLocally() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let script = DeployTests.root.appendingPathComponent("scripts/k8s-local.py").path
        let r = try Self.python([
            script, "--fanout", CLI.binary.path, "--shards", "2", "--set", "SCENARIO=smoke", "--set", "DURATION=3",
            "--workdir", dir.path,
        ])
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("k8s-local: 2 shards merged equal one unsharded run"), "\(r.stdout)")
        // What the pods were given is said, not hidden.
        #expect(r.stdout.contains("REPLACED mountPath /results -> \(dir.path)/results"), "\(r.stdout)")
        // serve.yaml's own command ran as its 2 pods, which ended by themselves once the push folders were there; the
        // shards met at the barrier (their starts' spread is printed; how wide it is is the machine's business).
        #expect(r.stdout.contains("serve pods: exit 0, each ended by itself"), "\(r.stdout)")
        #expect(r.stdout.contains("barrier start") && r.stdout.contains("shard starts spread"), "\(r.stdout)")
        // Each pod wrote its own folder under the local /results, and the merge Job's folder is there.
        let runID = try #require(Self.env(try Self.job(try Self.documents(), "push-shards.yaml"))["RUN_ID"])
        let run = dir.appendingPathComponent("results").appendingPathComponent(runID)
        for name in ["push-shard-0", "push-shard-1", "push-merged"] {
            let summary = run.appendingPathComponent(name).appendingPathComponent("summary.json")
            #expect(FileManager.default.fileExists(atPath: summary.path), "\(name)")
        }
    }
}
