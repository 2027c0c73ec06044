import FanoutMetrics
import FanoutWire
import UVLoop

/// Where and how a ``BackendSender`` POSTs: what ``TriggerOptions`` (`--trigger-*`) and ``RegisterOptions``
/// (`--register-*`) share, each reading and setting these fields as its own (``BackendTargeted``).
public struct BackendTarget: Sendable {
    /// The backend's URLs: one, or several instances of it (`--trigger A,B`), each request to one of them.
    public var urls: [String]
    /// HTTP/1.1 (keep-alive) or HTTP/2 (h2c prior knowledge on http://, ALPN on https://).
    public var version = HTTPClient.Version.http1_1
    /// CAs for an https:// backend (nil: the system's).
    public var caFile: String?
    /// A request's whole time before it counts as a timeout (`--trigger-timeout`; a registration attempt fails).
    public var timeoutSeconds = 10.0
    /// Requests in flight at most to each URL (`--trigger-concurrency`); a request due while all of its URL's are
    /// busy waits for one (a slow instance holds up its own requests, never another's).
    public var concurrency = 256
    /// URLs a list may hold at most (`--trigger A,B,...`).
    public static let maxURLs = 64
    public init(url: String) { urls = [url] }
    public init(urls: [String]) { self.urls = urls }
    /// The URLs as given, comma-separated (one URL: itself).
    public var url: String {
        get { urls.joined(separator: ",") }
        set { urls = [newValue] }
    }
}

/// Options that hold a ``BackendTarget``: its fields by their own names (`options.url`, `options.concurrency = 64`).
@dynamicMemberLookup
public protocol BackendTargeted {
    var target: BackendTarget { get set }
}

extension BackendTargeted {
    public subscript<T>(dynamicMember keyPath: WritableKeyPath<BackendTarget, T>) -> T {
        get { target[keyPath: keyPath] }
        set { target[keyPath: keyPath] = newValue }
    }
}

/// An open-loop sender of JSON POSTs to a backend's URLs (one, or several instances) on one event loop, for the
/// trigger and the registrar: each item is released at its intended time (a ``DeadlineTimer``, to the
/// microsecond) to the URL its owner names (a lane), at most `concurrency` requests are in flight to each URL, an
/// item due while all of its URL's slots are busy waits in that URL's FIFO for a free one (never dropped), and every
/// request is counted, in total (``counts``) and per URL (``byURL``), and handed back to its owner with its time
/// from the intended instant.
///
/// One ``HTTPClient`` (one libcurl multi handle) serves every URL: libcurl keeps its connection cache per host and
/// port, so each instance gets its own connections, and one timer and one set of polls serve them all. The bound is
/// per URL, not global: a global FIFO would let an instance that stops answering fill every slot and hold up the
/// healthy instances' events behind its own (head-of-line blocking across instances).
///
/// The owner says what is due: ``start(release:nextDue:body:ended:drained:)`` takes `release(now)`, which
/// ``enqueue(_:dueNanos:lane:)``s everything due by `now`, and `nextDue()`, the next instant something will be due
/// (nil: nothing more will come but what the owner's `ended` may still add). A turn — the timer, and the end of every
/// request — releases what is due, sends while a slot is free and arms the timer for the next; once nothing more
/// will come, nothing waits and nothing is in flight, `drained` runs and the client and the timer close on the
/// loop's next turn (never from inside the client's completion).
///
/// Lifecycle: ``start(release:nextDue:body:ended:drained:)`` once; ``stop()`` at most once more (idempotent).
/// Loop affinity: the loop's thread only.
final class BackendSender<Item> {
    /// How a request ended: its outcome and status (``HTTPClient/Response``), and the time from its intended
    /// instant to its end (clamped to the histograms' range); nil when the request could not be started
    /// (`outcome` is `.failed` with the client's words then).
    struct End {
        var outcome: HTTPClient.Response.Outcome
        var status: Int
        var latencyNanos: UInt64?
    }

    /// One URL: what waits for it, what is in flight to it, and its counts.
    private struct Lane {
        var queue = BackendQueue<(item: Item, dueNanos: UInt64)>()
        var inFlight = 0
        var results: BackendURLResults
    }

    let loop: EventLoop
    let urls: [String]
    /// Requests in flight at most, per URL.
    let concurrency: Int
    private var client: HTTPClient?
    private var timer: DeadlineTimer?
    /// The instant the timer is armed for (not armed again for the same one).
    private var armedAt: UInt64?
    private var lanes: [Lane]
    private var stopped = false
    /// More items may come (``wake()``): nothing due, nothing queued or in flight does not end the sender; only
    /// ``stop()`` does (kickoff's registrations, posted while serving).
    var holdsOpen = false
    private var release: (UInt64) -> Void = { _ in }
    private var nextDue: () -> UInt64? = { nil }
    private var body: (Item) -> [UInt8] = { _ in [] }
    private var ended: (Item, End) -> Void = { _, _ in }
    private var drained: () -> Void = {}

    /// Requests started, and every outcome but the cancelled.
    private(set) var sent = 0
    private(set) var counts = BackendCounts()
    /// Items that found every slot of their URL busy when they were due (their wait is in `scheduleLagNanos`).
    private(set) var waitedForSlot = 0
    /// The most requests in flight at once, every URL together (at most `concurrency` × the URLs).
    private(set) var peakInFlight = 0
    /// Every request, from its intended instant to the moment it left (libcurl about to send it on its connection,
    /// the connection's setup left out: ``HTTPClient/Response/queuedNanos``) — fanout's own lateness; a request
    /// that never left (no connection, cancelled first) to the moment it was handed to the client, and counted in
    /// `neverLeft`. Recorded when the request ends.
    private(set) var scheduleLagNanos = LatencyHistogram()
    private(set) var neverLeft = 0

    init(loop: EventLoop, target: BackendTarget) throws(HTTPClientError) {
        self.loop = loop
        urls = target.urls
        concurrency = target.concurrency
        lanes = target.urls.map { Lane(results: BackendURLResults(url: $0)) }
        var http = HTTPClient.Options()
        http.version = target.version
        http.caFile = target.caFile
        http.timeoutMillis = max(1, Int((target.timeoutSeconds * 1000).rounded()))
        http.maxBodyBytes = 1024
        // Every connection a burst opened stays for the next one (HTTP/1.1 keep-alive): libcurl's default cache
        // (4 × the requests in flight) closed them as soon as fewer were in flight, and 2,000 events/s against a
        // local responder opened a connection for one request in 6 (4,661 for 30,161 requests). The cache is the
        // multi handle's, for every URL: each URL's slots.
        http.maxCachedConnections = target.concurrency * max(1, target.urls.count)
        client = try HTTPClient(loop: loop, options: http)
    }

    /// Due and not sent yet, every URL together.
    var queued: Int { lanes.reduce(0) { $0 + $1.queue.count } }

    /// Each URL's counts, in the order of `urls`.
    var byURL: [BackendURLResults] { lanes.map(\.results) }

    private var inFlight: Int { client?.inFlight ?? 0 }

    /// Runs the first turn. `body` is called once per item, as its request is started.
    func start(
        release: @escaping (_ now: UInt64) -> Void, nextDue: @escaping () -> UInt64?,
        body: @escaping (Item) -> [UInt8], ended: @escaping (Item, End) -> Void, drained: @escaping () -> Void
    ) {
        self.release = release
        self.nextDue = nextDue
        self.body = body
        self.ended = ended
        self.drained = drained
        timer = DeadlineTimer(loop: loop) { [unowned self] _ in
            self.armedAt = nil
            self.turn()
        }
        turn()
    }

    /// An item due at `dueNanos` (an ``EventLoop/hrtimeNanos`` instant, passed) for URL `lane` (an index of
    /// `urls`): sent in turn, as a slot of that URL frees.
    func enqueue(_ item: Item, dueNanos: UInt64, lane: Int = 0) {
        if lanes[lane].inFlight + lanes[lane].queue.count >= concurrency {
            waitedForSlot += 1
            lanes[lane].results.waitedForSlot += 1
        }
        lanes[lane].queue.append((item, dueNanos))
    }

    /// New items may be due (`release` and `nextDue` know of them): a turn now.
    func wake() { turn() }

    /// Sending ends now: what is queued is dropped (its count returned), what is in flight completes as cancelled
    /// (to `ended`, from inside this call), and the client and the timer close. Nothing after the first stop or
    /// once drained (returns 0).
    @discardableResult
    func stop(dropping each: (Item) -> Void = { _ in }) -> Int {
        guard !stopped else { return 0 }
        stopped = true
        var dropped = 0
        for l in lanes.indices {
            let n = lanes[l].queue.removeAll { each($0.0) }
            lanes[l].results.unsent += n
            dropped += n
        }
        closeHandles()
        return dropped
    }

    private func closeHandles() {
        client?.close()
        client = nil
        timer?.close()
        timer = nil
    }

    /// What is due is released and sent while a slot is free; the timer is armed for the next, or the sender is
    /// drained.
    private func turn() {
        guard !stopped else { return }
        release(EventLoop.hrtimeNanos)
        pump()
        if let next = nextDue() {
            if armedAt != next {
                armedAt = next
                timer?.start(atHrtimeNanos: next)
            }
        } else if queued == 0, inFlight == 0, !holdsOpen {
            stopped = true
            drained()
            // Not from inside the client's completion (close() completes and cleans up what it holds): next turn.
            BackendSender.onNextTurn(loop) { [unowned self] in self.closeHandles() }
        }
    }

    /// Sends each URL's queued items while a slot of it is free.
    private func pump() {
        for l in lanes.indices {
            while !stopped, lanes[l].inFlight < concurrency, let client, let next = lanes[l].queue.popFirst() {
                send(next.item, due: next.dueNanos, lane: l, client)
            }
        }
    }

    private func send(_ item: Item, due: UInt64, lane l: Int, _ client: HTTPClient) {
        let now = EventLoop.hrtimeNanos
        let handoff = now > due ? now - due : 0
        sent += 1
        lanes[l].results.sent += 1
        do {
            try client.post(url: urls[l], body: body(item), headers: ["Content-Type: application/json"]) {
                [unowned self] response in self.completed(item, response, due: due, handoff: handoff, lane: l)
            }
        } catch {
            scheduleLagNanos.record(handoff)
            lanes[l].results.scheduleLagNanos.record(handoff)
            neverLeft += 1
            lanes[l].results.neverLeft += 1
            counts.errors[error.description, default: 0] += 1
            lanes[l].results.counts.errors[error.description, default: 0] += 1
            ended(item, End(outcome: .failed(error.description), status: 0, latencyNanos: nil))
            return
        }
        lanes[l].inFlight += 1
        lanes[l].results.peakInFlight = max(lanes[l].results.peakInFlight, lanes[l].inFlight)
        peakInFlight = max(peakInFlight, client.inFlight)
    }

    private func completed(
        _ item: Item, _ response: HTTPClient.Response, due: UInt64, handoff: UInt64, lane l: Int
    ) {
        let now = EventLoop.hrtimeNanos
        lanes[l].inFlight -= 1
        let lag: UInt64
        if let queued = response.queuedNanos {
            lag = min(handoff &+ queued, HdrLayout.highestTrackableValue)
        } else {
            lag = handoff
            neverLeft += 1
            lanes[l].results.neverLeft += 1
        }
        scheduleLagNanos.record(lag)
        lanes[l].results.scheduleLagNanos.record(lag)
        let latency = min(now > due ? now - due : 0, HdrLayout.highestTrackableValue)
        switch response.outcome {
        case .answered:
            counts.byStatus[response.status, default: 0] += 1
            lanes[l].results.counts.byStatus[response.status, default: 0] += 1
            lanes[l].results.responseNanos.record(latency)
        case .timedOut:
            counts.timeouts += 1
            lanes[l].results.counts.timeouts += 1
        case .failed(let message):
            counts.errors[message, default: 0] += 1
            lanes[l].results.counts.errors[message, default: 0] += 1
        case .cancelled: lanes[l].results.cancelled += 1
        }
        ended(item, End(outcome: response.outcome, status: response.status, latencyNanos: latency))
        turn()
    }

    /// Runs `body` once on the loop's next turn (a zero timer that closes itself).
    static func onNextTurn(_ loop: EventLoop, _ body: @escaping () -> Void) {
        let timer = UVLoop.Timer(loop: loop) { timer in
            timer.close()
            body()
        }
        timer.start(afterMillis: 0)
    }
}

/// A FIFO on an array and a head index (what ``BackendSender`` queues while every slot is busy): taking the first is
/// O(1), and the storage of what was taken is reclaimed once the queue is empty, or once the taken head is past
/// half of the storage (and past `compactAfter`, so a short queue is not shifted at every turn): a backend that
/// keeps the queue from ever emptying never makes it grow beyond twice what waits.
struct BackendQueue<Element> {
    private var storage: [Element] = []
    private var head = 0
    /// The taken head is compacted away only past this many.
    let compactAfter: Int

    init(compactAfter: Int = 4096) { self.compactAfter = compactAfter }

    /// Waiting.
    var count: Int { storage.count - head }
    var isEmpty: Bool { head == storage.count }
    /// Elements held: the waiting and the taken not reclaimed yet (at most twice `count`, or `compactAfter` + 1).
    var storageCount: Int { storage.count }

    mutating func append(_ element: Element) { storage.append(element) }

    /// The oldest waiting, taken; nil when none waits.
    mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let first = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head > compactAfter && head * 2 > storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return first
    }

    /// Empties the queue, each waiting element to `body` in order; returns how many waited.
    @discardableResult
    mutating func removeAll(_ body: (Element) -> Void) -> Int {
        for i in head..<storage.count { body(storage[i]) }
        return removeAll()
    }

    /// Empties the queue; returns how many waited.
    @discardableResult
    mutating func removeAll() -> Int {
        let waiting = count
        storage.removeAll()
        head = 0
        return waiting
    }
}
