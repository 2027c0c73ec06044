import FanoutCore

/// The artificial per-delivery cost (`costNanosPerDelivery`): a scenario of known capacity.
extension WorkerEngine {
    /// An event's fan-out begins. The cost models the worker as a server taking n × cost for an event
    /// of n deliveries (its own work inside that time when shorter), so a worker applies at most
    /// 1e9 / cost deliveries per second.
    ///
    /// Real time: the event starts at max(its due time, the end of the previous one) and its
    /// deliveries spin on the monotonic clock until the time they have paid for; a thread that was
    /// descheduled past that time does not spin again until it has caught up, so a busy machine does
    /// not lower the capacity (as long as the real work fits in the cost). Virtual time: nothing spins;
    /// a delivery takes max(the model's apply, the cost) (`applyStep`).
    @inline(__always)
    func startCost(_ event: SourceEvent) {
        guard costNanos > 0, !virtual else { return }
        costDeadline = max(costDeadline, realStart &+ event.intendedNanos)
    }

    /// One delivery's artificial cost (see `startCost`).
    @inline(__always)
    func payCost() {
        guard costNanos > 0 else { return }
        costDeadline &+= costNanos
        while hrtime() < costDeadline {}
    }
}
