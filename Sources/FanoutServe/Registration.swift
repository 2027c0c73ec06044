import FanoutAPNs
import FanoutMetrics
import FanoutWire
import Foundation
import UVLoop

/// `fanout serve --register URL` (docs/INGEST.md §5): what to send and how.
public struct RegisterOptions: Sendable {
    public var url: String
    public var version = HTTPClient.Version.http1_1
    public var caFile: String?
    /// First attempts started per second (`--register-rate`), open loop.
    public var ratePerSecond = 1000.0
    /// Attempts per activity at most (`--register-attempts`); a failed one is retried after 100 ms, 200 ms, …
    /// (doubling, at most 5 s).
    public var attempts = 3
    /// A request's whole time before it counts as failed (timeout).
    public var timeoutSeconds = 10.0
    /// Registration stops here (`--register-deadline`): what is not registered then is counted, and serving starts.
    public var deadlineSeconds = 600.0
    /// Requests in flight at most.
    public var concurrency = 256
    public init(url: String) { self.url = url }
}

/// What registration did (summary.json `registration`, summary.md): every activity ends registered (a 2xx),
/// failed (every attempt refused, timed out or errored), or unregistered at the deadline.
public struct RegisterResults: Sendable {
    public var url = ""
    public var activities = 0
    public var registered = 0
    public var failed = 0
    /// Not registered when the deadline came (waiting, in flight or not started yet).
    public var unregisteredAtDeadline = 0
    /// Requests sent (first attempts and retries) and retries among them.
    public var requests = 0
    public var retries = 0
    /// Every attempt's answer by status, and the attempts that got none.
    public var byStatus: [Int: Int] = [:]
    public var timeouts = 0
    public var errors: [String: Int] = [:]
    public var elapsedSeconds = 0.0
    /// SIGINT or SIGTERM ended registration (what was not registered counts as unregistered at the deadline).
    public var interrupted = false
    /// Each request, from when it was due (its rate slot or its backoff) to its end.
    public var responseNanos = LatencyHistogram()

    public init() {}

    /// activities = registered + failed + unregistered at the deadline.
    public var identityHolds: Bool { activities == registered + failed + unregisteredAtDeadline }

    /// The stderr line when registration has ended: the counts, and every failed attempt by its status or
    /// libcurl's words (an unreachable backend is named there, in one line).
    public var line: String {
        var text = "fanout serve: registered \(registered) of \(activities) activities (\(failed) failed, "
            + "\(unregisteredAtDeadline) unregistered at the deadline, \(retries) retries) "
            + String(format: "in %.2f s", elapsedSeconds)
        if BackendFailures.count(byStatus: byStatus, timeouts: timeouts, errors: errors) > 0 {
            text += "; failed attempts: " + BackendFailures.text(byStatus: byStatus, timeouts: timeouts, errors: errors)
        }
        if interrupted { text += "; interrupted: serving ends at once" }
        return text
    }
}

/// Registers every activity of population.jsonl with a backend before the scenario's events start: each line (the
/// §5 object) POSTed as it is, first attempts at `ratePerSecond` (open loop), at most `concurrency` in flight, a
/// failure retried with backoff up to `attempts`, until every activity has ended or the deadline. Runs on a loop
/// of its own (``run(populationFile:options:)``), before serving starts.
///
/// Tokens: `fanout serve` rotates the scenario's share of update tokens once, at start, before population.jsonl
/// is written, so each line already carries the token in force; no token rotates while serving, so nothing is
/// registered again later.
public final class Registrar {
    struct Pending {
        var line: [UInt8]
        var attempt: Int
        var dueNanos: UInt64
    }

    let loop: EventLoop
    let options: RegisterOptions
    private let lines: LineFile
    /// Lines taken from the file (first attempts due so far).
    private var nextLine = 0
    private let lineCount: Int
    private let startNanos: UInt64
    private var client: HTTPClient?
    private var timer: UVLoop.Timer?
    private var deadline: UVLoop.Timer?
    private var signals: [SignalWatcher] = []
    /// Due and waiting for a free slot, FIFO.
    private var ready: [Pending] = []
    private var readyHead = 0
    /// Failed attempts waiting for their backoff, one FIFO per attempt number (the same backoff each, so each
    /// queue is in due order).
    private var backoff: [[Pending]]
    private var finished = false
    public private(set) var results = RegisterResults()

    init(loop: EventLoop, lines: LineFile, options: RegisterOptions) throws(HTTPClientError) {
        self.loop = loop
        self.options = options
        self.lines = lines
        lineCount = lines.count
        backoff = Array(repeating: [], count: max(options.attempts, 1) + 1)
        var http = HTTPClient.Options()
        http.version = options.version
        http.caFile = options.caFile
        http.timeoutMillis = max(1, Int((options.timeoutSeconds * 1000).rounded()))
        http.maxBodyBytes = 1024
        http.maxCachedConnections = options.concurrency  // keep a burst's connections for the next one
        client = try HTTPClient(loop: loop, options: http)
        startNanos = EventLoop.hrtimeNanos
        results.url = options.url
        results.activities = lineCount
    }

    /// Registers every line of `populationFile` (population.jsonl) on a loop of its own, to the end or the
    /// deadline; the loop is closed before this returns.
    public static func run(populationFile: String, options: RegisterOptions) throws -> RegisterResults {
        let lines = try LineFile(path: populationFile)
        defer { lines.close() }
        let loop = try EventLoop()
        let registrar: Registrar
        do {
            registrar = try Registrar(loop: loop, lines: lines, options: options)
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
        timer = UVLoop.Timer(loop: loop) { [unowned self] _ in self.tick() }
        let deadline = UVLoop.Timer(loop: loop) { [unowned self] _ in self.deadlinePassed() }
        deadline.start(afterMillis: UInt64((options.deadlineSeconds * 1000).rounded()))
        self.deadline = deadline
        // Ctrl-C or SIGTERM ends registration as its deadline does (then `fanout serve` ends at once).
        for signal in [SIGINT, SIGTERM] {
            if let watcher = try? SignalWatcher(loop: loop, signal: signal, { [unowned self] _, _ in
                self.results.interrupted = true
                self.deadlinePassed()
            }) {
                watcher.isReferenced = false
                signals.append(watcher)
            }
        }
        tick()
    }

    private var inFlight: Int { client?.inFlight ?? 0 }

    /// The first attempt of line k is due at start + k / rate.
    private func firstDue(_ k: Int) -> UInt64 {
        startNanos &+ UInt64((Double(k) / options.ratePerSecond * 1e9).rounded())
    }

    private func tick() {
        guard !finished else { return }
        let now = EventLoop.hrtimeNanos
        while nextLine < lineCount, firstDue(nextLine) <= now {
            ready.append(Pending(line: lines.next() ?? [], attempt: 1, dueNanos: firstDue(nextLine)))
            nextLine += 1
        }
        for a in backoff.indices {
            var taken = 0
            while taken < backoff[a].count, backoff[a][taken].dueNanos <= now {
                ready.append(backoff[a][taken])
                taken += 1
            }
            if taken > 0 { backoff[a].removeFirst(taken) }
        }
        pump()
        finishIfDone()
        guard !finished else { return }
        var next: UInt64 = .max
        if nextLine < lineCount { next = firstDue(nextLine) }
        for queue in backoff { if let first = queue.first { next = min(next, first.dueNanos) } }
        if next != .max {
            let now = EventLoop.hrtimeNanos
            timer?.start(afterMillis: next > now ? (next - now + 999_999) / 1_000_000 : 0)
        }
    }

    private func pump() {
        while readyHead < ready.count, inFlight < options.concurrency, let client {
            let p = ready[readyHead]
            readyHead += 1
            results.requests += 1
            if p.attempt > 1 { results.retries += 1 }
            do {
                try client.post(url: options.url, body: p.line, headers: ["Content-Type: application/json"]) {
                    [unowned self] response in self.completed(response, p)
                }
            } catch {
                results.errors[error.description, default: 0] += 1
                failedAttempt(p)
            }
        }
        if readyHead == ready.count {
            ready.removeAll(keepingCapacity: true)
            readyHead = 0
        }
    }

    private func completed(_ response: HTTPClient.Response, _ p: Pending) {
        let now = EventLoop.hrtimeNanos
        results.responseNanos.record(min(now > p.dueNanos ? now - p.dueNanos : 0, HdrLayout.highestTrackableValue))
        switch response.outcome {
        case .answered:
            results.byStatus[response.status, default: 0] += 1
            if (200..<300).contains(response.status) {
                results.registered += 1
            } else {
                failedAttempt(p)
            }
        case .timedOut:
            results.timeouts += 1
            failedAttempt(p)
        case .failed(let message):
            results.errors[message, default: 0] += 1
            failedAttempt(p)
        case .cancelled:
            results.unregisteredAtDeadline += 1
            return
        }
        guard !finished else { return }
        tick()
    }

    private func failedAttempt(_ p: Pending) {
        guard p.attempt < options.attempts else {
            results.failed += 1
            return
        }
        guard !finished else {  // no retry once registration has ended: not registered then
            results.unregisteredAtDeadline += 1
            return
        }
        let delay = min(UInt64(100_000_000) << UInt64(p.attempt - 1), 5_000_000_000)
        backoff[p.attempt].append(Pending(line: p.line, attempt: p.attempt + 1, dueNanos: EventLoop.hrtimeNanos &+ delay))
    }

    private func finishIfDone() {
        guard !finished, nextLine == lineCount, readyHead == ready.count, inFlight == 0,
            backoff.allSatisfy(\.isEmpty)
        else { return }
        finish()
    }

    /// Every activity not registered yet counts as unregistered at the deadline; what is in flight is cancelled
    /// now (counted the same), so no answer can end after this. (The client closed on the next turn, an answer
    /// read in the same turn as a SIGINT — one epoll batch — was retried into a backoff queue nobody counted:
    /// activities ≠ registered + failed + unregistered, seen once in six Ctrl-Cs amid a storm of 500s.) Never
    /// from inside the client's completion: from the deadline timer or a signal watcher.
    private func deadlinePassed() {
        guard !finished else { return }
        results.unregisteredAtDeadline += (lineCount - nextLine) + (ready.count - readyHead)
            + backoff.reduce(0) { $0 + $1.count }
        nextLine = lineCount
        ready.removeAll()
        readyHead = 0
        for a in backoff.indices { backoff[a].removeAll() }
        finished = true
        client?.close()  // each request in flight completes as cancelled: unregistered at the deadline
        client = nil
        finish()
    }

    private func finish() {
        finished = true
        results.elapsedSeconds = Double(EventLoop.hrtimeNanos &- startNanos) / 1e9
        // Not from inside the client's completion: the next turn of the loop closes everything.
        let closer = UVLoop.Timer(loop: loop) { [unowned self] timer in
            timer.close()
            self.client?.close()  // what is still in flight completes as cancelled (unregistered at the deadline)
            self.client = nil
            self.timer?.close()
            self.timer = nil
            self.deadline?.close()
            self.deadline = nil
            for watcher in self.signals { watcher.close() }
            self.signals.removeAll()
            self.results.elapsedSeconds = Double(EventLoop.hrtimeNanos &- self.startNanos) / 1e9
        }
        closer.start(afterMillis: 0)
    }
}

/// A JSON-lines file read line by line in 1 MiB chunks (population.jsonl can be a gigabyte): its line count first
/// (one pass), then each line once, in order. POSIX reads of a finished file.
final class LineFile {
    let count: Int
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false
    static let chunkBytes = 1 << 20

    init(path: String) throws(HTTPClientError) {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw HTTPClientError("cannot read \(path): \(String(cString: strerror(errno)))") }
        var lines = 0
        var last: UInt8 = UInt8(ascii: "\n")
        var chunk = [UInt8](repeating: 0, count: LineFile.chunkBytes)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                let message = String(cString: strerror(errno))
                Glibc.close(fd)
                throw HTTPClientError("cannot read \(path): \(message)")
            }
            if n == 0 { break }
            for b in chunk[0..<n] where b == UInt8(ascii: "\n") { lines += 1 }
            last = chunk[n - 1]
        }
        count = lines + (last == UInt8(ascii: "\n") ? 0 : 1)
        lseek(fd, 0, SEEK_SET)
        self.fd = fd
    }

    /// The next line without its newline; nil past the end.
    func next() -> [UInt8]? {
        while true {
            if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[start..<newline])
                start = newline + 1
                return line
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                let line = Array(buffer[start...])
                start = buffer.count
                return line
            }
            buffer.removeFirst(start)
            start = 0
            let old = buffer.count
            buffer.append(contentsOf: repeatElement(0, count: LineFile.chunkBytes))
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + old, LineFile.chunkBytes) }
            buffer.removeLast(LineFile.chunkBytes - max(n, 0))
            if n <= 0 { atEnd = true }
        }
    }

    func close() { Glibc.close(fd) }
}
