import FanoutCore
@testable import FanoutAPNs
@testable import FanoutServe
import Foundation
import Testing

/// The service's first rows (method and path) and its topic check on a token push, answered byte for byte.
@Suite("APNsService: routes and the topic's bundle")
struct APNsServiceRouteTests {
    static let id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"

    @Test("a bad method or path is refused with its reason, the request's apns-id or apns-request-id echoed")
    func routes() {
        let service = APNsServiceTests.service()
        let headers = [("apns-id", Self.id), ("apns-request-id", Self.id)]
        let cases: [(String, String, Int, String, String)] = [
            ("GET", "/3/device/abcd", 405, "MethodNotAllowed", "apns-id"),
            ("PUT", "/3/device/abcd", 405, "MethodNotAllowed", "apns-id"),
            ("POST", "/3/device/", 400, "MissingDeviceToken", "apns-id"),
            ("POST", "/3/device", 400, "MissingDeviceToken", "apns-id"),
            ("GET", "/4/broadcasts/apps/com.example.scores", 405, "MethodNotAllowed", "apns-request-id"),
            ("GET", "/1/apps/com.example.scores/all", 404, "BadPath", "apns-request-id"),
            ("POST", "/x", 404, "BadPath", "apns-request-id"),
        ]
        for (method, path, status, reason, echoed) in cases {
            let answer = APNsServiceTests.ask(service, method, path: path, headers, APNsServiceTests.payload(1))
            #expect(answer.status == status, "\(method) \(path)")
            #expect(answer.body == #"{"reason":"\#(reason)"}"#, "\(method) \(path)")
            #expect(answer.header(echoed) == Self.id, "\(method) \(path)")
        }
    }

    @Test("the topic must name the device's app: a bundle of the same length that differs is DeviceTokenNotForTopic")
    func topicBundle() throws {
        let service = APNsServiceTests.service()
        let device = try #require(APNsServiceTests.population(service).first)
        let app = device["app"] as! String
        let token = device["token"] as! String
        let twin = String(app.dropLast()) + (app.last == "x" ? "y" : "x")
        let shorter = String(app.dropLast())
        for topic in [twin, shorter, "x" + app] {
            let answer = APNsServiceTests.ask(
                service, path: "/3/device/\(token)",
                [("apns-push-type", "liveactivity"), ("apns-topic", topic + ".push-type.liveactivity")],
                APNsServiceTests.payload(APNsServiceTests.now))
            #expect(answer.status == 400 && answer.body == #"{"reason":"DeviceTokenNotForTopic"}"#, "topic \(topic)")
        }
        let right = APNsServiceTests.ask(
            service, path: "/3/device/\(token)",
            [("apns-push-type", "liveactivity"), ("apns-topic", app + ".push-type.liveactivity")],
            APNsServiceTests.payload(APNsServiceTests.now))
        #expect(right.status == 200 && right.body.isEmpty)
        #expect(service.stats.findings[.wrongTopic] == 3)
    }
}
