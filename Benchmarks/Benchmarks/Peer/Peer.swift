import BenchFixtures
import BenchSupport
import Benchmark
import FanoutCore
import Foundation

// The peer baseline: PeerBackend.swift, with the Core suite's inputs and scaling (1,000 updates per
// iteration, per-update figures scaled). `make bench` divides each peer median by the matching Core
// median (peer.encode / encode, ...).

let benchmarks: @Sendable () -> Void = {

    Benchmark("peer.encode", configuration: PeerConfiguration.perUpdate) { benchmark, workload in
        let cpu = ThreadCPU.nanos()
        for k in benchmark.scaledIterations { blackHole(workload.encode(variant: k)) }
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        PeerWorkload()
    }

    Benchmark("peer.validate", configuration: PeerConfiguration.perUpdate) { benchmark, workload in
        let cpu = ThreadCPU.nanos()
        for k in benchmark.scaledIterations { blackHole(workload.validate(k)) }
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        PeerWorkload()
    }

    Benchmark("peer.route", configuration: PeerConfiguration.perUpdate) { benchmark, workload in
        let cpu = ThreadCPU.nanos()
        for k in benchmark.scaledIterations { blackHole(workload.route(k)) }
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        PeerWorkload()
    }

    Benchmark("peer.apply", configuration: PeerConfiguration.perUpdate) { benchmark, workload in
        workload.prepareApply(variant: benchmark.currentIteration)
        benchmark.startMeasurement()
        let cpu = ThreadCPU.nanos()
        for k in benchmark.scaledIterations { blackHole(workload.apply(k)) }
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        PeerWorkload()
    }

    Benchmark("peer.pipeline.token", configuration: PeerConfiguration.perUpdate) { benchmark, workload in
        let cpu = ThreadCPU.nanos()
        for k in benchmark.scaledIterations { blackHole(workload.update(k)) }
        benchmark.stopMeasurement(cpuSince: cpu)
    } setup: {
        PeerWorkload()
    }
}

/// The Core suite's TokenWorkload, for the peer: 1,000 activities (3 per device), update `k` to
/// activity `k % 1000` with content variant `k % 16` and a newer timestamp.
final class PeerWorkload {
    let backend = PeerBackend()
    let activityCount: Int
    let contents = (0..<Match.variantCount).map(Match.content)
    let tokens: [String]
    var activities: [PeerActivity] = []
    let headers = [
        "apns-push-type": Match.pushType, "apns-topic": Match.topic, "apns-priority": "10", "apns-expiration": "0",
    ]
    /// Variant `v` as FanoutCore's encoder wrote it: the validate stage checks the same bytes in both suites.
    let payloads: [Data]
    private(set) var timestamp = Int(Match.epochSeconds)
    private var applyPush = ValidatedPush(event: "update", timestamp: 0, priority: 10)
    private var applyPayload = Data()

    init(activities count: Int = 1000, activitiesPerDevice: Int = 3) {
        activityCount = count
        tokens = (0..<count).map(Match.token)
        var encoder = PayloadEncoder()
        payloads = (0..<Match.variantCount).map { v in
            var record: [UInt8] = []
            Match.content(v).appendRecord(to: &record)
            _ = record.withUnsafeBytes {
                encoder.encode(
                    event: .update, timestamp: Match.epochSeconds + 1 + Int64(v), content: $0, schema: Match.schema,
                    staleDate: Match.staleDateSeconds, relevanceScore: Match.relevanceScore)
            }
            return Data(encoder.bytes)
        }
        for i in 0..<count {
            backend.request(
                id: Match.activityId(i), deviceId: Match.deviceId(i / activitiesPerDevice), bundle: Match.bundle,
                token: tokens[i], content: contents[0], relevance: Match.relevanceScore,
                nowMillis: Match.epochSeconds * 1000)
            activities.append(backend.activities[Match.activityId(i)]!)
        }
        // Warm up as the Core workload does: every stage, every activity, a few rounds.
        for k in 0..<(4 * count) {
            precondition(update(k) == .delivered(.applied))
            _ = validate(k)
            _ = route(k)
        }
        prepareApply()
        for k in 0..<count { precondition(apply(k) == .applied) }
    }

    func encode(variant v: Int) -> Data {
        timestamp += 1
        do {
            return try backend.encode(
                contents[v % Match.variantCount], timestamp: timestamp, staleDate: Int(Match.staleDateSeconds),
                relevanceScore: Match.relevanceScore)
        } catch {
            preconditionFailure("encode failed: \(error)")
        }
    }

    func validate(_ k: Int) -> Result<ValidatedPush, PeerRejection> {
        backend.validate(
            headers: headers, payload: payloads[k % Match.variantCount], isChannel: false, bundle: Match.bundle)
    }

    func route(_ k: Int) -> Result<PeerActivity, PeerUnroutable> {
        backend.route(token: tokens[k % activityCount])
    }

    /// Encodes and validates the update `apply` delivers next; outside the measured region.
    func prepareApply(variant v: Int = 0) {
        applyPayload = encode(variant: v)
        guard case .success(let push) = backend.validate(
            headers: headers, payload: applyPayload, isChannel: false, bundle: Match.bundle)
        else { preconditionFailure("the prepared update is rejected") }
        applyPush = push
    }

    func apply(_ k: Int) -> PeerOutcome {
        backend.apply(applyPush, payload: applyPayload, to: activities[k % activityCount], nowMillis: Match.nowMillis)
    }

    func update(_ k: Int) -> PeerVerdict {
        let payload = encode(variant: k)
        return backend.push(token: tokens[k % activityCount], headers: headers, payload: payload,
                            nowMillis: Match.nowMillis)
    }
}
