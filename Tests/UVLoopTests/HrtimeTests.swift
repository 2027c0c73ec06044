import CLibUV
import Testing
import UVLoop

#if canImport(Glibc)
import Glibc
#endif

@Suite("UVLoop hrtimeNanos")
struct HrtimeTests {
    @Test("read between two uv_hrtime readings and two CLOCK_MONOTONIC readings: libuv's clock, in nanoseconds")
    func sameClockAsLibuv() {
        func monotonic() -> UInt64 {
            var t = timespec()
            clock_gettime(CLOCK_MONOTONIC, &t)
            return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
        }
        for _ in 0..<100 {
            let a = uv_hrtime()
            let b = monotonic()
            let ours = EventLoop.hrtimeNanos
            let c = monotonic()
            let d = uv_hrtime()
            #expect(a <= ours && ours <= d)
            #expect(b <= ours && ours <= c)
        }
    }
}
