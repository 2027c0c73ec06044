import FanoutCore
@testable import FanoutAPNs
@testable import FanoutServe
import FanoutMetrics
import Foundation
import Testing

/// `--faults`' retry matching (docs/INGEST.md §3, *Retries*): a refused push is known again by its `apns-id` or by its
/// token and `aps.timestamp`.
extension ServeFaultsTests {
    @Test("retries: a refused push coming back (same apns-id, or same token and aps.timestamp) is matched and timed")
    func retries() throws {
        let h = try Harness { try ServeFaults.parseFaults("503=100%", into: &$0.faults) }
        defer { try? h.serve.close() }
        let a = "11111111-2222-4333-8444-555555555555"
        let b = "aaaaaaaa-2222-4333-8444-555555555555"
        let c = "cccccccc-2222-4333-8444-555555555555"
        let d = "dddddddd-2222-4333-8444-555555555555"
        /// The test payload with aps.timestamp 1800000000 + n.
        func stamped(_ n: Int) -> [UInt8] {
            Array(String(decoding: M.payload, as: UTF8.self).replacingOccurrences(
                of: "1800000001", with: "\(1_800_000_000 + n)").utf8)
        }
        let notJSON = Array("not json".utf8)
        h.serve.advance(toNanos: 1_000 * Self.ms)
        h.send(Self.push(h.token, stream: 1, apnsId: a, body: stamped(1)))
        h.send(Self.push(h.token, stream: 3, body: stamped(2)))  // no apns-id: known by token and aps.timestamp
        h.send(Self.push(h.token, stream: 5, apnsId: b, body: stamped(3)))
        h.send(Self.push(h.token, stream: 7, body: notJSON))  // neither key: untracked
        h.send(Self.push(h.token, stream: 9, apnsId: d, body: notJSON))  // known by its apns-id only
        h.serve.advance(toNanos: 3_000 * Self.ms)
        h.send(Self.push(h.token, stream: 11, apnsId: a, body: stamped(1)))  // back after 2 s (and refused again)
        h.serve.advance(toNanos: 3_500 * Self.ms)
        h.send(Self.push(h.token, stream: 13, body: stamped(2)))  // back after 2.5 s
        h.send(Self.push(h.token, stream: 15, apnsId: c, body: stamped(3)))  // a fresh apns-id, the same update: back
        h.send(Self.push(h.token, stream: 17, apnsId: d, body: notJSON))  // back by its apns-id
        h.send(Self.push(h.token, stream: 19, body: stamped(4)))  // another timestamp: a new push, not a retry
        let r = h.server.retries.final
        #expect(r.refused == [10, 0, 0, 0] && r.retried == [4, 0, 0, 0], "\(r)")
        #expect(r.neverRetried == [5, 0, 0, 0] && r.untracked == 1, "\(r)")
        // The five never back, kept for the events judge: the token and each one's aps.timestamp (none for d's).
        #expect(r.unresent.count == 5 && r.unresent.allSatisfy { !$0.broadcast && $0.kind == 0 })
        #expect(r.unresent.allSatisfy { $0.target == Array(h.token.utf8) })
        let stamps = r.unresent.map { $0.timestamp ?? 0 }.sorted()
        #expect(stamps == [0, 1_800_000_001, 1_800_000_002, 1_800_000_003, 1_800_000_004])
        #expect(r.identityHolds)
        #expect(r.delayNanos.totalCount == 4)
        #expect(r.delayNanos.min >= 1_998 * Self.ms && r.delayNanos.max <= 2_502 * Self.ms, "\(r.delayNanos.max)")
        var small = RetryTracker(capacity: 1)
        small.refused(RetryKeys(content: 1), kind: 3, nowNanos: 0)
        small.refused(RetryKeys(content: 2), kind: 3, nowNanos: 0)  // over the bound
        small.arrived(RetryKeys(content: 2), nowNanos: 4)  // not remembered: not matched
        small.arrived(RetryKeys(content: 1), nowNanos: 5)  // back, refused again
        small.refused(RetryKeys(content: 1), kind: 3, nowNanos: 5)
        let s = small.final
        #expect(s.untracked == 1 && s.retried == [0, 0, 0, 1] && s.neverRetried == [0, 0, 0, 1] && s.identityHolds)
    }

    @Test("retry keys: an apns-id finds the update it was refused with; the alias goes with the entry")
    func retryAliases() {
        var t = RetryTracker()
        t.refused(RetryKeys(id: 10, content: 20), kind: 0, nowNanos: 0)
        t.arrived(RetryKeys(id: 10, content: 21), nowNanos: 1)  // its apns-id, another update's content: back
        t.refused(RetryKeys(id: 11, content: 22), kind: 1, nowNanos: 1)
        t.arrived(RetryKeys(id: 12, content: 22), nowNanos: 2)  // a fresh apns-id, its content: back
        t.arrived(RetryKeys(id: 11), nowNanos: 3)  // its old apns-id again: already back, nothing waits
        t.arrived(RetryKeys(id: 10), nowNanos: 3)
        let r = t.final
        #expect(r.refused == [1, 1, 0, 0] && r.retried == [1, 1, 0, 0] && r.neverRetried == [0, 0, 0, 0], "\(r)")
        #expect(r.identityHolds && r.unresent.isEmpty)
    }
}
