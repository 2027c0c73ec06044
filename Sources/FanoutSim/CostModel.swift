/// The service times of virtual time: a worker is a single server that spends these on each stage, so a
/// virtual-time run is a pure function of its scenario and seed (nothing reads the wall clock) and its
/// latencies repeat bit for bit on every machine. The defaults were measured on the reference machine
/// (`fanout calibrate default`, see docs/SCENARIOS.md); `fanout calibrate` measures another machine's.
///
/// Per event: encode (`encodeNanos` + `encodeNanosPerKiB` × payload KiB), once, by the backend, before
/// the push is sent. Per push: validate (`validateNanos` + `validateNanosPerKiB` × payload KiB: the scan
/// and the device-side decode) and route (`routeNanos`: the token or channel lookup). Per recipient:
/// apply (`applyNanos`). A held push delivered when its device returns is validated again and applied.
public struct CostModel: Sendable, Equatable {
    public var encodeNanos: Int
    public var encodeNanosPerKiB: Int
    public var validateNanos: Int
    public var validateNanosPerKiB: Int
    public var routeNanos: Int
    public var applyNanos: Int

    public init(
        encodeNanos: Int, encodeNanosPerKiB: Int, validateNanos: Int, validateNanosPerKiB: Int, routeNanos: Int,
        applyNanos: Int
    ) {
        self.encodeNanos = encodeNanos
        self.encodeNanosPerKiB = encodeNanosPerKiB
        self.validateNanos = validateNanos
        self.validateNanosPerKiB = validateNanosPerKiB
        self.routeNanos = routeNanos
        self.applyNanos = applyNanos
    }

    /// Measured with `fanout calibrate default` on the 2-core reference machine (see docs/SCENARIOS.md).
    public static let defaults = CostModel(
        encodeNanos: 1500, encodeNanosPerKiB: 2000, validateNanos: 600, validateNanosPerKiB: 1500, routeNanos: 80,
        applyNanos: 60)

    public static let fieldNames = [
        "encodeNanos", "encodeNanosPerKiB", "validateNanos", "validateNanosPerKiB", "routeNanos", "applyNanos",
    ]

    public var values: [Int] {
        [encodeNanos, encodeNanosPerKiB, validateNanos, validateNanosPerKiB, routeNanos, applyNanos]
    }

    @inline(__always)
    public func encodeNanos(bytes: Int) -> UInt64 {
        UInt64(encodeNanos) &+ UInt64(encodeNanosPerKiB) &* UInt64(bytes) / 1024
    }

    @inline(__always)
    public func validateNanos(bytes: Int) -> UInt64 {
        UInt64(validateNanos) &+ UInt64(validateNanosPerKiB) &* UInt64(bytes) / 1024
    }

    /// The model as the scenario's `costModel` object (one line).
    public var jsonText: String {
        "{" + zip(CostModel.fieldNames, values).map { "\"\($0)\": \($1)" }.joined(separator: ", ") + "}"
    }
}
