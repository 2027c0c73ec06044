import Foundation
import Testing

/// `--manage-listen`: channel management on a listener of its own, as APNs serves it on its api-manage-broadcast
/// hosts; each listener answers the other's API with 404 BadPath, counted. Driven by curl on 127.0.0.1.
@Suite("fanout serve --manage-listen (curl)", .serialized)
struct ServeManageListenTests {
    /// The management port from the start line.
    static func managePort(_ serve: ServeProcess) throws -> Int {
        let text = serve.stderr
        guard let range = text.range(of: #"channel management on 127\.0\.0\.1:[0-9]+"#, options: .regularExpression),
            let port = Int(text[range].split(separator: ":").last!)
        else { throw CLIFailure("no management port in: \(text)") }
        return port
    }

    @Test("channels on the management listener, pushes and broadcasts on --listen; each refuses the other's API",
          arguments: [1, 2])
    func split(workers: Int) throws {
        let serve = try ServeProcess(["--h2c", "--workers", String(workers), "--manage-listen", "127.0.0.1:0"])
        let manage = try Self.managePort(serve)
        #expect(manage != serve.port)
        let population = try serve.population()
        let token = population.first { ($0["app"] as! String) == "com.example.scores" }!["token"] as! String
        let channelApp = population.first { $0["channel"] is String }!["app"] as! String
        let channels = "/1/apps/\(channelApp)/channels"
        let create = #"{"message-storage-policy": 0, "push-type": "LiveActivity"}"#
        let type = ("apns-push-type", "liveactivity")

        // Management: created on its own listener, refused on the push listener.
        let created = try curl(manage, "POST", channels, headers: [], body: create)
        #expect(created.status == 201, "\(created)")
        let channel = try #require(created.headers["apns-channel-id"])
        let wrongListener = try curl(serve.port, "POST", channels, headers: [], body: create)
        #expect(wrongListener.status == 404 && wrongListener.body.contains(#""reason":"BadPath""#), "\(wrongListener)")
        #expect(wrongListener.headers["apns-request-id"] != nil)

        // Pushes and broadcasts: served on --listen (the channel made on the other listener is known), refused on
        // the management listener.
        let now = Int(Date().timeIntervalSince1970)
        let push = try curl(
            serve.port, "POST", "/3/device/\(token)",
            headers: [type, ("apns-topic", "com.example.scores.push-type.liveactivity")],
            body: livePayload(timestamp: now))
        #expect(push.status == 200, "\(push)")
        let pushOnManage = try curl(
            manage, "POST", "/3/device/\(token)",
            headers: [type, ("apns-topic", "com.example.scores.push-type.liveactivity")],
            body: livePayload(timestamp: now + 1))
        #expect(pushOnManage.status == 404 && pushOnManage.body.contains(#""reason":"BadPath""#), "\(pushOnManage)")
        #expect(pushOnManage.headers["apns-id"] != nil)
        let broadcastHeaders = [("apns-channel-id", channel), type, ("apns-priority", "10"), ("apns-expiration", "0")]
        // Loop 0 tells the other loops of a new channel before it answers; a broadcast right after may still race
        // the message on 2 loops (docs/BACKEND.md, *Event loops*), so it is sent until it is taken, within a bound.
        var broadcast = try curl(
            serve.port, "POST", "/4/broadcasts/apps/\(channelApp)", headers: broadcastHeaders,
            body: livePayload(timestamp: now + 2))
        for _ in 0..<50 where broadcast.status != 200 {
            Thread.sleep(forTimeInterval: 0.02)
            broadcast = try curl(
                serve.port, "POST", "/4/broadcasts/apps/\(channelApp)", headers: broadcastHeaders,
                body: livePayload(timestamp: now + 2))
        }
        #expect(broadcast.status == 200, "\(broadcast)")
        let broadcastOnManage = try curl(
            manage, "POST", "/4/broadcasts/apps/\(channelApp)", headers: broadcastHeaders,
            body: livePayload(timestamp: now + 3))
        #expect(broadcastOnManage.status == 404, "\(broadcastOnManage)")
        let deleted = try curl(manage, "DELETE", channels, headers: [("apns-channel-id", channel)], body: nil)
        #expect(deleted.status == 204, "\(deleted)")

        #expect(serve.stop() == 0, "\(serve.stderr)")
        let summary = try serve.summary()
        #expect(summary["manageListen"] as? String == "127.0.0.1:\(manage)")
        let connections = summary["connections"] as! [String: Any]
        #expect(connections["misplacedRequests"] as? Int == 3, "\(connections)")
        let requests = summary["requests"] as! [String: Any]
        #expect((requests["byReason"] as? [String: Int])?["BadPath"] == 3, "\(requests)")
        #expect(requests["wireIdentityHolds"] as? Bool == true, "\(connections)")
        let markdown = try String(contentsOf: serve.folder.appendingPathComponent("summary.md"), encoding: .utf8)
        #expect(markdown.contains("channel management on 127.0.0.1:\(manage)"))
        #expect(markdown.contains("3 requests sent to the listener that does not serve their API"))
    }

    @Test("without --manage-listen one listener serves every API, and nothing is counted as misplaced")
    func oneListener() throws {
        let serve = try ServeProcess(["--h2c", "--workers", "1"])
        let channelApp = try serve.population().first { $0["channel"] is String }!["app"] as! String
        let created = try curl(
            serve.port, "POST", "/1/apps/\(channelApp)/channels", headers: [],
            body: #"{"message-storage-policy": 0, "push-type": "LiveActivity"}"#)
        #expect(created.status == 201, "\(created)")
        #expect(serve.stop() == 0)
        let summary = try serve.summary()
        #expect(summary["manageListen"] == nil)
        #expect((summary["connections"] as! [String: Any])["misplacedRequests"] as? Int == 0)
    }

    @Test("a bad --manage-listen is a usage error naming the flag, nothing written")
    func badFlag() throws {
        let directory = try CLI.temporaryDirectory()
        let folder = directory.appendingPathComponent("run")
        let result = try CLI.run(["serve", "smoke", "--h2c", "--manage-listen", "nowhere", "--out", folder.path])
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("--manage-listen: expected HOST:PORT, got nowhere"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path))
    }
}
