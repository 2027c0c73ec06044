import FanoutAPNs
import FanoutMetrics
import FanoutTrace
import FanoutWire
import Foundation
import UVLoop

/// `fanout serve --register URL` (docs/INGEST.md §5): what to send and how.
public struct RegisterOptions: BackendTargeted, Sendable {
    /// The backend, its protocol and CAs, a request's whole time before it counts as failed (timeout) and the
    /// requests in flight at most.
    public var target: BackendTarget
    /// First attempts started per second (`--register-rate`), open loop.
    public var ratePerSecond = 1000.0
    /// Attempts per activity at most (`--register-attempts`); a failed one is retried after 100 ms, 200 ms, …
    /// (doubling, at most 5 s).
    public var attempts = 3
    /// Registration stops here (`--register-deadline`): what is not registered then is counted, and serving starts.
    public var deadlineSeconds = 600.0
    public init(url: String) { target = BackendTarget(url: url) }
    public init(urls: [String]) { target = BackendTarget(urls: urls) }
}

/// Registers every activity of population.jsonl with a backend before the scenario's events start: each line (the
/// §5 object) POSTed as it is, first attempts at `ratePerSecond` (open loop), at most `concurrency` in flight (per
/// URL), a failure retried with backoff up to `attempts`, until every activity has ended or the deadline. Runs on a
/// loop of its own (``run(populationFile:options:)``), before serving starts.
///
/// Several URLs (`--register A,B`, instances of one backend sharing their store): round robin by line, line k's
/// first attempt to URL k mod N and each retry to the next URL, so that an instance that fails hands its activities
/// to the others; by line, not by the order requests happen to leave, so a run repeats.
///
/// Tokens: `fanout serve` rotates the scenario's share of update tokens once, at start, before population.jsonl
/// is written, so each line already carries the token in force. With `faults.rotationWhileServing` they rotate while
/// serving instead, and a second registrar (``Lines/timed(_:)``, on the trigger's loop, ``TriggerThread``) sends
/// each rotation's line, with the new token, at its instant: the path an activity started while serving registers
/// on too.
public final class Registrar {
    /// What to register: population.jsonl's lines at the rate, or lines each due at its own instant
    /// (`EventLoop.hrtimeNanos`, in due order).
    enum Lines {
        case file(LineFile)
        case timed([(dueNanos: UInt64, line: [UInt8])])
        /// Lines posted while serving, each due at its own instant (kickoff's registrations: ``KickoffInbox``).
        case posted(KickoffInbox)

        var count: Int {
            switch self {
            case .file(let f): f.count
            case .timed(let list): list.count
            case .posted: 0
            }
        }
    }

    struct Pending {
        /// The line's number in population.jsonl (from 0).
        var index: Int32
        var line: [UInt8]
        var attempt: Int
        var dueNanos: UInt64
    }

    let loop: EventLoop
    let options: RegisterOptions
    private let lines: Lines
    /// Lines taken from the file (first attempts due so far).
    private var nextLine = 0
    private var lineCount: Int
    /// Posted lines (``Lines/posted(_:)``): each one's text (emptied once it ended) and key, the first attempts not
    /// due yet, and the wakeup the inbox rings.
    private var postedLines: [[UInt8]] = []
    private var postedKeys: [UInt64] = []
    private var postedDue = DueHeap()
    private var inboxWakeup: Wakeup?
    private let startNanos: UInt64
    /// First attempts and retries, each released when due (its rate slot or its backoff), to the microsecond.
    private let sender: BackendSender<Pending>
    private var deadline: UVLoop.Timer?
    /// The session's signals (nil: none watched) and this registrar's subscription: a wakeup on this loop.
    private let signals: ServeSignals?
    private var interrupt: Wakeup?
    private var subscription: Int?
    /// Failed attempts waiting for their backoff, one FIFO per attempt number (the same backoff each, so each
    /// queue is in due order).
    private var backoff: [[Pending]]
    private var finished = false
    /// What only the registrar counts (the sender's counts are added in ``results``).
    private var own = RegisterResults()

    init(loop: EventLoop, lines: Lines, options: RegisterOptions, signals: ServeSignals?) throws(HTTPClientError) {
        self.loop = loop
        self.options = options
        self.signals = signals
        self.lines = lines
        lineCount = lines.count
        backoff = Array(repeating: [], count: max(options.attempts, 1) + 1)
        sender = try BackendSender(loop: loop, target: options.target)
        startNanos = EventLoop.hrtimeNanos
        own.url = options.url
        own.activities = lineCount
        own.registeredLines = [Bool](repeating: false, count: lineCount)
    }

    /// What registration did so far.
    public var results: RegisterResults {
        var r = own
        r.requests = sender.sent
        r.counts = sender.counts
        r.byURL = sender.byURL
        return r
    }

    /// Registers every line of `populationFile` (population.jsonl) on a loop of its own, to the end, the
    /// deadline or a signal of `signals` (one that came before this was called included); the loop is closed
    /// before this returns.
    public static func run(
        populationFile: String, options: RegisterOptions, signals: ServeSignals? = nil
    ) throws -> RegisterResults {
        let lines = try LineFile(path: populationFile)
        defer { lines.close() }
        let loop = try EventLoop()
        let registrar: Registrar
        do {
            registrar = try Registrar(loop: loop, lines: .file(lines), options: options, signals: signals)
        } catch {
            try loop.close()
            throw error
        }
        registrar.start()
        loop.run()
        try loop.close()
        return registrar.results
    }

    func start() {
        if case .posted(let inbox) = lines,
            let wakeup = try? Wakeup(loop: loop, { [unowned self] _ in self.absorb() })
        {
            wakeup.isReferenced = false
            inboxWakeup = wakeup
            inbox.attach(wakeup.sender)
            sender.holdsOpen = true
        }
        // Timed lines (while serving) have no deadline of their own: serving's end stops them (``stop()``).
        if case .file = lines {
            let deadline = UVLoop.Timer(loop: loop) { [unowned self] _ in self.deadlinePassed() }
            deadline.start(afterMillis: UInt64((options.deadlineSeconds * 1000).rounded()))
            self.deadline = deadline
        }
        // Ctrl-C or SIGTERM ends registration as its deadline does (then `fanout serve` ends at once); one that came
        // before (while population.jsonl's lines were counted) too: the subscription wakes the loop at once then.
        if let signals, let interrupt = try? Wakeup(loop: loop, { [unowned self] _ in
            self.own.interrupted = true
            self.deadlinePassed()
        }) {
            interrupt.isReferenced = false
            self.interrupt = interrupt
            let sender = interrupt.sender
            subscription = signals.subscribe { sender.send() }
        }
        sender.start(
            release: { [unowned self] now in self.release(now) },
            nextDue: { [unowned self] in self.nextDue() },
            body: { [unowned self] p in
                if p.attempt > 1 { self.own.retries += 1 }
                return p.line
            },
            ended: { [unowned self] p, end in self.ended(p, end) },
            drained: { [unowned self] in self.finish() })
    }

    /// Takes what the serving loops posted: each line due at its own instant.
    private func absorb() {
        guard !finished, case .posted(let inbox) = lines else { return }
        let taken = inbox.take()
        guard !taken.isEmpty else { return }
        for p in taken {
            let index = Int32(postedLines.count)
            postedLines.append(p.line)
            postedKeys.append(UInt64(p.loop) << 32 | UInt64(UInt32(bitPattern: p.index)))
            postedDue.push(p.dueNanos, index)
            own.registeredLines.append(false)
        }
        lineCount += taken.count
        own.activities += taken.count
        sender.wake()
    }

    /// The first attempt of line k is due at start + k / rate (timed lines: at their own instant).
    private func firstDue(_ k: Int) -> UInt64 {
        if case .timed(let list) = lines { return list[k].dueNanos }
        if isPosted { return .max }
        return startNanos &+ UInt64((Double(k) / options.ratePerSecond * 1e9).rounded())
    }

    private var isPosted: Bool {
        if case .posted = lines { return true }
        return false
    }

    /// Line k (the next one taken).
    private func line(_ k: Int) -> [UInt8] {
        switch lines {
        case .file(let f): f.next() ?? []
        case .timed(let list): list[k].line
        case .posted: postedLines[k]
        }
    }

    /// Serving stops (timed lines): what is not registered yet, due or not, is counted unregistered at shutdown.
    func stop() { deadlinePassed() }

    /// First attempts and retries due by `now` go to the sender.
    private func release(_ now: UInt64) {
        while let first = postedDue.first, first.due <= now {
            _ = postedDue.pop()
            let pending = Pending(
                index: first.index, line: postedLines[Int(first.index)], attempt: 1, dueNanos: first.due)
            sender.enqueue(pending, dueNanos: first.due, lane: lane(of: pending))
            nextLine += 1
        }
        while !isPosted, nextLine < lineCount, firstDue(nextLine) <= now {
            let due = firstDue(nextLine)
            let pending = Pending(index: Int32(nextLine), line: line(nextLine), attempt: 1, dueNanos: due)
            sender.enqueue(pending, dueNanos: due, lane: lane(of: pending))
            nextLine += 1
        }
        for a in backoff.indices {
            var taken = 0
            while taken < backoff[a].count, backoff[a][taken].dueNanos <= now {
                let retry = backoff[a][taken]
                sender.enqueue(retry, dueNanos: retry.dueNanos, lane: lane(of: retry))
                taken += 1
            }
            if taken > 0 { backoff[a].removeFirst(taken) }
        }
    }

    /// An attempt's URL: line k's attempt a (from 1) goes to URL (k + a − 1) mod N.
    private func lane(of p: Pending) -> Int {
        let n = options.urls.count
        return n > 1 ? (Int(p.index) + p.attempt - 1) % n : 0
    }

    /// The next first attempt or retry due; nil when every line is out and no retry waits.
    private func nextDue() -> UInt64? {
        var next: UInt64 = .max
        if let first = postedDue.first {
            next = first.due
        } else if !isPosted, nextLine < lineCount {
            next = firstDue(nextLine)
        }
        for queue in backoff { if let first = queue.first { next = min(next, first.dueNanos) } }
        return next == .max ? nil : next
    }

    /// Each request's time from when it was due; a 2xx registers, another answer, a timeout or an error is a
    /// failed attempt (the sender counts them), a cancelled one is unregistered at the deadline.
    private func ended(_ p: Pending, _ end: BackendSender<Pending>.End) {
        if let latency = end.latencyNanos { own.responseNanos.record(latency) }
        switch end.outcome {
        case .answered:
            if (200..<300).contains(end.status) {
                own.registered += 1
                own.registeredLines[Int(p.index)] = true
                if isPosted {
                    own.registeredAtNanos[postedKeys[Int(p.index)]] = EventLoop.hrtimeNanos
                    postedLines[Int(p.index)] = []
                }
            } else {
                failedAttempt(p)
            }
        case .timedOut, .failed: failedAttempt(p)
        case .cancelled: own.unregisteredAtDeadline += 1
        }
    }

    private func failedAttempt(_ p: Pending) {
        guard p.attempt < options.attempts else {
            own.failed += 1
            if isPosted { postedLines[Int(p.index)] = [] }
            return
        }
        guard !finished else {  // no retry once registration has ended: not registered then
            own.unregisteredAtDeadline += 1
            return
        }
        let delay = min(UInt64(100_000_000) << UInt64(p.attempt - 1), 5_000_000_000)
        let retry = Pending(
            index: p.index, line: p.line, attempt: p.attempt + 1, dueNanos: EventLoop.hrtimeNanos &+ delay)
        backoff[p.attempt].append(retry)
    }

    /// Every activity not registered yet counts as unregistered at the deadline; what is in flight is cancelled
    /// now (counted the same), so no answer can end after this. (The client closed on the next turn, an answer
    /// read in the same turn as a SIGINT — one epoll batch — was retried into a backoff queue nobody counted:
    /// activities ≠ registered + failed + unregistered, seen once in six Ctrl-Cs amid a storm of 500s.) Never
    /// from inside the client's completion: from the deadline timer or a signal watcher.
    private func deadlinePassed() {
        guard !finished else { return }
        finished = true
        own.unregisteredAtDeadline += (lineCount - nextLine) + backoff.reduce(0) { $0 + $1.count }
        nextLine = lineCount
        postedDue.removeAll()
        if case .posted(let inbox) = lines { inbox.close() }
        for a in backoff.indices { backoff[a].removeAll() }
        // What waits is dropped; each request in flight completes as cancelled (from inside stop(), into `own`):
        // unregistered at the deadline.
        let dropped = sender.stop()
        own.unregisteredAtDeadline += dropped
        finish()
    }

    /// Registration has ended (every activity, or the deadline): the next turn of the loop closes the deadline
    /// timer and the signals' wakeup (the sender closes its client and timer itself).
    private func finish() {
        finished = true
        own.elapsedSeconds = Double(EventLoop.hrtimeNanos &- startNanos) / 1e9
        BackendSender<Pending>.onNextTurn(loop) { [unowned self] in
            self.deadline?.close()
            self.deadline = nil
            if let subscription = self.subscription { self.signals?.unsubscribe(subscription) }
            self.subscription = nil
            self.interrupt?.close()
            self.interrupt = nil
            self.inboxWakeup?.close()
            self.inboxWakeup = nil
            self.own.elapsedSeconds = Double(EventLoop.hrtimeNanos &- self.startNanos) / 1e9
        }
    }
}

/// A JSON-lines file read line by line in 1 MiB chunks (population.jsonl can be a gigabyte): its line count first
/// (one pass), then each line once, in order. FanoutTrace's ``LineReader`` (the one line reader) does the reading.
final class LineFile {
    let count: Int
    private var reader: LineReader?

    init(path: String) throws(HTTPClientError) {
        do {
            var counting = try LineReader(path: path)
            var lines = 0
            while try counting.nextLine({ _ in }) { lines += 1 }
            count = lines
            reader = try LineReader(path: path)
        } catch let error as FileError {
            throw HTTPClientError("cannot read \(path): \(error.message)")
        } catch {
            throw HTTPClientError("cannot read \(path): \(error)")
        }
    }

    /// The next line without its newline; nil past the end (or once closed, or when the file cannot be read on).
    func next() -> [UInt8]? {
        var line: [UInt8]?
        if reader != nil, (try? reader!.nextLine({ line = Array($0) })) != true { line = nil }
        return line
    }

    /// Closes the file (the reader's descriptor).
    func close() { reader = nil }
}
