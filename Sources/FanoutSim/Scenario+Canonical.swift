import FanoutCore
import FanoutMetrics

extension Scenario {
    /// The scenario as canonical JSON (fixed key order, two-space indent): what `fanout scenarios show`
    /// prints, and what the configuration hash covers.
    public var canonicalText: String {
        var o = JSONTextWriter()
        o.open()
        o.field("name", string: name)
        o.field("description", string: description)
        o.field("seed", int: Int(seed))
        o.field("clock", string: clock.rawValue)
        o.field("durationSeconds", number: durationSeconds)
        o.field("workers", int: workers)
        o.key("population")
        o.open()
        o.field("devices", int: population.devices)
        o.key("activitiesPerDevice")
        o.inline("{\"min\": \(population.activitiesPerDeviceMin), \"max\": \(population.activitiesPerDeviceMax)}")
        o.key("appsPerDevice")
        o.inline("{\"min\": \(population.appsPerDeviceMin), \"max\": \(population.appsPerDeviceMax)}")
        o.close()
        o.key("apps")
        o.inline(
            "["
                + apps.map {
                    "{\"bundle\": \(JSONTextWriter.quote($0.bundle)), \"schema\": \(JSONTextWriter.quote($0.schema)), "
                        + "\"weight\": \(JSONTextWriter.number($0.weight))}"
                }.joined(separator: ", ") + "]")
        o.key("schemas")
        o.open()
        for schemaName in schemas.keys.sorted() {
            o.key(schemaName)
            o.inline(
                "{"
                    + schemas[schemaName]!.map { "\(JSONTextWriter.quote($0.0)): \(JSONTextWriter.quote($0.1))" }
                    .joined(separator: ", ") + "}")
        }
        o.close()
        o.field("stringBytes", int: stringBytes)
        o.key("sources")
        o.inline(
            "{\"count\": \(sources.count), \"zipfExponent\": \(JSONTextWriter.number(sources.zipfExponent)), "
                + "\"broadcastShare\": \(JSONTextWriter.number(sources.broadcastShare))}")
        o.key("arrival")
        o.open()
        o.field("process", string: arrival.process.rawValue)
        o.key("phases")
        o.inline(
            "["
                + arrival.phases.map { phase in
                    var text =
                        "{\"atSeconds\": \(JSONTextWriter.number(phase.atSeconds)), "
                        + "\"ratePerSecond\": \(JSONTextWriter.number(phase.ratePerSecond))"
                    if let ramp = phase.rampToPerSecond {
                        text += ", \"rampToPerSecond\": \(JSONTextWriter.number(ramp))"
                    }
                    return text + "}"
                }.joined(separator: ", ") + "]")
        o.key("bursts")
        o.inline(
            "["
                + arrival.bursts.map {
                    "{\"atSeconds\": \(JSONTextWriter.number($0.atSeconds)), \"events\": \($0.events), "
                        + "\"sourceRank\": \($0.sourceRank), \"overSeconds\": \(JSONTextWriter.number($0.overSeconds))}"
                }.joined(separator: ", ") + "]")
        o.close()
        o.key("faults")
        o.open()
        o.field("outOfOrderShare", number: faults.outOfOrderShare)
        o.field("malformedShare", number: faults.malformedShare)
        o.field("oversizedShare", number: faults.oversizedShare)
        o.field("rotationShare", number: faults.rotationShare)
        o.field("dismissShare", number: faults.dismissShare)
        o.key("offline")
        if let offline = faults.offline {
            o.inline(
                "{\"share\": \(JSONTextWriter.number(offline.share)), "
                    + "\"windowSeconds\": \(JSONTextWriter.number(offline.windowSeconds)), "
                    + "\"expirationSeconds\": \(JSONTextWriter.number(offline.expirationSeconds))}")
        } else {
            o.inline("null")
        }
        o.field("coalescing", bool: faults.coalescing)
        // Written only when set, so that the configuration hashes of older scenarios do not change.
        if faults.channelChurnShare > 0 { o.field("channelChurnShare", number: faults.channelChurnShare) }
        if let rotation = faults.rotationWhileServing {
            o.key("rotationWhileServing")
            o.inline("{\"graceSeconds\": \(JSONTextWriter.number(rotation.graceSeconds))}")
        }
        if let app = faults.appEvents {
            o.key("appEvents")
            o.inline(
                "{\"dismiss\": \(JSONTextWriter.number(app.dismissShare)), "
                    + "\"disable\": \(JSONTextWriter.number(app.disableShare)), "
                    + "\"uninstall\": \(JSONTextWriter.number(app.uninstallShare)), "
                    + "\"graceSeconds\": \(JSONTextWriter.number(app.graceSeconds))}")
        }
        if let k = faults.kickoff {
            let n = JSONTextWriter.number
            o.key("kickoff")
            o.inline(
                "{\"share\": \(n(k.share)), \"atSeconds\": \(n(k.atSeconds)), \"overSeconds\": \(n(k.overSeconds)), "
                    + "\"appDelayMillis\": {\"p50\": \(n(k.appDelayP50Millis)), \"p99\": \(n(k.appDelayP99Millis))}, "
                    + "\"startBudget\": \(k.startBudget)}")
        }
        o.close()
        o.key("lifecycle")
        o.inline(
            "{\"endFractionMin\": \(JSONTextWriter.number(lifecycle.endFractionMin)), "
                + "\"endFractionMax\": \(JSONTextWriter.number(lifecycle.endFractionMax)), "
                + "\"dismissalAfterSeconds\": \(JSONTextWriter.number(lifecycle.dismissalAfterSeconds))}")
        o.key("limits")
        o.inline("{\"perApp\": \(perAppLimit), \"perDevice\": \(perDeviceLimit)}")
        o.key("budgetPerHour")
        o.inline(budgetPerHour.map(String.init) ?? "null")
        o.field("priority10Share", number: priority10Share)
        o.field("stageSampleEvery", int: stageSampleEvery)
        // Only when set, so that the hashes of existing scenarios do not change.
        if costNanosPerDelivery > 0 { o.field("costNanosPerDelivery", int: costNanosPerDelivery) }
        if sliceBroadcasts { o.field("sliceBroadcasts", bool: true) }
        o.key("costModel")
        o.inline(costModel.jsonText)
        o.close()
        return o.text + "\n"
    }

    /// FNV-1a 64 of the canonical text, in hex: equal hashes mean equal configurations.
    public var configHash: String {
        FNV1a.hex(FNV1a.hash(canonicalText.utf8))
    }
}
