/// The service times of virtual time: a worker is a single server that spends these on each stage, so a
/// virtual-time run is a pure function of its scenario and seed (nothing reads the wall clock) and its
/// latencies repeat bit for bit on every machine. `fanout calibrate` measures them on a machine (the
/// defaults were measured on the 2-core reference machine, see docs/SCENARIOS.md).
///
/// Per event: encode (`encodeNanos`), once, by the backend, before the push is sent (the event's
/// intended time is when it is sent, so encode is not on the delivery's path). Per push: validate
/// (`validateNanos`: the scan of headers and payload) and route (`routeNanos`: the token or channel
/// lookup). Per push that reaches a device: the device-side decode of its content (`decodeNanos`), once
/// (a broadcast's recipients share it). Per recipient: apply (`applyNanos`). The `apply` histogram holds
/// decode + apply for a push's first recipient and apply for the others, as real time measures it. A held
/// push delivered when its device returns is validated, decoded and applied again.
public struct CostModel: Sendable, Equatable {
    public var encodeNanos: Int
    public var validateNanos: Int
    public var routeNanos: Int
    public var decodeNanos: Int
    public var applyNanos: Int

    public init(encodeNanos: Int, validateNanos: Int, routeNanos: Int, decodeNanos: Int, applyNanos: Int) {
        self.encodeNanos = encodeNanos
        self.validateNanos = validateNanos
        self.routeNanos = routeNanos
        self.decodeNanos = decodeNanos
        self.applyNanos = applyNanos
    }

    /// Measured with `fanout calibrate default` on the 2-core reference machine (see docs/SCENARIOS.md).
    public static let defaults = CostModel(
        encodeNanos: 600, validateNanos: 250, routeNanos: 220, decodeNanos: 265, applyNanos: 60)

    public static let fieldNames = ["encodeNanos", "validateNanos", "routeNanos", "decodeNanos", "applyNanos"]

    public var values: [Int] { [encodeNanos, validateNanos, routeNanos, decodeNanos, applyNanos] }

    public init(values v: [Int]) {
        self.init(encodeNanos: v[0], validateNanos: v[1], routeNanos: v[2], decodeNanos: v[3], applyNanos: v[4])
    }

    /// The model as the scenario's `costModel` object (one line).
    public var jsonText: String {
        "{" + zip(CostModel.fieldNames, values).map { "\"\($0)\": \($1)" }.joined(separator: ", ") + "}"
    }
}
