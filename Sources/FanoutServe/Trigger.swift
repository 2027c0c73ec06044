import FanoutAPNs
import FanoutCore
import FanoutMetrics
import FanoutSim
import FanoutWire
import UVLoop

/// `fanout serve --trigger URL` (docs/INGEST.md §5): what to send and how.
public struct TriggerOptions: Sendable {
    public var url: String
    /// HTTP/1.1 (keep-alive) or HTTP/2 (h2c prior knowledge on http://, ALPN on https://).
    public var version = HTTPClient.Version.http1_1
    /// CAs for an https:// backend (nil: the system's).
    public var caFile: String?
    /// Requests in flight at most (`--trigger-concurrency`); an event due while all are busy waits for one.
    public var concurrency = 256
    /// A request's whole time before it counts as a timeout (`--trigger-timeout`).
    public var timeoutSeconds = 10.0
    public init(url: String) { self.url = url }
}

/// What the trigger did and measured (summary.json `trigger`, summary.md, trigger-response.hgrm and
/// trigger-schedule-lag.hgrm). Every event sent ends in exactly one of: an answer (by status), a timeout, an
/// error (by libcurl's message), or cancelled by the shutdown.
public struct TriggerResults: Sendable {
    public var url = ""
    public var concurrency = 0
    /// Events POSTed.
    public var sent = 0
    /// Answers by HTTP status (2xx is success).
    public var byStatus: [Int: Int] = [:]
    /// No complete answer within `--trigger-timeout`.
    public var timeouts = 0
    /// Connection refused, TLS failure, protocol error…: by libcurl's message.
    public var errors: [String: Int] = [:]
    /// In flight when serving stopped (the request was cancelled).
    public var cancelledAtShutdown = 0
    /// Due before serving stopped but still waiting for a free slot then (never sent).
    public var unsentAtShutdown = 0
    /// Events that found every slot busy at their intended time and waited (their wait is in `scheduleLagNanos`).
    public var waitedForSlot = 0
    /// The most requests in flight at once (at most `concurrency`).
    public var peakInFlight = 0
    /// Every event of the schedule was sent and answered (or timed out, or failed) before serving stopped.
    public var completed = false
    /// Answered events, from their intended time to the answer's end (open loop: a wait for a slot or a late
    /// timer counts; coordinated omission is accounted for).
    public var responseNanos = LatencyHistogram()
    /// Every event sent, from its intended time to the moment its request was started.
    public var scheduleLagNanos = LatencyHistogram()

    public init() {}

    public var answered: Int { byStatus.values.reduce(0, +) }
    public var successes: Int { byStatus.filter { (200..<300).contains($0.key) }.values.reduce(0, +) }
    /// sent = answered + timeouts + errors + cancelled at shutdown.
    public var identityHolds: Bool {
        sent == answered + timeouts + errors.values.reduce(0, +) + cancelledAtShutdown
    }

    /// Events that ended without a 2xx answer (a non-2xx answer, a timeout or an error; not the cancelled).
    public var failures: Int { BackendFailures.count(byStatus: byStatus, timeouts: timeouts, errors: errors) }

    /// The stderr line after serving when some event failed (nil when none did): how many succeeded, and each
    /// failure by its status or libcurl's words.
    public var failureLine: String? {
        guard failures > 0 else { return nil }
        return "fanout serve: trigger \(url): \(successes) of \(sent) events answered 2xx"
            + (cancelledAtShutdown > 0 ? ", \(cancelledAtShutdown) cancelled at shutdown" : "")
            + "; failures: " + BackendFailures.text(byStatus: byStatus, timeouts: timeouts, errors: errors)
    }
}

/// The requests to a backend that did not succeed, in one line for stderr: "250 answered 500, 12 timed out,
/// 3 Couldn't connect to server (Connection refused)" — every non-2xx status, the timeouts and each error (libcurl's
/// words), most frequent first, at most `limit` kinds (then "and N more kinds"); "" when there were none.
public enum BackendFailures {
    public static func count(byStatus: [Int: Int], timeouts: Int, errors: [String: Int]) -> Int {
        byStatus.filter { !(200..<300).contains($0.key) }.values.reduce(0, +) + timeouts + errors.values.reduce(0, +)
    }

    public static func text(byStatus: [Int: Int], timeouts: Int, errors: [String: Int], limit: Int = 4) -> String {
        var kinds: [(count: Int, text: String)] = []
        for (status, n) in byStatus where !(200..<300).contains(status) { kinds.append((n, "\(n) answered \(status)")) }
        if timeouts > 0 { kinds.append((timeouts, "\(timeouts) timed out")) }
        for (message, n) in errors { kinds.append((n, "\(n) \(message)")) }
        kinds.sort { $0.count != $1.count ? $0.count > $1.count : $0.text < $1.text }
        var text = kinds.prefix(limit).map(\.text).joined(separator: ", ")
        if kinds.count > limit { text += " and \(kinds.count - limit) more kinds (summary.md)" }
        return text
    }
}

/// Sends the scenario's source events to a backend on one event loop (loop 0 of `fanout serve`), each at its
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
    private var client: HTTPClient?
    /// Fires when the next event is due, to the microsecond (a libuv timer's whole milliseconds made events due
    /// 0.3 ms from now wait up to a millisecond: at 2,000 events/s that was most of them).
    private var timer: DeadlineTimer?
    /// Events due and not sent yet (no free slot), oldest first from `waitingHead`.
    private var waiting: [SourceEvent] = []
    private var waitingHead = 0
    private var stopped = false
    private var content: [UInt8] = []
    public private(set) var results = TriggerResults()

    public init(loop: EventLoop, world: World, options: TriggerOptions, t0Nanos: UInt64, t0UnixMillis: Int64)
        throws(HTTPClientError)
    {
        self.loop = loop
        self.options = options
        self.world = world
        self.t0Nanos = t0Nanos
        self.t0UnixMillis = t0UnixMillis
        schedule = EventSchedule(scenario: world.scenario, world: world)
        var http = HTTPClient.Options()
        http.version = options.version
        http.caFile = options.caFile
        http.timeoutMillis = max(1, Int((options.timeoutSeconds * 1000).rounded()))
        http.maxBodyBytes = 1024
        // Every connection a burst opened stays for the next one (HTTP/1.1 keep-alive): libcurl's default cache
        // (4 × the requests in flight) closed them as soon as fewer were in flight, and 2,000 events/s against a
        // local responder opened a connection for one request in 6 (4,661 for 30,161 requests).
        http.maxCachedConnections = options.concurrency
        client = try HTTPClient(loop: loop, options: http)
        results.url = options.url
        results.concurrency = options.concurrency
    }

    /// Arms the timer for the first event.
    public func start() {
        let timer = DeadlineTimer(loop: loop) { [unowned self] _ in self.tick() }
        self.timer = timer
        tick()
    }

    /// Serving stops: what waits is counted unsent, what is in flight cancelled; the client and the timer close.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        results.unsentAtShutdown += waiting.count - waitingHead
        waiting.removeAll()
        waitingHead = 0
        closeHandles()
    }

    private func closeHandles() {
        client?.close()
        client = nil
        timer?.close()
        timer = nil
    }

    private var inFlight: Int { client?.inFlight ?? 0 }

    /// Everything due is queued, as many as the free slots allow are sent, and the timer is armed for the next.
    private func tick() {
        guard !stopped else { return }
        let now = EventLoop.hrtimeNanos
        let elapsed = now > t0Nanos ? now - t0Nanos : 0
        while let event = schedule.peek(), event.intendedNanos <= elapsed {
            _ = schedule.next()
            guard world.sendsPush(event) else { continue }
            if inFlight + (waiting.count - waitingHead) >= options.concurrency { results.waitedForSlot += 1 }
            waiting.append(event)
        }
        pump()
        if let next = schedule.peek() {
            timer?.start(atHrtimeNanos: t0Nanos &+ next.intendedNanos)
        } else {
            finishIfDone()
        }
    }

    /// Sends waiting events while a slot is free.
    private func pump() {
        while !stopped, waitingHead < waiting.count, inFlight < options.concurrency, let client {
            let event = waiting[waitingHead]
            waitingHead += 1
            let due = t0Nanos &+ event.intendedNanos
            let now = EventLoop.hrtimeNanos
            results.scheduleLagNanos.record(now > due ? now - due : 0)
            results.sent += 1
            do {
                try client.post(url: options.url, body: body(event), headers: ["Content-Type: application/json"]) {
                    [unowned self] response in self.completed(response, due: due)
                }
            } catch {
                results.errors[error.description, default: 0] += 1
            }
            results.peakInFlight = max(results.peakInFlight, client.inFlight)
        }
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        } else if waitingHead > 4096 && waitingHead * 2 > waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
    }

    private func completed(_ response: HTTPClient.Response, due: UInt64) {
        switch response.outcome {
        case .answered:
            results.byStatus[response.status, default: 0] += 1
            let now = EventLoop.hrtimeNanos
            results.responseNanos.record(min(now > due ? now - due : 0, HdrLayout.highestTrackableValue))
        case .timedOut: results.timeouts += 1
        case .failed(let message): results.errors[message, default: 0] += 1
        case .cancelled: results.cancelledAtShutdown += 1
        }
        guard !stopped else { return }
        pump()
        finishIfDone()
    }

    /// The schedule is over and every request has ended: the client's connections and the timer go.
    private func finishIfDone() {
        guard !stopped, schedule.peek() == nil, waitingHead == waiting.count, inFlight == 0 else { return }
        results.completed = true
        stopped = true
        // Not from inside the client's completion (close() completes and cleans up what it holds): next turn.
        let closer = UVLoop.Timer(loop: loop) { [unowned self] timer in
            timer.close()
            self.closeHandles()
        }
        closer.start(afterMillis: 0)
    }

    // MARK: The body (INGEST §5)

    /// `{"source", "app", "event", "timestamp", "content-state", "stale-date", "relevance-score",
    /// "dismissal-date", "channel", "intendedAt"}`.
    func body(_ event: SourceEvent) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        let source = event.source
        let app = world.sourceApp[source]
        let fields = world.fields(of: event)
        var name: [UInt8] = []
        world.appendChannelId(source: source, to: &name)
        JSONWriter.append("{\"source\": ", to: &out)
        name.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        JSONWriter.append(", \"app\": ", to: &out)
        JSONWriter.appendString(world.scenario.apps[app].bundle, to: &out)
        JSONWriter.append(event.kind == .end ? ", \"event\": \"end\"" : ", \"event\": \"update\"", to: &out)
        JSONWriter.append(", \"timestamp\": ", to: &out)
        JSONWriter.appendInt(fields.timestamp, to: &out)
        JSONWriter.append(", \"content-state\": ", to: &out)
        let schema = world.appSchema[app]
        world.makeContent(schema: schema, event: event.index, source: source, final: event.kind == .end, into: &content)
        content.withUnsafeBytes { world.schemas[schema].appendCompactJSON(record: $0, to: &out) }
        JSONWriter.append(", \"stale-date\": ", to: &out)
        JSONWriter.appendInt(fields.staleDate, to: &out)
        JSONWriter.append(", \"relevance-score\": ", to: &out)
        JSONWriter.appendDouble(fields.relevanceScore, to: &out)
        JSONWriter.append(", \"dismissal-date\": ", to: &out)
        if let d = fields.dismissalDate { JSONWriter.appendInt(d, to: &out) } else { JSONWriter.append("null", to: &out) }
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
