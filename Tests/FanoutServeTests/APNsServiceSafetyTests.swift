import FanoutCore
@testable import FanoutAPNs
@testable import FanoutServe
import FanoutSim
import Testing

/// What used to trap on a request's path: the reason mappings and the cross-worker broadcast check.
@Suite("APNsService: total reason mappings, a refused remote broadcast counted")
struct APNsServiceSafetyTests {
    @Test("every pipeline rejection and unroutable verdict has APNs's reason of the same name and status")
    func reasonMappings() {
        for reason in RejectReason.allCases {
            let answer = APNsReason(reason)
            #expect(answer.rawValue == reason.name && answer.status == reason.status, "\(reason)")
        }
        for reason in UnroutableReason.allCases {
            let answer = APNsReason(reason)
            #expect(answer.rawValue == reason.name, "\(reason)")
            #expect(answer.status == (reason == .unregistered ? 410 : 400))
        }
    }

    @Test("a broadcast another worker accepted and this one refuses is counted and its part finished, not trapped")
    func refusedRemoteBroadcast() {
        var scenario = BuiltinScenarios.named("smoke")!
        scenario.population.devices = 60
        let now = APNsServiceTests.now
        let first = APNsService(scenario: scenario, auth: nil, nowSeconds: now, worker: 0, of: 2) { 1 }
        let second = APNsService(scenario: scenario, auth: nil, nowSeconds: now, worker: 1, of: 2) { 1 }
        let p = APNsServiceTests.population(first).first { $0["channel"] is String }!
        let answer = APNsServiceTests.ask(
            first, path: "/4/broadcasts/apps/\(p["app"] as! String)",
            [("apns-channel-id", p["channel"] as! String), ("apns-push-type", "LiveActivity"),
                ("apns-priority", "10"), ("apns-expiration", "0")],
            APNsServiceTests.payload(now + 3))
        #expect(answer.status == 200)
        guard case .broadcast(var remote)? = first.takeOutgoing().first else {
            Issue.record("no broadcast for the other worker")
            return
        }
        remote.payload = Array(#"{"aps":{"event":"update"}}"#.utf8)  // no timestamp: BadRequestPayload
        second.acceptRemoteBroadcast(remote)
        #expect(second.stats.findings[.broadcastRefusedElsewhere] == 1)
        #expect(second.stats.examples[.broadcastRefusedElsewhere]?.first?.contains("BadRequestPayload") == true)
        #expect(second.pendingFanouts == 0)
        guard case .fanoutPart(let origin, let id, _)? = second.takeOutgoing().first else {
            Issue.record("the refused part was not reported to the worker that answered")
            return
        }
        #expect(origin == 0 && id == remote.id)
    }
}
