/// Little's law, L = X·W, checked on one step's source events.
///
/// What is compared, over a window [a, b) of the run (the measured part of a step, after warm-up
/// and up to the scheduled end):
/// - **L**, events in flight: the time average over the window of the number of source events
///   that are due (intended time passed) and whose last recipient is not yet applied, computed
///   exactly by summing each event's [intended, completed) interval clipped to the window;
/// - **X**, throughput: events whose last recipient was applied inside the window, per second;
/// - **W**, mean latency: the mean fan-out completion time (last recipient − intended time) of the
///   events due inside the window.
///
/// Little's law holds for any stable system, so X·W should be L up to edge effects (events that
/// straddle a or b, about W/(b − a) of L). A larger gap means the three measurements disagree: a
/// lost completion, a clock error, or a window too short for the latency (the harness falling
/// behind shows up as a high W, not as a gap). Only events with at least one recipient count.
public struct LittleCheck: Sendable, Equatable {
    public var windowStartNanos: UInt64
    public var windowEndNanos: UInt64
    public var events: Int
    public var inFlight: Double
    public var throughputPerSecond: Double
    public var meanLatencySeconds: Double

    /// X·W.
    public var predictedInFlight: Double { throughputPerSecond * meanLatencySeconds }

    /// |L − X·W| / max(L, X·W); 0 when both are 0.
    public var relativeDifference: Double {
        let m = max(inFlight, predictedInFlight)
        return m > 0 ? abs(inFlight - predictedInFlight) / m : 0
    }

    /// Within 10%, or too little in flight to judge (L and X·W both under 0.05 events: an idle system,
    /// where one straddling event is the whole difference).
    public var holds: Bool { relativeDifference <= 0.10 || max(inFlight, predictedInFlight) < 0.05 }

    /// `intended[i]` and `completed[i]` in nanoseconds since the run start; `completed[i] == 0` or
    /// `recipients[i] == 0`: the event reached nobody and is left out.
    public static func compute(
        intended: [UInt64], completed: [UInt64], recipients: [Int32], windowStartNanos a: UInt64,
        windowEndNanos b: UInt64
    ) -> LittleCheck {
        precondition(b > a)
        var area = 0.0
        var departures = 0
        var arrivals = 0
        var latencySum = 0.0
        for i in intended.indices where recipients[i] > 0 && completed[i] > 0 {
            let start = intended[i]
            let end = max(completed[i], start)
            let lo = max(start, a)
            let hi = min(end, b)
            if hi > lo { area += Double(hi - lo) }
            if end >= a && end < b { departures += 1 }
            if start >= a && start < b {
                arrivals += 1
                latencySum += Double(end - start)
            }
        }
        let seconds = Double(b - a) / 1e9
        return LittleCheck(
            windowStartNanos: a, windowEndNanos: b, events: arrivals, inFlight: area / Double(b - a),
            throughputPerSecond: Double(departures) / seconds,
            meanLatencySeconds: arrivals > 0 ? latencySum / Double(arrivals) / 1e9 : 0)
    }
}
