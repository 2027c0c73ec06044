/// Scenarios that ship inside the binary. `fanout scenarios` lists them; `fanout scenarios show NAME`
/// prints one in canonical form as a starting point for a file of your own.
public enum BuiltinScenarios {
    public static let names = ["default", "smoke", "million"]

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
        "default": """
            {
              "name": "default",
              "description": "Game night: 10,000 devices × ~3 activities, sports broadcasts and per-token deliveries, 30 s real time.",
              "seed": 1,
              "clock": "real",
              "durationSeconds": 30,
              "population": {"devices": 10000, "activitiesPerDevice": {"min": 2, "max": 4},
                             "appsPerDevice": {"min": 1, "max": 2}},
              "apps": [{"bundle": "com.example.scores", "schema": "GameAttributes", "weight": 3},
                       {"bundle": "com.example.deliveries", "schema": "DeliveryAttributes", "weight": 1}],
              "schemas": {\(gameSchema)},
              "stringBytes": 24,
              "sources": {"count": 400, "zipfExponent": 1.1, "broadcastShare": 0.5},
              "arrival": {"process": "poisson", "ratePerSecond": 200,
                          "phases": [{"atSeconds": 20, "ratePerSecond": 200, "rampToPerSecond": 400}],
                          "bursts": [{"atSeconds": 10, "events": 50, "sourceRank": 1, "overSeconds": 0.5}]},
              "faults": {"outOfOrderShare": 0.01, "malformedShare": 0.002, "oversizedShare": 0.001,
                         "rotationShare": 0.005, "dismissShare": 0.0005,
                         "offline": {"share": 0.02, "windowSeconds": 5, "expirationSeconds": 3},
                         "coalescing": true},
              "lifecycle": {"endFractionMin": 0.7, "endFractionMax": 1.2, "dismissalAfterSeconds": 600},
              "limits": {"perApp": 5, "perDevice": 10},
              "budgetPerHour": null,
              "priority10Share": 0.6
            }
            """,
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
    ]
}
