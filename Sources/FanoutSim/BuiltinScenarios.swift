/// Scenarios that ship inside the binary. `fanout scenarios` lists them; `fanout scenarios show NAME`
/// prints one in canonical form as a starting point for a file of your own.
public enum BuiltinScenarios {
    public static let names = ["default", "smoke", "million", "soak", "game-night"] + faultNames

    /// The fault scenarios: one fault each, pushed hard, small and in virtual time (tests assert
    /// their identities and expected outcomes; `fanout run faults-...` shows them).
    public static let faultNames = [
        "faults-out-of-order", "faults-payloads", "faults-rotation", "faults-channel-churn", "faults-offline",
        "faults-budget", "faults-edges",
    ]

    public static func named(_ name: String) -> Scenario? {
        guard let text = texts[name] else { return nil }
        do {
            return try Scenario.parse(Array(text.utf8), file: "builtin:\(name)")
        } catch {
            preconditionFailure("built-in scenario \(name) does not parse: \(error)")
        }
    }

    static let gameSchema = """
        "GameAttributes": {"home": "int", "away": "int", "clock": "string", "period": "string?",
                           "winProbability": "double", "final": "bool", "lastEvent": "string"},
        "DeliveryAttributes": {"stage": "string", "etaMinutes": "int", "progress": "double", "courier": "string?"}
        """

    static let texts: [String: String] = [
        "default": gameNight(
            "default",
            "Game night: 10,000 devices × ~3 activities, sports broadcasts and per-token deliveries, 30 s real time.",
            durationSeconds: 30,
            arrival: """
                {"process": "poisson", "ratePerSecond": 200,
                 "phases": [{"atSeconds": 20, "ratePerSecond": 200, "rampToPerSecond": 400}],
                 "bursts": [{"atSeconds": 10, "events": 50, "sourceRank": 1, "overSeconds": 0.5}]}
                """),
        "smoke": """
        {
          "name": "smoke",
          "description": "Small and fast, for tests and CI: 500 devices, every fault on, 60 s of virtual time.",
          "seed": 7,
          "clock": "virtual",
          "durationSeconds": 60,
          "population": {"devices": 500, "activitiesPerDevice": {"min": 1, "max": 4},
                         "appsPerDevice": {"min": 1, "max": 2}},
          "apps": [{"bundle": "com.example.scores", "schema": "GameAttributes", "weight": 2},
                   {"bundle": "com.example.deliveries", "schema": "DeliveryAttributes", "weight": 1}],
          "schemas": {\(gameSchema)},
          "stringBytes": 12,
          "sources": {"count": 40, "zipfExponent": 1.0, "broadcastShare": 0.5},
          "arrival": {"process": "poisson", "ratePerSecond": 20,
                      "bursts": [{"atSeconds": 30, "events": 20, "sourceRank": 1, "overSeconds": 1}]},
          "faults": {"outOfOrderShare": 0.02, "malformedShare": 0.01, "oversizedShare": 0.01,
                     "rotationShare": 0.02, "dismissShare": 0.002,
                     "offline": {"share": 0.1, "windowSeconds": 10, "expirationSeconds": 6},
                     "coalescing": true},
          "lifecycle": {"endFractionMin": 0.5, "endFractionMax": 1.5, "dismissalAfterSeconds": 5},
          "limits": {"perApp": 3, "perDevice": 4},
          "budgetPerHour": 40,
          "priority10Share": 0.7,
          "stageSampleEvery": 1
        }
        """,
        // The whole night through a backend (`fanout serve --trigger --register --app-events --expect-events`, what
        // `make example-backend` runs): kickoff by push-to-start, goals in bursts, tokens rotating and activities
        // ended by their people while serving, the matches ending. `fanout run` ignores the serve-only settings.
        "game-night": """
        {
          "name": "game-night",
          "description": "Through your backend: push-to-start kickoff, goal bursts, rotations, dismissals, the end.",
          "seed": 21,
          "clock": "real",
          "durationSeconds": 30,
          "population": {"devices": 500, "activitiesPerDevice": {"min": 1, "max": 3},
                         "appsPerDevice": {"min": 1, "max": 2}},
          "apps": [{"bundle": "com.example.scores", "schema": "GameAttributes", "weight": 3},
                   {"bundle": "com.example.deliveries", "schema": "DeliveryAttributes", "weight": 1}],
          "schemas": {\(gameSchema)},
          "stringBytes": 16,
          "sources": {"count": 40, "zipfExponent": 0.8, "broadcastShare": 0.25},
          "arrival": {"process": "poisson", "ratePerSecond": 8,
                      "bursts": [{"atSeconds": 12, "events": 10, "sourceRank": 1, "overSeconds": 0.5},
                                 {"atSeconds": 21, "events": 10, "sourceRank": 2, "overSeconds": 0.5}]},
          "faults": {"rotationShare": 0.02, "rotationWhileServing": {"graceSeconds": 5},
                     "appEvents": {"dismiss": 0.02, "disable": 0.005, "uninstall": 0.005, "graceSeconds": 5},
                     "kickoff": {"share": 0.5, "atSeconds": 2, "overSeconds": 1,
                                 "appDelayMillis": {"p50": 30, "p99": 150}, "startBudget": 10}},
          "lifecycle": {"endFractionMin": 0.85, "endFractionMax": 0.95, "dismissalAfterSeconds": 600},
          "limits": {"perApp": 5, "perDevice": 10},
          "priority10Share": 0
        }
        """,
        "million": """
        {
          "name": "million",
          "description": "A final: 1,000,000 devices × 5 activities, a 12-hour match day in virtual time.",
          "seed": 1,
          "clock": "virtual",
          "durationSeconds": 43200,
          "population": {"devices": 1000000, "activitiesPerDevice": {"min": 5, "max": 5}},
          "apps": [{"bundle": "com.example.scores", "schema": "GameAttributes", "weight": 4},
                   {"bundle": "com.example.deliveries", "schema": "DeliveryAttributes", "weight": 1}],
          "schemas": {\(gameSchema)},
          "stringBytes": 16,
          "sources": {"count": 2000, "zipfExponent": 1.2, "broadcastShare": 0.7},
          "arrival": {"process": "poisson", "ratePerSecond": 0.1,
                      "bursts": [{"atSeconds": 3600, "events": 20, "sourceRank": 1, "overSeconds": 60}]},
          "faults": {"outOfOrderShare": 0.01, "malformedShare": 0.001, "oversizedShare": 0.001,
                     "rotationShare": 0.001, "dismissShare": 0.0001,
                     "offline": {"share": 0.01, "windowSeconds": 600, "expirationSeconds": 300},
                     "coalescing": true},
          "lifecycle": {"endFractionMin": 0.3, "endFractionMax": 1.0, "dismissalAfterSeconds": 1800},
          "limits": {"perApp": 5, "perDevice": 10},
          "budgetPerHour": null,
          "priority10Share": 0.5,
          "stageSampleEvery": 64
        }
        """,
        // "README, Soak" is docs/RELIABILITY.md, *Soak*, now (the README links it). The description is part of the
        // canonical text, so of configHash: changing it would part `fanout run soak` from reports/examples/soak-30min.
        "soak": gameNight(
            "soak",
            "30 minutes in real time at 80% of default's saturation on the 2-core reference machine "
                + "(1,561 events/s; see README, Soak): resident memory and descriptors must stay flat.",
            durationSeconds: 1800, arrival: #"{"process": "poisson", "ratePerSecond": 1561}"#, stageSampleEvery: 16,
            // Stationary for 30 minutes: default's dismissal rate would end most hot activities within a
            // minute, and its source ends would come in the last third; here few are dismissed and the
            // ends (a fifth of the sources) come in the last tenth.
            dismissShare: 0.000002, endFractions: (0.9, 1.4)),
        "faults-out-of-order": fault(
            "faults-out-of-order", "An out-of-order storm: half the updates carry a timestamp older than the last.",
            faults: #""outOfOrderShare": 0.5"#),
        "faults-payloads": fault(
            "faults-payloads", "10% bad payloads: 5% malformed JSON, 5% over the size limit.",
            faults: #""malformedShare": 0.05, "oversizedShare": 0.05"#),
        "faults-rotation": fault(
            "faults-rotation", "A token-rotation storm: 30% of token pushes race a rotation and reach the old token.",
            faults: #""rotationShare": 0.3"#, broadcastShare: 0),
        "faults-channel-churn": fault(
            "faults-channel-churn", "Channel churn: 30% of broadcasts go to a channel id just deleted and replaced.",
            faults: #""channelChurnShare": 0.3"#, broadcastShare: 1),
        "faults-offline": fault(
            "faults-offline", "A third of the devices offline in 10 s windows: held pushes expire or are coalesced.",
            faults: #""offline": {"share": 0.33, "windowSeconds": 10, "expirationSeconds": 4}, "coalescing": true"#),
        "faults-budget": fault(
            "faults-budget", "Budget exhaustion: every push priority 10, 20 per activity per hour allowed.",
            faults: "", budget: "20", priority10Share: 1),
        "faults-edges": """
        {
          "name": "faults-edges",
          "description": "The 8- and 12-hour edges: 4,000 activities started at once, updates across both edges.",
          "seed": 5,
          "clock": "virtual",
          "durationSeconds": 45000,
          "population": {"devices": 2000, "activitiesPerDevice": {"min": 2, "max": 2},
                         "appsPerDevice": {"min": 1, "max": 1}},
          "apps": [{"bundle": "com.example.scores", "schema": "GameAttributes", "weight": 1}],
          "schemas": {\(gameSchema)},
          "stringBytes": 8,
          "sources": {"count": 20, "zipfExponent": 0.5, "broadcastShare": 0.5},
          "arrival": {"process": "constant", "ratePerSecond": 0.02,
                      "bursts": [{"atSeconds": 28790, "events": 40, "sourceRank": 1, "overSeconds": 20},
                                 {"atSeconds": 43190, "events": 40, "sourceRank": 2, "overSeconds": 20}]},
          "limits": {"perApp": 5, "perDevice": 10},
          "priority10Share": 0,
          "stageSampleEvery": 1
        }
        """,
    ]

    /// The game-night population and faults (`default`, `soak`) with their own duration and arrivals.
    static func gameNight(
        _ name: String, _ description: String, durationSeconds: Int, arrival: String, stageSampleEvery: Int? = nil,
        dismissShare: Double = 0.0005, endFractions: (Double, Double) = (0.7, 1.2)
    ) -> String {
        """
        {
          "name": "\(name)",
          "description": "\(description)",
          "seed": 1,
          "clock": "real",
          "durationSeconds": \(durationSeconds),
          "population": {"devices": 10000, "activitiesPerDevice": {"min": 2, "max": 4},
                         "appsPerDevice": {"min": 1, "max": 2}},
          "apps": [{"bundle": "com.example.scores", "schema": "GameAttributes", "weight": 3},
                   {"bundle": "com.example.deliveries", "schema": "DeliveryAttributes", "weight": 1}],
          "schemas": {\(gameSchema)},
          "stringBytes": 24,
          "sources": {"count": 400, "zipfExponent": 1.1, "broadcastShare": 0.5},
          "arrival": \(arrival),
          "faults": {"outOfOrderShare": 0.01, "malformedShare": 0.002, "oversizedShare": 0.001,
                     "rotationShare": 0.005, "dismissShare": \(dismissShare),
                     "offline": {"share": 0.02, "windowSeconds": 5, "expirationSeconds": 3},
                     "coalescing": true},
          "lifecycle": {"endFractionMin": \(endFractions.0), "endFractionMax": \(endFractions.1),
                        "dismissalAfterSeconds": 600},
          "limits": {"perApp": 5, "perDevice": 10},
          "budgetPerHour": null,
          \(stageSampleEvery.map { "\"stageSampleEvery\": \($0),\n  " } ?? "")"priority10Share": 0.6
        }
        """
    }

    /// A fault scenario: 300 devices, 120 s of virtual time, nothing but the fault given.
    static func fault(
        _ name: String, _ description: String, faults: String, broadcastShare: Double = 0.5, budget: String = "null",
        priority10Share: Double = 0.2
    ) -> String {
        """
        {
          "name": "\(name)",
          "description": "\(description)",
          "seed": 11,
          "clock": "virtual",
          "durationSeconds": 120,
          "population": {"devices": 300, "activitiesPerDevice": {"min": 1, "max": 3},
                         "appsPerDevice": {"min": 1, "max": 2}},
          "apps": [{"bundle": "com.example.scores", "schema": "GameAttributes", "weight": 2},
                   {"bundle": "com.example.deliveries", "schema": "DeliveryAttributes", "weight": 1}],
          "schemas": {\(gameSchema)},
          "stringBytes": 12,
          "sources": {"count": 30, "zipfExponent": 1.0, "broadcastShare": \(broadcastShare)},
          "arrival": {"process": "poisson", "ratePerSecond": 10},
          "faults": {\(faults)},
          "limits": {"perApp": 5, "perDevice": 10},
          "budgetPerHour": \(budget),
          "priority10Share": \(priority10Share),
          "stageSampleEvery": 1
        }
        """
    }
}
