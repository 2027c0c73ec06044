/// The latency metrics of `fanout serve`, in report order.
public enum ServeMetric: Int, CaseIterable, Sendable {
    case service, delivery, fanout, validate, route
    /// Only with `--expect-events` (left out of the report files without it).
    case endToEnd

    /// What the metric measures (summary.md, the .hgrm headers).
    public var about: String {
        switch self {
        case .service: "request complete (END_STREAM received) → response submitted"
        case .delivery: "request arrival → applied on the device, per delivery"
        case .fanout: "broadcast arrival → its last subscriber applied"
        case .validate: "stage: headers and payload checked (accepted pushes)"
        case .route: "stage: recipients found (accepted pushes)"
        case .endToEnd: "event's intended time (t0 + offset) → applied on the device, per correlated delivery"
        }
    }

    public var name: String {
        switch self {
        case .service: "service"
        case .delivery: "delivery"
        case .fanout: "fanout"
        case .validate: "validate"
        case .route: "route"
        case .endToEnd: "endToEnd"
        }
    }
}

extension LatencyRecorder {
    /// The histogram of one of `fanout serve`'s metrics.
    public subscript(serve metric: ServeMetric) -> LatencyHistogram { self[metricIndex: metric.rawValue] }

    /// Histograms of `fanout serve`'s metrics.
    public static func serve() -> LatencyRecorder { LatencyRecorder(metricCount: ServeMetric.allCases.count) }
}
