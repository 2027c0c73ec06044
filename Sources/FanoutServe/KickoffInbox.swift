import FanoutAPNs
import FanoutCore
import UVLoop

/// Kickoff's registrations (`faults.kickoff`, docs/INGEST.md §5, *Kickoff*), handed by the serving loops to the
/// trigger's loop: each loop posts an activity's registration when a push-to-start started it (`post`, under a
/// mutex, then a wakeup of the trigger's loop, which takes them all at once). Posts after the trigger's loop stopped
/// taking them (serving ended) are counted in `untaken`: started, not registered when serving stopped.
public final class KickoffInbox: @unchecked Sendable {
    // @unchecked: every field is touched only under `lock`.
    private let lock = Lock()
    private var items: [KickoffRegistration] = []
    private var wakeup: Wakeup.Sender?
    private var closed = false
    private var untakenCount = 0

    public init() {}

    /// A serving loop's registration to send (any thread).
    public func post(_ registration: KickoffRegistration) {
        let wakeup = lock.withLock { () -> Wakeup.Sender? in
            guard !closed else {
                untakenCount += 1
                return nil
            }
            items.append(registration)
            return self.wakeup
        }
        _ = wakeup?.send()
    }

    /// The trigger's loop takes posts from now on, woken by `wakeup` (the trigger's thread).
    func attach(_ wakeup: Wakeup.Sender) { lock.withLock { self.wakeup = wakeup } }

    /// Everything posted since the last take (the trigger's thread).
    func take() -> [KickoffRegistration] {
        lock.withLock {
            let taken = items
            items.removeAll()
            return taken
        }
    }

    /// Nothing is taken any more: what waits, and every later post, is counted untaken.
    func close() {
        lock.withLock {
            closed = true
            untakenCount += items.count
            items.removeAll()
            wakeup = nil
        }
    }

    /// Registrations posted but never taken by the trigger's loop (serving had stopped).
    public var untaken: Int { lock.withLock { untakenCount } }
}

/// The posted lines' due instants, earliest first (a binary min-heap of (due, line number)).
struct DueHeap {
    private var items: [(due: UInt64, index: Int32)] = []

    var count: Int { items.count }
    var first: (due: UInt64, index: Int32)? { items.first }

    mutating func push(_ due: UInt64, _ index: Int32) {
        items.append((due, index))
        var c = items.count - 1
        while c > 0 {
            let p = (c - 1) / 2
            guard Self.before(items[c], items[p]) else { break }
            items.swapAt(c, p)
            c = p
        }
    }

    mutating func pop() -> (due: UInt64, index: Int32)? {
        guard !items.isEmpty else { return nil }
        let top = items[0]
        let last = items.removeLast()
        guard !items.isEmpty else { return top }
        items[0] = last
        var p = 0
        while true {
            let l = 2 * p + 1
            let r = l + 1
            var m = p
            if l < items.count, Self.before(items[l], items[m]) { m = l }
            if r < items.count, Self.before(items[r], items[m]) { m = r }
            guard m != p else { break }
            items.swapAt(p, m)
            p = m
        }
        return top
    }

    mutating func removeAll() { items.removeAll() }

    /// Due order; the earlier posted first on a tie (a run repeats).
    private static func before(_ a: (due: UInt64, index: Int32), _ b: (due: UInt64, index: Int32)) -> Bool {
        (a.due, a.index) < (b.due, b.index)
    }
}
