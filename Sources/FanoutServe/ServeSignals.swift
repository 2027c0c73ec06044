import FanoutCore
import Foundation
import UVLoop

/// SIGINT and SIGTERM for a whole `fanout serve` session: one thread whose loop watches them from the session's
/// first step to its last, so that a signal is never lost between phases and never meets the default action
/// (which ends the process without its folder). Each phase subscribes what ends it — the build's stop flag, a
/// ``Wakeup`` of the registrar's or a serving loop — and a phase that subscribes after a signal came is told at
/// once: subscribing and a signal's arrival are ordered by one lock, so none falls between them.
///
/// Why not a watcher per phase: libuv restores the default action when a process's last watcher of a signal
/// closes, and a watcher only hears what comes after it starts. A phase whose watchers started a moment after a
/// signal (the registrar, while it counted population.jsonl's lines) ignored it, and `fanout serve --register`
/// went on registering for minutes after Ctrl-C.
///
/// Lifecycle: ``init()`` starts the thread and returns once the watchers are in place; ``stop()`` closes them and
/// the loop (`uv_loop_close` returns 0) and joins the thread. Subscribers run on the signal thread: they only
/// set a flag or send a wakeup.
public final class ServeSignals: @unchecked Sendable {
    // @unchecked: `caught`, `subscribers` and `nextToken` are touched only under `lock`; `stopSender` is written
    // before init returns (after the thread's `ready`) and is Sendable itself.
    private let lock = Lock()
    private var caught: Int32?
    private var subscribers: [Int: @Sendable () -> Void] = [:]
    private var nextToken = 0
    private var stopSender: Wakeup.Sender?
    private let ended = DispatchSemaphore(value: 0)

    /// Why the signal thread could not start (no loop, no watcher).
    public struct StartFailure: Error, CustomStringConvertible {
        public var description: String
    }

    private final class Start: @unchecked Sendable {
        // @unchecked: written by the signal thread before it signals `ready`, read by init after the wait.
        var sender: Wakeup.Sender?
        var failure: String?
    }

    public init() throws(StartFailure) {
        let ready = DispatchSemaphore(value: 0)
        let start = Start()
        let thread = Thread { [self] in
            defer { ended.signal() }
            do {
                let loop = try EventLoop()
                var watchers: [SignalWatcher] = []
                do {
                    for signal in [SIGINT, SIGTERM] {
                        watchers.append(try SignalWatcher(loop: loop, signal: signal) { [self] _, signal in
                            fired(signal)
                        })
                    }
                    let stop = try Wakeup(loop: loop) { wakeup in
                        for watcher in watchers { watcher.close() }
                        wakeup.close()
                    }
                    start.sender = stop.sender
                } catch {
                    for watcher in watchers { watcher.close() }
                    try? loop.close()
                    throw error
                }
                ready.signal()
                loop.run()
                try loop.close()
            } catch {
                start.failure = "\(error)"
                ready.signal()
            }
        }
        thread.name = "fanout-signals"
        thread.start()
        ready.wait()
        if let failure = start.failure {
            ended.wait()
            throw StartFailure(description: "cannot watch SIGINT and SIGTERM: \(failure)")
        }
        stopSender = start.sender
    }

    /// The first signal that came (SIGINT or SIGTERM); nil: none yet.
    public var signal: Int32? { lock.withLock { caught } }

    /// Runs `body` (on the signal thread) at every signal from now on, or at once (on the calling thread) if one
    /// came already; returns the token that ``unsubscribe(_:)`` takes.
    @discardableResult
    public func subscribe(_ body: @escaping @Sendable () -> Void) -> Int {
        let (token, already) = lock.withLock {
            nextToken += 1
            subscribers[nextToken] = body
            return (nextToken, caught != nil)
        }
        if already { body() }
        return token
    }

    /// `body` no longer runs (it may be running now, on the signal thread, when this returns).
    public func unsubscribe(_ token: Int) {
        lock.withLock { _ = subscribers.removeValue(forKey: token) }
    }

    /// Closes the watchers and the loop and joins the thread (a second call does nothing). From then on the
    /// signals have their default action again, unless the caller catches them.
    public func stop() {
        guard let sender = lock.withLock({ () -> Wakeup.Sender? in
            defer { stopSender = nil }
            return stopSender
        }) else { return }
        sender.send()
        ended.wait()
    }

    private func fired(_ signal: Int32) {
        let told = lock.withLock {
            if caught == nil { caught = signal }
            return Array(subscribers.values)
        }
        for body in told { body() }
    }
}
