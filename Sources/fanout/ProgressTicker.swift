import Foundation
import UVLoop

/// A progress line on stderr for a long phase (building the population, writing a large file): once a second from
/// the phase's first second on, so a phase shorter than a second prints nothing. The line comes from `line`, given
/// the seconds since the start, on the ticker's own thread.
final class ProgressTicker: @unchecked Sendable {
    // @unchecked: the semaphores are thread-safe; nothing else is shared.
    private let stop = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)

    init(_ line: @escaping @Sendable (Double) -> String) {
        let start = EventLoop.hrtimeNanos
        let (stop, stopped) = (self.stop, self.stopped)
        let thread = Thread {
            while stop.wait(timeout: .now() + .seconds(1)) == .timedOut {
                let text = line(Double(EventLoop.hrtimeNanos &- start) / 1e9)
                FileHandle.standardError.write(Data(("fanout serve: " + text + "\n").utf8))
            }
            stopped.signal()
        }
        thread.name = "fanout-progress"
        thread.start()
    }

    /// Stops the line (returns once the ticker's thread has printed its last).
    func finish() {
        stop.signal()
        stopped.wait()
    }
}
