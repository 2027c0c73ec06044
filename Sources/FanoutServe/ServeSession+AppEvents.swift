import FanoutAPNs
import FanoutCore
import FanoutSim

/// App events while serving (`faults.appEvents`, docs/INGEST.md §5, *App events*): every loop's from t0 on, and the
/// app's requests telling the backend (`--app-events URL`), sent from the trigger's loop (``TriggerThread``) by a
/// ``Registrar`` of timed lines, each at its instant.
extension ServeSession {
    /// Starts every loop's app events at t0 and, with `--app-events`, hands the trigger's loop their requests, every
    /// loop's in due order (each at t0 + its offset).
    func servingAppEvents(_ services: [APNsService], _ options: inout ServeOptions) {
        var order: [(Int, Int)] = []
        for (k, service) in services.enumerated() {
            service.startAppEvents(t0Nanos: options.eventsT0Nanos, t0UnixMillis: options.eventsT0UnixMillis)
            order += service.appEvents.list.indices.map { (k, $0) }
        }
        guard let target = plan.appEvents, !order.isEmpty else { return }
        func offset(_ p: (Int, Int)) -> UInt64 { services[p.0].appEvents.list[p.1].offsetNanos }
        order.sort { (offset($0), $0.0, $0.1) < (offset($1), $1.0, $1.1) }
        let t0 = options.eventsT0Nanos
        let t0Millis = options.eventsT0UnixMillis
        let lines = order.map { p in
            (dueNanos: t0 &+ offset(p), line: Self.appEventLine(services[p.0], p.1, t0UnixMillis: t0Millis))
        }
        options.appEvents = ServingRegistration(options: target, lines: lines)
    }

    /// App event `k` of `service`'s request body: `{"kind", "device", "app", "activity", "token", "timestamp",
    /// "intendedAt"}` (`timestamp`: the instant on the devices' clock, UNIX milliseconds; `intendedAt`: on the wall
    /// clock, RFC 3339).
    static func appEventLine(_ service: APNsService, _ k: Int, t0UnixMillis: Int64) -> [UInt8] {
        let e = service.appEvents.list[k]
        let f = service.appEventFields(k)
        var out: [UInt8] = []
        out.reserveCapacity(512)
        JSONWriter.append("{\"kind\": ", to: &out)
        JSONWriter.appendString(e.kind.name, to: &out)
        let fields: [(StaticString, [UInt8])] = [
            (", \"device\": ", f.device), (", \"app\": ", f.app), (", \"activity\": ", f.activity),
            (", \"token\": ", f.token),
        ]
        for (name, value) in fields {
            JSONWriter.append(name, to: &out)
            value.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        }
        JSONWriter.append(", \"timestamp\": ", to: &out)
        JSONWriter.appendInt(service.appEventMillis(k), to: &out)
        JSONWriter.append(", \"intendedAt\": \"", to: &out)
        TriggerSender.appendRFC3339(millis: t0UnixMillis &+ Int64(e.offsetNanos / 1_000_000), to: &out)
        JSONWriter.append("\"}", to: &out)
        return out
    }
}

/// Kickoff by push-to-start (`faults.kickoff`, docs/INGEST.md §5, *Kickoff*): the serving loops post each started
/// activity's registration to the trigger's loop, which sends it to `--register` at its instant.
extension ServeSession {
    /// With `--register` and a kickoff: the inbox the loops post to, handed to the trigger's loop; nil otherwise.
    func servingKickoff(_ services: [APNsService], _ options: inout ServeOptions) -> KickoffInbox? {
        guard let register = plan.register, services.contains(where: { !$0.kickoff.list.isEmpty }) else { return nil }
        let inbox = KickoffInbox()
        for service in services { service.postKickoffRegistrations { inbox.post($0) } }
        options.kickoffRegistration = (register, inbox)
        return inbox
    }
}
