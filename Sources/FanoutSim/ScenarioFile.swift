import FanoutCore

/// A scenario file that cannot be used: file, line, field and what was expected.
public struct ScenarioError: Error, CustomStringConvertible, Equatable, Sendable {
    public var file: String
    public var line: Int
    public var field: String
    public var message: String

    public var description: String {
        field.isEmpty ? "\(file):\(line): \(message)" : "\(file):\(line): field \(field): \(message)"
    }
}

/// Reads a scenario from JSON text with errors that name the line and the field.
struct ScenarioReader {
    let file: String
    let text: [UInt8]
    var scanner = JSONTape()
    /// The scanned text read with its bytes, set in `parse` while it holds them (the reader lives only there).
    var tape = JSONDocument()

    init(file: String, text: [UInt8]) {
        self.file = file
        self.text = text
    }

    func line(of entry: Int) -> Int {
        let offset = entry < tape.count ? Int(tape[entry].start) : text.count
        var line = 1
        for i in 0..<min(offset, text.count) where text[i] == UInt8(ascii: "\n") { line += 1 }
        return line
    }

    func fail(_ entry: Int, _ field: String, _ message: String) -> ScenarioError {
        ScenarioError(file: file, line: line(of: entry), field: field, message: message)
    }

    func string(_ entry: Int) -> String {
        var bytes: [UInt8] = []
        tape.appendUnescaped(entry, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The members of an object, checking that every key is one of `allowed`.
    func members(_ object: Int, _ path: String, allowed: [String]) throws(ScenarioError) -> [String: Int] {
        guard tape[object].kind == .object else { throw fail(object, path, "expected an object") }
        var result: [String: Int] = [:]
        var i = object + 1
        while i < Int(tape[object].next) {
            let key = string(i)
            guard allowed.isEmpty || allowed.contains(key) else {
                throw fail(i, join(path, key), "unknown field (expected one of: \(allowed.joined(separator: ", ")))")
            }
            result[key] = i + 1
            i = Int(tape[i + 1].next)
        }
        return result
    }

    func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func number(
        _ m: [String: Int], _ key: String, _ path: String, default value: Double? = nil,
        range: ClosedRange<Double> = -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude
    )
        throws(ScenarioError) -> Double
    {
        guard let entry = m[key] else {
            if let value { return value }
            throw fail(0, join(path, key), "missing (expected a number)")
        }
        guard let v = tape.double(entry) else { throw fail(entry, join(path, key), "expected a number") }
        guard range.contains(v) else {
            throw fail(
                entry, join(path, key), "\(v) is out of range (expected \(range.lowerBound) to \(range.upperBound))")
        }
        return v
    }

    func integer(
        _ m: [String: Int], _ key: String, _ path: String, default value: Int? = nil,
        range: ClosedRange<Int> = 0...Int(Int32.max)
    ) throws(ScenarioError) -> Int {
        guard let entry = m[key] else {
            if let value { return value }
            throw fail(0, join(path, key), "missing (expected an integer)")
        }
        guard let v = tape.int64(entry), let i = Int(exactly: v) else {
            throw fail(entry, join(path, key), "expected an integer")
        }
        guard range.contains(i) else {
            throw fail(
                entry, join(path, key), "\(i) is out of range (expected \(range.lowerBound) to \(range.upperBound))")
        }
        return i
    }

    func optionalNumber(
        _ m: [String: Int], _ key: String, _ path: String, range: ClosedRange<Double>
    )
        throws(ScenarioError) -> Double?
    {
        guard let entry = m[key], tape[entry].kind != .null else { return nil }
        return try number(m, key, path, range: range)
    }

    func text(
        _ m: [String: Int], _ key: String, _ path: String, default value: String? = nil
    )
        throws(ScenarioError) -> String
    {
        guard let entry = m[key] else {
            if let value { return value }
            throw fail(0, join(path, key), "missing (expected a string)")
        }
        guard tape[entry].kind == .string else { throw fail(entry, join(path, key), "expected a string") }
        return string(entry)
    }

    func bool(_ m: [String: Int], _ key: String, _ path: String, default value: Bool) throws(ScenarioError) -> Bool {
        guard let entry = m[key] else { return value }
        guard tape[entry].kind == .bool else { throw fail(entry, join(path, key), "expected true or false") }
        return tape[entry].flag
    }

    func array(_ m: [String: Int], _ key: String, _ path: String) throws(ScenarioError) -> [Int] {
        guard let entry = m[key] else { return [] }
        guard tape[entry].kind == .array else { throw fail(entry, join(path, key), "expected an array") }
        var result: [Int] = []
        var i = entry + 1
        while i < Int(tape[entry].next) {
            result.append(i)
            i = Int(tape[i].next)
        }
        return result
    }
}

extension Scenario {
    static let fields = [
        "name", "description", "seed", "clock", "durationSeconds", "workers", "population", "apps", "schemas",
        "stringBytes", "sources", "arrival", "faults", "lifecycle", "limits", "budgetPerHour", "priority10Share",
        "stageSampleEvery", "costNanosPerDelivery", "sliceBroadcasts", "costModel",
    ]

    /// Parses and checks a scenario file's text.
    public static func parse(_ text: [UInt8], file: String) throws(ScenarioError) -> Scenario {
        var result: Result<Scenario, ScenarioError>?
        text.withUnsafeBytes { bytes in
            var r = ScenarioReader(file: file, text: text)
            if let offset = r.scanner.scan(bytes) {
                var line = 1
                for i in 0..<min(offset, text.count) where text[i] == UInt8(ascii: "\n") { line += 1 }
                result = .failure(
                    ScenarioError(file: file, line: line, field: "", message: "not valid JSON (at byte \(offset + 1))"))
                return
            }
            r.tape = r.scanner.reading(bytes)
            result = Result { () throws(ScenarioError) in try parseScanned(r) }
        }
        return try result!.get()
    }

    private static func parseScanned(_ r: ScenarioReader) throws(ScenarioError) -> Scenario {
        let top = try r.members(0, "", allowed: fields)
        let name = try r.text(top, "name", "")
        let description = try r.text(top, "description", "", default: "")
        let seed = try r.integer(top, "seed", "", default: 1, range: 0...Int.max)
        let clockText = try r.text(top, "clock", "", default: "real")
        guard let clock = Clock(rawValue: clockText) else {
            throw r.fail(top["clock"]!, "clock", "expected \"real\" or \"virtual\", found \"\(clockText)\"")
        }
        let duration = try r.number(top, "durationSeconds", "", range: 0.001...(30 * 86_400))
        let workers = try r.integer(top, "workers", "", default: 0, range: 0...256)

        guard let populationEntry = top["population"] else {
            throw r.fail(0, "population", "missing (expected an object)")
        }
        let p = try r.members(
            populationEntry, "population", allowed: ["devices", "activitiesPerDevice", "appsPerDevice"])
        let devices = try r.integer(p, "devices", "population", range: 1...50_000_000)
        guard let perDeviceEntry = p["activitiesPerDevice"] else {
            throw r.fail(
                populationEntry, "population.activitiesPerDevice", "missing (expected {\"min\": N, \"max\": N})")
        }
        let apd = try r.members(perDeviceEntry, "population.activitiesPerDevice", allowed: ["min", "max"])
        let apdMin = try r.integer(apd, "min", "population.activitiesPerDevice", range: 0...64)
        let apdMax = try r.integer(apd, "max", "population.activitiesPerDevice", range: apdMin...64)
        var appsMin: Int?
        var appsMax: Int?
        if let appsEntry = p["appsPerDevice"] {
            let ap = try r.members(appsEntry, "population.appsPerDevice", allowed: ["min", "max"])
            appsMin = try r.integer(ap, "min", "population.appsPerDevice", range: 1...64)
            appsMax = try r.integer(ap, "max", "population.appsPerDevice", range: appsMin!...64)
        }

        guard let schemasEntry = top["schemas"] else { throw r.fail(0, "schemas", "missing (expected an object)") }
        var schemas: [String: [(String, String)]] = [:]
        let schemaMembers = try r.members(schemasEntry, "schemas", allowed: [])
        for (schemaName, entry) in schemaMembers {
            let fieldMembers = try r.members(entry, "schemas.\(schemaName)", allowed: [])
            var fields: [(String, String)] = []
            var i = entry + 1
            while i < Int(r.tape[entry].next) {
                let fieldName = r.string(i)
                guard r.tape[i + 1].kind == .string, ContentSchema.parseType(r.string(i + 1)) != nil else {
                    throw r.fail(
                        i + 1, "schemas.\(schemaName).\(fieldName)",
                        "expected a type: int, double, string or bool, optionally with ?")
                }
                fields.append((fieldName, r.string(i + 1)))
                i = Int(r.tape[i + 1].next)
            }
            _ = fieldMembers
            schemas[schemaName] = fields
        }

        var apps: [App] = []
        let appEntries = try r.array(top, "apps", "")
        guard !appEntries.isEmpty else { throw r.fail(top["apps"] ?? 0, "apps", "expected a non-empty array of apps") }
        for (k, entry) in appEntries.enumerated() {
            let path = "apps[\(k)]"
            let a = try r.members(entry, path, allowed: ["bundle", "schema", "weight"])
            let bundle = try r.text(a, "bundle", path)
            let schema = try r.text(a, "schema", path)
            guard schemas[schema] != nil else {
                throw r.fail(a["schema"]!, "\(path).schema", "no schema named \"\(schema)\" in schemas")
            }
            let weight = try r.number(a, "weight", path, default: 1, range: 0.000001...1e9)
            apps.append(App(bundle: bundle, schema: schema, weight: weight))
        }
        let stringBytes = try r.integer(top, "stringBytes", "", default: 16, range: 0...4000)
        if let appsMax, appsMax > apps.count {
            throw r.fail(
                p["appsPerDevice"]!, "population.appsPerDevice.max",
                "\(appsMax) is more than the \(apps.count) apps of the scenario")
        }

        guard let sourcesEntry = top["sources"] else { throw r.fail(0, "sources", "missing (expected an object)") }
        let s = try r.members(sourcesEntry, "sources", allowed: ["count", "zipfExponent", "broadcastShare"])
        let sources = Sources(
            count: try r.integer(s, "count", "sources", range: 1...10_000_000),
            zipfExponent: try r.number(s, "zipfExponent", "sources", default: 1.0, range: 0...10),
            broadcastShare: try r.number(s, "broadcastShare", "sources", default: 0.5, range: 0...1))

        guard let arrivalEntry = top["arrival"] else { throw r.fail(0, "arrival", "missing (expected an object)") }
        let ar = try r.members(arrivalEntry, "arrival", allowed: ["process", "ratePerSecond", "phases", "bursts"])
        let processText = try r.text(ar, "process", "arrival", default: "poisson")
        guard let process = ArrivalProcess(rawValue: processText) else {
            throw r.fail(
                ar["process"]!, "arrival.process", "expected \"constant\" or \"poisson\", found \"\(processText)\"")
        }
        var phases: [Phase] = []
        if ar["ratePerSecond"] != nil {
            phases.append(
                Phase(
                    atSeconds: 0, ratePerSecond: try r.number(ar, "ratePerSecond", "arrival", range: 0...1e9),
                    rampToPerSecond: nil))
        }
        for (k, entry) in try r.array(ar, "phases", "arrival").enumerated() {
            let path = "arrival.phases[\(k)]"
            let ph = try r.members(entry, path, allowed: ["atSeconds", "ratePerSecond", "rampToPerSecond"])
            let phase = Phase(
                atSeconds: try r.number(ph, "atSeconds", path, range: 0...duration),
                ratePerSecond: try r.number(ph, "ratePerSecond", path, range: 0...1e9),
                rampToPerSecond: try r.optionalNumber(ph, "rampToPerSecond", path, range: 0...1e9))
            if let last = phases.last, phase.atSeconds < last.atSeconds {
                throw r.fail(entry, "\(path).atSeconds", "phases must be in time order")
            }
            phases.append(phase)
        }
        guard !phases.isEmpty else {
            throw r.fail(arrivalEntry, "arrival.ratePerSecond", "missing (expected ratePerSecond or phases)")
        }
        var bursts: [Burst] = []
        for (k, entry) in try r.array(ar, "bursts", "arrival").enumerated() {
            let path = "arrival.bursts[\(k)]"
            let b = try r.members(entry, path, allowed: ["atSeconds", "events", "sourceRank", "overSeconds"])
            bursts.append(
                Burst(
                    atSeconds: try r.number(b, "atSeconds", path, range: 0...duration),
                    events: try r.integer(b, "events", path, range: 1...100_000_000),
                    sourceRank: try r.integer(b, "sourceRank", path, default: 1, range: 1...sources.count),
                    overSeconds: try r.number(b, "overSeconds", path, default: 0.1, range: 0...duration)))
        }

        var faults = Faults(
            outOfOrderShare: 0, malformedShare: 0, oversizedShare: 0, rotationShare: 0,
            dismissShare: 0, offline: nil, coalescing: false)
        if let entry = top["faults"] {
            let f = try r.members(
                entry, "faults",
                allowed: [
                    "outOfOrderShare", "malformedShare", "oversizedShare", "rotationShare", "dismissShare", "offline",
                    "coalescing", "channelChurnShare", "rotationWhileServing", "appEvents", "kickoff",
                ])
            faults.channelChurnShare = try r.number(f, "channelChurnShare", "faults", default: 0, range: 0...1)
            faults.outOfOrderShare = try r.number(f, "outOfOrderShare", "faults", default: 0, range: 0...1)
            faults.malformedShare = try r.number(f, "malformedShare", "faults", default: 0, range: 0...1)
            faults.oversizedShare = try r.number(f, "oversizedShare", "faults", default: 0, range: 0...1)
            faults.rotationShare = try r.number(f, "rotationShare", "faults", default: 0, range: 0...1)
            faults.dismissShare = try r.number(f, "dismissShare", "faults", default: 0, range: 0...1)
            faults.coalescing = try r.bool(f, "coalescing", "faults", default: false)
            if let rotationEntry = f["rotationWhileServing"], r.tape[rotationEntry].kind != .null {
                let o = try r.members(rotationEntry, "faults.rotationWhileServing", allowed: ["graceSeconds"])
                faults.rotationWhileServing = RotationWhileServing(
                    graceSeconds: try r.number(
                        o, "graceSeconds", "faults.rotationWhileServing", default: 5, range: 0...86_400))
            }
            if let appEntry = f["appEvents"], r.tape[appEntry].kind != .null {
                let path = "faults.appEvents"
                let o = try r.members(appEntry, path, allowed: ["dismiss", "disable", "uninstall", "graceSeconds"])
                let events = AppEvents(
                    dismissShare: try r.number(o, "dismiss", path, default: 0, range: 0...1),
                    disableShare: try r.number(o, "disable", path, default: 0, range: 0...1),
                    uninstallShare: try r.number(o, "uninstall", path, default: 0, range: 0...1),
                    graceSeconds: try r.number(o, "graceSeconds", path, default: 5, range: 0...86_400))
                let total = events.dismissShare + events.disableShare + events.uninstallShare
                guard total <= 1 + 1e-9 else {
                    throw r.fail(appEntry, path, "dismiss + disable + uninstall add up to \(total), over 1")
                }
                faults.appEvents = events
            }
            if let kickoffEntry = f["kickoff"], r.tape[kickoffEntry].kind != .null {
                faults.kickoff = try Self.kickoff(r, kickoffEntry, durationSeconds: duration)
            }
            if let offlineEntry = f["offline"], r.tape[offlineEntry].kind != .null {
                let o = try r.members(
                    offlineEntry, "faults.offline", allowed: ["share", "windowSeconds", "expirationSeconds"])
                faults.offline = Offline(
                    share: try r.number(o, "share", "faults.offline", range: 0...1),
                    windowSeconds: try r.number(o, "windowSeconds", "faults.offline", range: 0.001...86_400),
                    expirationSeconds: try r.number(
                        o, "expirationSeconds", "faults.offline", default: 3600,
                        range: 0...2_592_000))
            }
        }

        var lifecycle = Lifecycle(endFractionMin: nil, endFractionMax: nil, dismissalAfterSeconds: nil)
        if let entry = top["lifecycle"] {
            let l = try r.members(
                entry, "lifecycle", allowed: ["endFractionMin", "endFractionMax", "dismissalAfterSeconds"])
            lifecycle.endFractionMin = try r.optionalNumber(l, "endFractionMin", "lifecycle", range: 0...10)
            lifecycle.endFractionMax = try r.optionalNumber(l, "endFractionMax", "lifecycle", range: 0...10)
            lifecycle.dismissalAfterSeconds = try r.optionalNumber(
                l, "dismissalAfterSeconds", "lifecycle",
                range: -86_400...86_400)
            if (lifecycle.endFractionMin == nil) != (lifecycle.endFractionMax == nil) {
                throw r.fail(entry, "lifecycle", "give both endFractionMin and endFractionMax, or neither")
            }
            if let lo = lifecycle.endFractionMin, let hi = lifecycle.endFractionMax, hi < lo {
                throw r.fail(l["endFractionMax"]!, "lifecycle.endFractionMax", "must not be below endFractionMin")
            }
        }

        var perApp = 5
        var perDevice = 10
        if let entry = top["limits"] {
            let l = try r.members(entry, "limits", allowed: ["perApp", "perDevice"])
            perApp = try r.integer(l, "perApp", "limits", default: 5, range: 0...10_000)
            perDevice = try r.integer(l, "perDevice", "limits", default: 10, range: 0...10_000)
        }
        var costModel = CostModel.defaults
        if let entry = top["costModel"] {
            let m = try r.members(entry, "costModel", allowed: CostModel.fieldNames)
            var values: [Int] = []
            for (name, value) in zip(CostModel.fieldNames, CostModel.defaults.values) {
                values.append(try r.integer(m, name, "costModel", default: value, range: 0...1_000_000_000))
            }
            costModel = CostModel(values: values)
        }
        var budget: Int?
        if let entry = top["budgetPerHour"], r.tape[entry].kind != .null {
            budget = try r.integer(top, "budgetPerHour", "", range: 0...1_000_000)
        }
        var scenario = Scenario(
            name: name, description: description, seed: UInt64(seed), clock: clock, durationSeconds: duration,
            workers: workers,
            population: Population(
                devices: devices, activitiesPerDeviceMin: apdMin, activitiesPerDeviceMax: apdMax,
                appsPerDeviceMin: appsMin ?? apps.count, appsPerDeviceMax: appsMax ?? apps.count),
            apps: apps, schemas: schemas, stringBytes: stringBytes, sources: sources,
            arrival: Arrival(process: process, phases: phases, bursts: bursts), faults: faults, lifecycle: lifecycle,
            perAppLimit: perApp, perDeviceLimit: perDevice, budgetPerHour: budget,
            priority10Share: try r.number(top, "priority10Share", "", default: 0.5, range: 0...1),
            stageSampleEvery: try r.integer(top, "stageSampleEvery", "", default: 16, range: 1...1_000_000),
            costNanosPerDelivery: try r.integer(top, "costNanosPerDelivery", "", default: 0, range: 0...1_000_000_000),
            sliceBroadcasts: try r.bool(top, "sliceBroadcasts", "", default: false))
        scenario.costModel = costModel
        return scenario
    }
}

extension Scenario {
    /// `faults.kickoff` (docs/SCENARIOS.md): `{"share", "atSeconds", "overSeconds", "appDelayMillis": {"p50",
    /// "p99"}, "startBudget"}`, every start within the run.
    fileprivate static func kickoff(
        _ r: ScenarioReader, _ entry: Int, durationSeconds: Double
    ) throws(ScenarioError) -> Kickoff {
        let path = "faults.kickoff"
        let o = try r.members(
            entry, path, allowed: ["share", "atSeconds", "overSeconds", "appDelayMillis", "startBudget"])
        var k = Kickoff(
            share: try r.number(o, "share", path, range: 0...1),
            atSeconds: try r.number(o, "atSeconds", path, default: 1, range: 0...durationSeconds),
            overSeconds: try r.number(o, "overSeconds", path, default: 0, range: 0...durationSeconds),
            startBudget: try r.integer(o, "startBudget", path, default: 10, range: 0...1_000_000))
        guard k.atSeconds + k.overSeconds <= durationSeconds else {
            throw r.fail(entry, path, "atSeconds + overSeconds is past durationSeconds (\(durationSeconds))")
        }
        if let delay = o["appDelayMillis"], r.tape[delay].kind != .null {
            let d = try r.members(delay, "\(path).appDelayMillis", allowed: ["p50", "p99"])
            k.appDelayP50Millis = try r.number(d, "p50", "\(path).appDelayMillis", default: 30, range: 0.001...600_000)
            k.appDelayP99Millis = try r.number(d, "p99", "\(path).appDelayMillis", default: 150, range: 0.001...600_000)
            guard k.appDelayP99Millis >= k.appDelayP50Millis else {
                throw r.fail(delay, "\(path).appDelayMillis", "p99 is below p50")
            }
        }
        return k
    }
}
