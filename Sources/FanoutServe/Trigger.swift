import FanoutAPNs
import FanoutCore
import FanoutMetrics
import FanoutSim
import FanoutWire
import UVLoop

/// `fanout serve --trigger URL` (docs/INGEST.md §5): what to send and how.
public struct TriggerOptions: BackendTargeted, Sendable {
    /// The backend, its protocol and CAs, `--trigger-timeout` and `--trigger-concurrency` (an event due while all
    /// are busy waits for one).
    public var target: BackendTarget
    /// `--trigger-max-lag`: the schedule lag p99 above which the run is not judged (fanout sent the events late).
    public var maxScheduleLagNanos = TriggerResults.defaultMaxScheduleLagNanos
    /// `--trigger-spread`: how the events are spread over several URLs (default: a hash of the source).
    public var spread = BackendSpread.hash
    public init(url: String) { target = BackendTarget(url: url) }
    public init(urls: [String]) { target = BackendTarget(urls: urls) }
}

/// Sends the scenario's source events to a backend on one event loop (its own, beside `fanout serve`'s), each at its
/// intended time: the schedule of `fanout run` (`EventSchedule`), the events it pushes (`World.sendsPush`), their
/// fields (`World.fields(of:)`), the body of INGEST §5. Open loop: a slow backend never moves the schedule; at
/// most `concurrency` requests are in flight, and an event due while all are busy waits for a free slot (counted,
/// its wait measured), never dropped.
///
/// Lifecycle: ``start()`` once; ``stop()`` once at shutdown (cancels what is in flight, closes the client and the
/// timer). Loop affinity: the loop's thread only.
public final class TriggerSender {
    public let loop: EventLoop
    public let options: TriggerOptions
    /// When event offset 0 is due (`EventLoop.hrtimeNanos`): `ServeOptions.eventsT0Nanos`.
    public let t0Nanos: UInt64
    /// The same instant on the wall clock (UNIX milliseconds), for `intendedAt`.
    public let t0UnixMillis: Int64
    private let world: World
    private var schedule: EventSchedule
    /// Each event released at its intended time, to the microsecond (a libuv timer's whole milliseconds made
    /// events due 0.3 ms from now wait up to a millisecond: at 2,000 events/s that was most of them).
    private let sender: BackendSender<SourceEvent>
    /// `faults.kickoff`: each kickoff source's `start` event (``startIndex``), in intended order, and the next one due.
    private let starts: [SourceEvent]
    private var nextStart = 0
    private var content: [UInt8] = []
    /// `--trigger A,B` spread by hash: each source's URL (empty with one URL, or round robin).
    private let laneOfSource: [Int32]
    /// Round robin: the events released so far (the next one's URL is this modulo the URLs).
    private var released = 0
    /// What only the trigger counts (the sender's counts are added in ``results``).
    private var own = TriggerResults()

    public init(loop: EventLoop, world: World, options: TriggerOptions, t0Nanos: UInt64, t0UnixMillis: Int64)
        throws(HTTPClientError)
    {
        self.loop = loop
        self.options = options
        self.world = world
        self.t0Nanos = t0Nanos
        self.t0UnixMillis = t0UnixMillis
        schedule = EventSchedule(scenario: world.scenario, world: world)
        starts = world.kickoffOffsetNanos.enumerated()
            .filter { $0.element != .max }
            .map { SourceEvent(index: Self.startIndex, intendedNanos: $0.element, kind: .update, source: $0.offset) }
            .sorted { ($0.intendedNanos, $0.source) < ($1.intendedNanos, $1.source) }
        sender = try BackendSender(loop: loop, target: options.target)
        let n = options.urls.count
        if n > 1 && options.spread == .hash {
            var name: [UInt8] = []
            laneOfSource = world.sourceApp.indices.map { source in
                name.removeAll(keepingCapacity: true)
                world.appendChannelId(source: source, to: &name)
                return Int32(TriggerSender.lane(sourceId: name, urls: n))
            }
        } else {
            laneOfSource = []
        }
        own.url = options.url
        own.spread = options.spread
        own.concurrency = options.concurrency
    }

    /// `--trigger-spread hash`: the URL (an index of the list) of a source's events, FNV-1a (64-bit) of its id as the
    /// body's `source` carries it (`source-00042`) modulo the URLs: a function of the id alone, so that a run repeats
    /// and a backend's operator can compute it too.
    public static func lane(sourceId: [UInt8], urls: Int) -> Int {
        Int(FNV1a.hash(sourceId) % UInt64(max(urls, 1)))
    }

    /// What the trigger did and measured so far.
    public var results: TriggerResults {
        var r = own
        r.sent = sender.sent
        r.counts = sender.counts
        r.waitedForSlot = sender.waitedForSlot
        r.peakInFlight = sender.peakInFlight
        r.scheduleLagNanos = sender.scheduleLagNanos
        r.neverLeft = sender.neverLeft
        r.byURL = sender.byURL
        r.maxScheduleLagNanos = options.maxScheduleLagNanos
        return r
    }

    /// Sends what is due now and arms the timer for the next event.
    public func start() {
        sender.start(
            release: { [unowned self] now in self.release(now) },
            nextDue: { [unowned self] in self.nextEvent().map { self.t0Nanos &+ $0.intendedNanos } },
            body: { [unowned self] event in self.body(event) },
            ended: { [unowned self] event, end in self.ended(event, end) },
            drained: { [unowned self] in self.own.completed = true })
    }

    /// Serving stops: what waits is counted unsent, what is in flight cancelled; the client and the timer close.
    public func stop() {
        // The cancelled are counted into `own` from inside stop(); what waited for a slot was never sent.
        let unsent = sender.stop { [unowned self] event in self.failed(event, TriggerEventFailure.notSent) }
        own.unsentAtShutdown += unsent
    }

    private func failed(_ event: SourceEvent, _ reason: String) {
        let stamp =
            event.index == Self.startIndex
            ? ServingKickoff.startTimestamp(epochSeconds: world.epochSeconds) : world.timestamp(of: event)
        own.eventFailures.append(TriggerEventFailure(source: Int32(event.source), timestamp: stamp, reason: reason))
    }

    /// Every event of the schedule due by `now` that pushes goes to the sender.
    private func release(_ now: UInt64) {
        let elapsed = now > t0Nanos ? now - t0Nanos : 0
        while let event = nextEvent(), event.intendedNanos <= elapsed {
            if event.index == Self.startIndex {
                nextStart += 1
            } else {
                _ = schedule.next()
                guard world.sendsPush(event) else { continue }
            }
            sender.enqueue(event, dueNanos: t0Nanos &+ event.intendedNanos, lane: lane(of: event))
        }
    }

    /// The next event due: the schedule's, or a kickoff's start (first on a tie).
    private func nextEvent() -> SourceEvent? {
        let scheduled = schedule.peek()
        guard nextStart < starts.count else { return scheduled }
        guard let scheduled, scheduled.intendedNanos < starts[nextStart].intendedNanos else { return starts[nextStart] }
        return scheduled
    }

    /// The `index` of a kickoff's `start` event (`faults.kickoff`, docs/INGEST.md §5): no scheduled event has it.
    static let startIndex = -1

    /// The URL an event goes to: its source's (hash), or the next in turn (round robin; events in the schedule's
    /// order, so a run repeats).
    private func lane(of event: SourceEvent) -> Int {
        let n = options.urls.count
        guard n > 1 else { return 0 }
        if !laneOfSource.isEmpty { return Int(laneOfSource[event.source]) }
        defer { released += 1 }
        return released % n
    }

    /// An answered event's time from its intended one; a cancelled one counted (the rest is in the sender's counts).
    private func ended(_ event: SourceEvent, _ end: BackendSender<SourceEvent>.End) {
        switch end.outcome {
        case .answered:
            if let latency = end.latencyNanos { own.responseNanos.record(latency) }
            if !(200..<300).contains(end.status) { failed(event, TriggerEventFailure.answered(end.status)) }
        case .cancelled:
            own.cancelledAtShutdown += 1
            failed(event, TriggerEventFailure.cancelled)
        case .timedOut: failed(event, TriggerEventFailure.timedOut)
        case .failed(let message): failed(event, TriggerEventFailure.failed(message))
        }
    }

    // MARK: The body (INGEST §5)

    /// `{"source", "app", "event", "timestamp", "content-state", "stale-date", "relevance-score",
    /// "dismissal-date", "channel", "intendedAt"}`.
    func body(_ event: SourceEvent) -> [UInt8] {
        if event.index == Self.startIndex { return startBody(event) }
        var out: [UInt8] = []
        out.reserveCapacity(512)
        let source = event.source
        let app = world.sourceApp[source]
        let fields = world.fields(of: event)
        let name = appendHead(source, event: event.kind == .end ? "end" : "update", fields.timestamp, to: &out)
        JSONWriter.append(", \"content-state\": ", to: &out)
        let schema = world.appSchema[app]
        world.makeContent(schema: schema, event: event.index, source: source, final: event.kind == .end, into: &content)
        content.withUnsafeBytes { world.schemas[schema].appendCompactJSON(record: $0, to: &out) }
        JSONWriter.append(", \"stale-date\": ", to: &out)
        JSONWriter.appendInt(fields.staleDate, to: &out)
        JSONWriter.append(", \"relevance-score\": ", to: &out)
        JSONWriter.appendDouble(fields.relevanceScore, to: &out)
        JSONWriter.append(", \"dismissal-date\": ", to: &out)
        if let d = fields.dismissalDate {
            JSONWriter.appendInt(d, to: &out)
        } else {
            JSONWriter.append("null", to: &out)
        }
        JSONWriter.append(", \"channel\": ", to: &out)
        if world.sourceIsBroadcast[source] {
            var encoded: [UInt8] = []
            Base64.append(encoding: name, to: &encoded)
            encoded.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        } else {
            JSONWriter.append("null", to: &out)
        }
        JSONWriter.append(", \"intendedAt\": ", to: &out)
        let millis = t0UnixMillis + Int64(event.intendedNanos / 1_000_000)
        out.append(UInt8(ascii: "\""))
        TriggerSender.appendRFC3339(millis: millis, to: &out)
        out.append(UInt8(ascii: "\""))
        JSONWriter.append("}", to: &out)
        return out
    }

    /// `2026-11-26T06:51:00.123Z`.
    /// A body's first fields: `{"source": …, "app": …, "event": …, "timestamp": …`; returns the source's id.
    private func appendHead(_ source: Int, event: StaticString, _ timestamp: Int64, to out: inout [UInt8]) -> [UInt8] {
        var name: [UInt8] = []
        world.appendChannelId(source: source, to: &name)
        JSONWriter.append("{\"source\": ", to: &out)
        name.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        JSONWriter.append(", \"app\": ", to: &out)
        JSONWriter.appendString(world.scenario.apps[world.sourceApp[source]].bundle, to: &out)
        JSONWriter.append(", \"event\": \"", to: &out)
        JSONWriter.append(event, to: &out)
        JSONWriter.append("\", \"timestamp\": ", to: &out)
        JSONWriter.appendInt(timestamp, to: &out)
        return name
    }

    /// A kickoff's `start` event (docs/INGEST.md §5, *Kickoff*): the source, its app, `"event": "start"`, the
    /// push-to-start's `timestamp`, the activity's first `content-state`, `attributes-type` and `attributes` (the
    /// source it follows: `{"source": …}`), an `alert`, and `intendedAt`.
    func startBody(_ event: SourceEvent) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        let source = event.source
        let app = world.sourceApp[source]
        let stamp = ServingKickoff.startTimestamp(epochSeconds: world.epochSeconds)
        let name = appendHead(source, event: "start", stamp, to: &out)
        JSONWriter.append(", \"content-state\": ", to: &out)
        let schema = world.appSchema[app]
        world.makeContent(schema: schema, event: -1, source: source, final: false, into: &content)
        content.withUnsafeBytes { world.schemas[schema].appendCompactJSON(record: $0, to: &out) }
        JSONWriter.append(", \"attributes-type\": ", to: &out)
        JSONWriter.appendString(world.scenario.apps[app].schema, to: &out)
        JSONWriter.append(", \"attributes\": {\"source\": ", to: &out)
        name.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        JSONWriter.append("}, \"alert\": {\"title\": ", to: &out)
        name.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        JSONWriter.append(", \"body\": \"It has started\"}, \"stale-date\": null, \"relevance-score\": 0", to: &out)
        JSONWriter.append(", \"dismissal-date\": null, \"channel\": null, \"intendedAt\": \"", to: &out)
        TriggerSender.appendRFC3339(millis: t0UnixMillis + Int64(event.intendedNanos / 1_000_000), to: &out)
        JSONWriter.append("\"}", to: &out)
        return out
    }

    static func rfc3339(millis: Int64) -> String {
        var out: [UInt8] = []
        appendRFC3339(millis: millis, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `2026-11-26T06:51:00.123Z` (UTC, milliseconds) for `millis` since the UNIX epoch: the civil date by
    /// Howard Hinnant's `civil_from_days`, digits written directly. `String(format:)` (Foundation's formatter) cost
    /// ~44,000 instructions an event under callgrind, more than the rest of the body and the request together.
    static func appendRFC3339(millis: Int64, to out: inout [UInt8]) {
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        let ms = Int(millis - seconds * 1000)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = Int(seconds - days * 86_400)
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        let year = Int(yearOfEra + era * 400 + (month <= 2 ? 1 : 0))
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var v = value
            while divisor > 0 {
                out.append(UInt8(ascii: "0") &+ UInt8(v / divisor % 10))
                v %= divisor
                divisor /= 10
            }
        }
        digits(year, 4)
        out.append(UInt8(ascii: "-"))
        digits(month, 2)
        out.append(UInt8(ascii: "-"))
        digits(day, 2)
        out.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3600, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2)
        out.append(UInt8(ascii: "."))
        digits(ms, 3)
        out.append(UInt8(ascii: "Z"))
    }
}
