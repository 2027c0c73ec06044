import FanoutCore
import FanoutMetrics
import FanoutSim
import FanoutWire
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Every sample recorded once, into the run's histograms and the current second's.
extension APNsService {


    @inline(__always)
    func record(_ metric: ServeMetric, _ nanos: UInt64) {
        stats[metric].record(nanos)
        current[metric.rawValue].record(nanos)
    }

    /// Ends second `index` of the run: its histograms are kept encoded (a few hundred bytes each).
    public func closeInterval(_ index: Int) {
        let requests = stats.requests - currentRequests
        currentRequests = stats.requests
        intervals.append(
            ServeInterval(
                index: index, requests: requests,
                encoded: current.map { $0.isEmpty ? [] : $0.encodedCompressed() }))
        for k in current.indices where !current[k].isEmpty { current[k].reset() }
    }

    /// One request's service time: headers complete → response submitted.
    public func recordService(_ nanos: UInt64) {
        record(.service, nanos)
    }
}

/// The latency metrics of `fanout serve`, in report order.
public enum ServeMetric: Int, CaseIterable, Sendable {
    case service, delivery, fanout, validate, route

    /// What the metric measures (summary.md, the .hgrm headers).
    public var about: String {
        switch self {
        case .service: "request headers complete → response submitted"
        case .delivery: "request arrival → applied on the device, per delivery"
        case .fanout: "broadcast arrival → its last subscriber applied"
        case .validate: "stage: headers and payload checked (accepted pushes)"
        case .route: "stage: recipients found (accepted pushes)"
        }
    }

    public var name: String {
        switch self {
        case .service: "service"
        case .delivery: "delivery"
        case .fanout: "fanout"
        case .validate: "validate"
        case .route: "route"
        }
    }
}

/// One second of one worker: requests answered and each metric's histogram (compressed V2 encoding, empty
/// when no value was recorded).
public struct ServeInterval: Sendable {
    public var index: Int
    public var requests: Int
    public var encoded: [[UInt8]]
}
