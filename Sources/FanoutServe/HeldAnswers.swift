import FanoutAPNs
import FanoutWire

/// Answers held until their due time (`--latency`, stalls), earliest first: a binary min-heap on (due time,
/// arrival order), so answers due at the same time leave in the order they were held. One per event loop;
/// one uv timer is armed for the head. Confined to its loop's thread.
struct HeldAnswers {
    struct Entry {
        var dueNanos: UInt64
        var order: UInt64
        var connection: H2ServerConnection
        var request: H2Request
        var response: APNsAnswer
        /// Whether its service time is recorded when it is sent.
        var record: Bool

        @inline(__always)
        func before(_ o: Entry) -> Bool { dueNanos != o.dueNanos ? dueNanos < o.dueNanos : order < o.order }
    }

    private(set) var entries: [Entry] = []
    private var nextOrder: UInt64 = 0

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }
    /// The earliest due time, if any. O(1).
    var earliestDueNanos: UInt64? { entries.first?.dueNanos }

    /// Holds an answer until `dueNanos`. O(log n).
    mutating func push(
        dueNanos: UInt64, connection: H2ServerConnection, request: H2Request, response: APNsAnswer, record: Bool
    ) {
        nextOrder += 1
        entries.append(
            Entry(
                dueNanos: dueNanos, order: nextOrder, connection: connection, request: request, response: response,
                record: record))
        var i = entries.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard entries[i].before(entries[parent]) else { break }
            entries.swapAt(i, parent)
            i = parent
        }
    }

    /// Removes and returns the earliest entry if it is due by `nowNanos`. O(log n).
    mutating func popDue(nowNanos: UInt64) -> Entry? {
        guard let first = entries.first, first.dueNanos <= nowNanos else { return nil }
        let last = entries.removeLast()
        guard !entries.isEmpty else { return first }
        entries[0] = last
        siftDown(0)
        return first
    }

    /// Removes every entry `drop` selects; returns how many. O(n).
    mutating func removeAll(where drop: (Entry) -> Bool) -> Int {
        let before = entries.count
        entries.removeAll(where: drop)
        if entries.count != before {
            var i = entries.count / 2
            while i > 0 {
                i -= 1
                siftDown(i)
            }
        }
        return before - entries.count
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        let n = entries.count
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < n && entries[l].before(entries[m]) { m = l }
            if r < n && entries[r].before(entries[m]) { m = r }
            if m == i { return }
            entries.swapAt(i, m)
            i = m
        }
    }
}
