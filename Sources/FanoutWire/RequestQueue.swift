/// A connection's requests waiting for a stream, first in first out, held in a buffer of its own and moved in and
/// out through pointers: no Optional around a request. An `[H2ClientRequest?]` with a head index (what it
/// replaced) destroyed an Optional request per `take()` and per slot left behind, and Swift did that through the
/// runtime's generic value witnesses, about 160 instructions each (`scripts/callgrind-push.sh`). Confined to its
/// connection's loop thread.
final class RequestQueue {
    private var buffer: UnsafeMutablePointer<H2ClientRequest>
    private var capacity: Int
    /// The ring: `count` requests from `head` on (wrapping at `capacity`).
    private var head = 0
    private(set) var count = 0

    init(capacity: Int = 16) {
        self.capacity = max(1, capacity)
        buffer = .allocate(capacity: self.capacity)
    }

    deinit {
        removeAll { _ in }
        buffer.deallocate()
    }

    var isEmpty: Bool { count == 0 }

    /// The first request's hand-over instant (nil: empty).
    var firstHandedNanos: UInt64? { count == 0 ? nil : buffer[head].handedNanos }

    func append(_ request: consuming H2ClientRequest) {
        if count == capacity { grow() }
        (buffer + (head + count) % capacity).initialize(to: request)
        count += 1
    }

    /// The first request, moved out (the queue must not be empty).
    func removeFirst() -> H2ClientRequest {
        precondition(count > 0, "removeFirst on an empty request queue")
        let request = (buffer + head).move()
        head = head + 1 == capacity ? 0 : head + 1
        count -= 1
        if count == 0 { head = 0 }
        return request
    }

    /// Moves every request out, in order, into `body`; the queue is empty after (and shrinks back when it had grown
    /// past 4,096, as the array did).
    func removeAll(_ body: (H2ClientRequest) -> Void) {
        while count > 0 { body(removeFirst()) }
        if capacity > 4096 {
            buffer.deallocate()
            capacity = 16
            buffer = .allocate(capacity: capacity)
        }
    }

    private func grow() {
        let larger = capacity * 2
        let moved = UnsafeMutablePointer<H2ClientRequest>.allocate(capacity: larger)
        let firstPart = min(count, capacity - head)
        moved.moveInitialize(from: buffer + head, count: firstPart)
        (moved + firstPart).moveInitialize(from: buffer, count: count - firstPart)
        buffer.deallocate()
        buffer = moved
        capacity = larger
        head = 0
    }
}
