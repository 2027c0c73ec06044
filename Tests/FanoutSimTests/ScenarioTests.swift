import Testing

@testable import FanoutSim

@Suite("Scenario files")
struct ScenarioTests {
    @Test(
        "every built-in parses, and its canonical text parses back to the same scenario",
        arguments: BuiltinScenarios.names)
    func builtins(name: String) throws {
        let s = try #require(BuiltinScenarios.named(name))
        let again = try Scenario.parse(Array(s.canonicalText.utf8), file: "canonical")
        #expect(again == s)
        #expect(again.configHash == s.configHash)
    }

    @Test("apps per device: each device installs min...max apps, and its activities follow only their sources")
    func appsPerDevice() throws {
        var s = try Scenario.parse(Array(Self.minimal.utf8), file: "s.json")
        s.apps = (0..<5).map { Scenario.App(bundle: "com.app\($0)", schema: "S", weight: 1) }
        s.population.appsPerDeviceMin = 1
        s.population.appsPerDeviceMax = 2
        s.sources.count = 50
        let world = World(scenario: s)
        var seenCounts = Set<Int>()
        for d in 0..<300 {
            let installed = world.installedApps(device: d)
            seenCounts.insert(installed.nonzeroBitCount)
            for k in 0..<4 {
                let app = world.sourceApp[world.source(device: d, slot: k)]
                #expect(installed & (1 << UInt64(app)) != 0)
            }
        }
        #expect(seenCounts == [1, 2])
    }

    @Test("the configuration hash changes with the configuration")
    func hash() throws {
        var s = try #require(BuiltinScenarios.named("smoke"))
        let before = s.configHash
        s.seed += 1
        #expect(s.configHash != before)
    }

    @Test(
        "costNanosPerDelivery and sliceBroadcasts: defaults stay out of the canonical text and hash; set, they round-trip"
    )
    func costField() throws {
        let s = try #require(BuiltinScenarios.named("default"))
        #expect(s.costNanosPerDelivery == 0 && !s.canonicalText.contains("costNanosPerDelivery"))
        var costly = s
        costly.costNanosPerDelivery = 2000
        #expect(costly.configHash != s.configHash)
        let again = try Scenario.parse(Array(costly.canonicalText.utf8), file: "canonical")
        #expect(again.costNanosPerDelivery == 2000 && again == costly)
        var sliced = s
        sliced.sliceBroadcasts = true
        #expect(!s.canonicalText.contains("sliceBroadcasts") && sliced.configHash != s.configHash)
        #expect(try Scenario.parse(Array(sliced.canonicalText.utf8), file: "canonical").sliceBroadcasts)
        let bad = Self.minimal.replacingOccurrences(
            of: "\"durationSeconds\": 10,",
            with: "\"durationSeconds\": 10, \"costNanosPerDelivery\": -5,")
        #expect(
            error(bad)?.description
                == "s.json:3: field costNanosPerDelivery: -5 is out of range (expected 0 to 1000000000)")
    }

    static let minimal = """
        {
          "name": "t",
          "durationSeconds": 10,
          "population": {"devices": 10, "activitiesPerDevice": {"min": 1, "max": 2}},
          "apps": [{"bundle": "com.x", "schema": "S"}],
          "schemas": {"S": {"n": "int"}},
          "sources": {"count": 3},
          "arrival": {"ratePerSecond": 5}
        }
        """

    func error(_ text: String) -> ScenarioError? {
        do {
            _ = try Scenario.parse(Array(text.utf8), file: "s.json")
            return nil
        } catch {
            return error
        }
    }

    @Test("a minimal scenario parses with documented defaults")
    func minimal() throws {
        let s = try Scenario.parse(Array(Self.minimal.utf8), file: "s.json")
        #expect(s.clock == .real && s.seed == 1 && s.perAppLimit == 5 && s.perDeviceLimit == 10)
        #expect(s.budgetPerHour == nil && s.faults.offline == nil && s.arrival.process == .poisson)
    }

    @Test(
        "bad scenarios name the file, the line and the field",
        arguments: [
            (
                "\"devices\": 10,", "\"devices\": -1,",
                "s.json:4: field population.devices: -1 is out of range (expected 1 to 50000000)"
            ),
            ("\"devices\": 10,", "\"devices\": \"ten\",", "s.json:4: field population.devices: expected an integer"),
            (
                "\"schema\": \"S\"", "\"schema\": \"T\"",
                "s.json:5: field apps[0].schema: no schema named \"T\" in schemas"
            ),
            (
                "{\"n\": \"int\"}", "{\"n\": \"float\"}",
                "s.json:6: field schemas.S.n: expected a type: int, double, string or bool, optionally with ?"
            ),
            (
                "\"ratePerSecond\": 5}", "\"ratePerSecond\": 5, \"proces\": \"poisson\"}",
                "s.json:8: field arrival.proces: unknown field (expected one of: process, ratePerSecond, phases, bursts)"
            ),
            (
                "\"durationSeconds\": 10,", "\"durationSeconds\": 10, \"clock\": \"wall\",",
                "s.json:3: field clock: expected \"real\" or \"virtual\", found \"wall\""
            ),
            (
                "\"sources\": {\"count\": 3},", "\"sources\": {\"count\": 3, \"broadcastShare\": 1.5},",
                "s.json:7: field sources.broadcastShare: 1.5 is out of range (expected 0.0 to 1.0)"
            ),
            (
                "\"arrival\": {\"ratePerSecond\": 5}", "\"arrival\": {\"process\": \"constant\"}",
                "s.json:8: field arrival.ratePerSecond: missing (expected ratePerSecond or phases)"
            ),
            ("\"durationSeconds\": 10,", "\"durationSeconds\": 10,,", "s.json:3: not valid JSON (at byte 42)"),
        ])
    func errors(find: String, replace: String, expected: String) throws {
        let text = Self.minimal.replacingOccurrences(of: find, with: replace)
        #expect(text != Self.minimal)
        #expect(error(text)?.description == expected)
    }
}

@Suite("Schedule arithmetic")
struct ScheduleTests {
    func scenario(_ edit: (inout Scenario) -> Void) throws -> Scenario {
        var s = try Scenario.parse(Array(ScenarioTests.minimal.utf8), file: "s.json")
        edit(&s)
        return s
    }

    func events(_ s: Scenario) -> [SourceEvent] {
        var schedule = EventSchedule(scenario: s, world: World(scenario: s))
        var all: [SourceEvent] = []
        while let e = schedule.next() { all.append(e) }
        return all
    }

    @Test("a constant rate gives events exactly 1/rate apart from 1/rate on")
    func constant() throws {
        let s = try scenario {
            $0.arrival.process = .constant
            $0.durationSeconds = 2
        }
        let all = events(s)
        #expect(all.count == 9)  // 0.2, 0.4, …, 1.8 (2.0 is the end)
        for (k, e) in all.enumerated() {
            #expect(e.index == k)
            #expect(abs(Double(e.intendedNanos) - Double(k + 1) * 2e8) < 10)
        }
    }

    @Test("phases and ramps change the rate; bursts and ends merge in time order")
    func phases() throws {
        let s = try scenario {
            $0.arrival.process = .constant
            $0.arrival.phases = [
                .init(atSeconds: 0, ratePerSecond: 10, rampToPerSecond: nil),
                .init(atSeconds: 5, ratePerSecond: 10, rampToPerSecond: 30),
            ]
            $0.arrival.bursts = [.init(atSeconds: 3, events: 4, sourceRank: 2, overSeconds: 0.2)]
        }
        #expect(s.ratePerSecond(at: 4.9) == 10)
        #expect(abs(s.ratePerSecond(at: 7.5) - 20) < 1e-9)
        let all = events(s)
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.intendedNanos <= $1.intendedNanos })
        let burst = all.filter {
            $0.intendedNanos >= 3_000_000_000 && $0.intendedNanos < 3_200_000_000 && $0.source == 1
        }
        #expect(burst.count >= 4)
        let late = all.filter { $0.intendedNanos >= 5_000_000_000 }.count
        let early = all.filter { $0.intendedNanos < 5_000_000_000 }.count
        #expect(late > early)  // ramping from 10/s to 30/s over the second half
    }

    @Test("Poisson arrivals average the configured rate and are the same for the same seed")
    func poisson() throws {
        let s = try scenario {
            $0.durationSeconds = 200
            $0.arrival.phases = [.init(atSeconds: 0, ratePerSecond: 50, rampToPerSecond: nil)]
        }
        let a = events(s)
        #expect(abs(Double(a.count) - 10_000) < 400)  // ±4 standard deviations
        #expect(a == events(s))
        var other = s
        other.seed = 2
        #expect(events(other) != a)
    }

    @Test("events past the end of a shortened run are dropped")
    func shortenedRun() throws {
        var s = try #require(BuiltinScenarios.named("smoke"))
        s.durationSeconds = 5
        let all = events(s)
        #expect(!all.isEmpty)
        #expect(all.allSatisfy { $0.intendedNanos <= 5_000_000_000 })
    }

    @Test("Zipf popularity: rank 1 is the most popular, and frequencies follow 1/k^s")
    func zipf() {
        let z = Zipf(count: 100, exponent: 1)
        var counts = [Int](repeating: 0, count: 100)
        for i in 0..<100_000 { counts[z.sample(Mix.unit(Mix.hash(3, UInt64(i))))] += 1 }
        #expect(counts[0] > counts[1] && counts[1] > counts[3] && counts[3] > counts[20])
        let ratio = Double(counts[0]) / Double(counts[1])
        #expect(ratio > 1.8 && ratio < 2.2)
    }
}
