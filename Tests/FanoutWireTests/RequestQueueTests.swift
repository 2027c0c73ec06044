import FanoutCore
import Testing

@testable import FanoutWire

@Suite("RequestQueue (a connection's waiting requests)")
struct RequestQueueTests {
    static let content = H2RequestContent(headers: HeaderList(), body: [1, 2, 3])

    static func request(_ tag: Int) -> H2ClientRequest {
        var r = H2ClientRequest(path: Array("/3/device/\(tag)".utf8), content: content, tag: tag)
        r.handedNanos = UInt64(100 + tag)
        return r
    }

    @Test("first in, first out across the ring's wrap and its growth; the first hand-over is the head's")
    func fifoAcrossWrapAndGrowth() {
        let queue = RequestQueue(capacity: 4)
        var next = 0
        var expected = 0
        // Interleaved: the head walks around the ring, then appends outrun removals and force growth.
        for round in 0..<50 {
            for _ in 0..<(round % 7 + 1) {
                queue.append(Self.request(next))
                next += 1
            }
            for _ in 0..<(round % 5) where !queue.isEmpty {
                #expect(queue.firstHandedNanos == UInt64(100 + expected))
                let r = queue.removeFirst()
                #expect(r.tag == expected && r.path == Array("/3/device/\(expected)".utf8))
                expected += 1
            }
        }
        #expect(queue.count == next - expected)
        var rest: [Int] = []
        queue.removeAll { rest.append($0.tag) }
        #expect(rest == Array(expected..<next))
        #expect(queue.isEmpty && queue.firstHandedNanos == nil)
    }

    @Test("requests left in the queue are released with it (their content is not leaked)")
    func releasesWhatItHolds() {
        weak var held: H2RequestContent?
        do {
            let content = H2RequestContent(headers: HeaderList(), body: [9])
            held = content
            let queue = RequestQueue(capacity: 2)
            for tag in 0..<5 { queue.append(H2ClientRequest(path: [1], content: content, tag: tag)) }
            _ = queue.removeFirst()
        }
        #expect(held == nil)
    }
}
