import Testing

@testable import FanoutServe

/// The table of requests a worker forwarded and waits on: an answer finds its request once, and an answer for a
/// request whose connection closed is dropped even when its slot was reused for another request meanwhile.
@Suite("Forwarded requests: slots, generations, a closed connection's answers dropped")
struct ForwardedRequestsTests {
    final class Object {}

    @Test("an id finds its request once; a closed connection's id finds nothing, even in a reused slot")
    func generations() {
        var table = ForwardedRequests<Object, Object>()
        let c1 = Object(), c2 = Object()
        let r1 = Object(), r2 = Object(), r3 = Object()
        let a = table.add(c1, r1)
        let b = table.add(c2, r2)
        #expect(table.count == 2 && a != b)
        let found = table.remove(b)
        #expect(found?.connection === c2 && found?.request === r2)
        #expect(table.remove(b) == nil)  // answered once
        table.removeAll(of: c1)  // its connection closed while `a` was out
        #expect(table.isEmpty)
        let c = table.add(c2, r3)  // takes a freed slot, a new generation
        #expect(c != a && c != b)
        #expect(table.remove(a) == nil)  // the closed connection's late answer: dropped, not given to r3
        #expect(table.remove(c)?.request === r3)
        #expect(table.isEmpty && table.remove(12_345) == nil)
    }
}
