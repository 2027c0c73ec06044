internal import CLibUV

/// How much of its time a loop spent waiting for events: a load generator whose loop never waits is the limit of
/// its own run (`fanout push` tells its own saturation from a server's back-pressure with it).
extension EventLoop {
    /// Starts counting the time the loop spends waiting in its poll for events (`uv_loop_configure` with
    /// `UV_METRICS_IDLE_TIME`); ``idleNanos`` reads it.
    public func countIdleTime() throws(UVError) {
        preconditionUsable("countIdleTime()")
        _ = try check(CLibUV_loop_count_idle_time(pointer), "uv_loop_configure")
    }

    /// Nanoseconds the loop has waited in its poll for events since ``countIdleTime()`` (`uv_metrics_idle_time`; 0
    /// when not counted). Read it on the loop's thread.
    public var idleNanos: UInt64 {
        preconditionUsable("idleNanos")
        return uv_metrics_idle_time(pointer)
    }
}
