import Testing
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

/// `EventLoop.hrtimeNanos` reads `CLOCK_MONOTONIC` itself (libuv's `uv_hrtime` reads the same clock, through a layer
/// that cost instructions on every served request). Through UVLoop's API only: libuv is called from UVLoop alone.
@Suite("UVLoop hrtimeNanos")
struct HrtimeTests {
    static func monotonic() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    @Test("read between two CLOCK_MONOTONIC readings, in nanoseconds")
    func monotonicNanoseconds() {
        for _ in 0..<100 {
            let before = Self.monotonic()
            let ours = EventLoop.hrtimeNanos
            let after = Self.monotonic()
            #expect(before <= ours && ours <= after)
        }
    }

    @Test("the loop's clock (uv_now after uv_update_time) is the same clock in milliseconds")
    func sameOriginAsTheLoop() throws {
        let loop = try EventLoop()
        for _ in 0..<100 {
            let before = EventLoop.hrtimeNanos / 1_000_000
            loop.updateTime()
            let loopMillis = loop.nowMillis
            let after = EventLoop.hrtimeNanos / 1_000_000
            // libuv refreshes the loop's time from CLOCK_MONOTONIC_COARSE when that clock ticks at least every
            // millisecond: it may trail the precise clock by one tick, never lead it.
            #expect(loopMillis <= after && loopMillis + 2 >= before, "\(before) \(loopMillis) \(after)")
        }
        try loop.close()
    }
}
