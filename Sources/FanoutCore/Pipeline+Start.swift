/// Push-to-start (TRACE rule 14): a push to a device's start token creates an activity.
extension PipelineCore {
    mutating func start(
        _ flight: Pipeline.InFlight, payload: UnsafeRawBufferPointer, device d: Int32, app: Int32, nowMillis: Int64,
        id: UnsafeRawBufferPointer?, token: UnsafeRawBufferPointer?
    ) {
        let outcome = startOutcome(
            flight.aps, payload: payload, device: d, app: app, nowMillis: nowMillis, id: id, token: token)
        accounting.outcomes[outcome.outcome.rawValue] += 1
        if let a = outcome.activity { store.count(.applied, for: a) }
    }

    private mutating func startOutcome(
        _ aps: ApsFields, payload: UnsafeRawBufferPointer, device d: Int32, app: Int32, nowMillis: Int64,
        id: UnsafeRawBufferPointer?, token: UnsafeRawBufferPointer?
    ) -> (outcome: Outcome, activity: Int32?) {
        if atLimit(device: d, app: app, nowMillis: nowMillis) { return (.limitExceeded, nil) }
        let tape = validator.tape.reading(payload)
        let typeIndex = Int(aps.attributesType)
        guard typeIndex >= 0, tape[typeIndex].kind == .string,
            let schema = schemas.id(named: tape.rawBytes(typeIndex)) ?? escapedSchemaName(tape, typeIndex),
            aps.attributes >= 0, tape[Int(aps.attributes)].kind == .object,
            aps.alert >= 0, tape[Int(aps.alert)].kind == .object,
            aps.contentState >= 0,
            case .decoded(let stale) = optionalDate(tape, aps.staleDate),
            let relevance = optionalRelevance(tape, aps.relevanceScore)
        else { return (.decodeFailed, nil) }
        let channelIndex = Int(aps.inputPushChannel)
        guard channelIndex < 0 || tape[channelIndex].kind == .null || tape[channelIndex].kind == .string else {
            return (.decodeFailed, nil)
        }
        record.removeAll()
        guard schemas[schema].decodeRecord(tape: tape, object: Int(aps.contentState), into: &record) else {
            return (.decodeFailed, nil)
        }
        guard let id, let token else { preconditionFailure("a push-to-start needs the new activity's id and token") }
        let a = withExtendedLifetime(record) {
            store.create(
                id: id, device: d, app: app, schema: schema, nowMillis: nowMillis, content: record.bytes,
                staleDate: stale.map(Double.init), relevance: relevance, timestamp: aps.timestamp)
        }
        store.token[Int(a)] = router.assignUpdateToken(token, to: a, previous: Router.none)
        if channelIndex >= 0 && tape[channelIndex].kind == .string {
            var channelId: [UInt8] = []
            tape.appendUnescaped(channelIndex, to: &channelId)
            channelId.withUnsafeBytes { subscribe(a, channel: $0) }
        }
        return (.applied, a)
    }

    private func escapedSchemaName(_ tape: JSONDocument, _ index: Int) -> Int32? {
        guard tape[index].flag else { return nil }
        var name: [UInt8] = []
        tape.appendUnescaped(index, to: &name)
        return name.withUnsafeBytes { schemas.id(named: $0) }
    }
}
