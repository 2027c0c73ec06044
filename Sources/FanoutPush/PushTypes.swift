import FanoutAPNs
import FanoutCore
import FanoutMetrics
import FanoutSim
import Foundation
import FanoutWire

/// Where `fanout push` sends: `http://HOST:PORT` (h2c, prior knowledge) or `https://HOST:PORT` (TLS, ALPN h2).
public struct PushTarget: Sendable, Equatable, CustomStringConvertible {
    public var tls: Bool
    public var host: String
    public var port: Int

    public init(tls: Bool, host: String, port: Int) {
        self.tls = tls
        self.host = host
        self.port = port
    }

    public struct ParseError: Error, CustomStringConvertible {
        public var description: String
    }

    /// `http://127.0.0.1:8443`, `https://localhost:8443`, `https://[::1]:8443` (the port is required; no path).
    public static func parse(_ text: String) throws(ParseError) -> PushTarget {
        let tls: Bool
        var rest: Substring
        if text.hasPrefix("https://") {
            tls = true
            rest = text.dropFirst(8)
        } else if text.hasPrefix("http://") {
            tls = false
            rest = text.dropFirst(7)
        } else {
            throw ParseError(description: "expected http://HOST:PORT or https://HOST:PORT, got \(text)")
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        let host: Substring
        let portText: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]"), rest[rest.index(after: close)...].hasPrefix(":") else {
                throw ParseError(description: "expected https://[ADDRESS]:PORT, got \(text)")
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            portText = rest[rest.index(close, offsetBy: 2)...]
        } else {
            guard let colon = rest.lastIndex(of: ":") else {
                throw ParseError(description: "the target needs a port: \(text)")
            }
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        }
        guard !host.isEmpty, !host.contains("/"), let port = Int(portText), (1...65535).contains(port) else {
            throw ParseError(description: "expected http://HOST:PORT or https://HOST:PORT, got \(text)")
        }
        return PushTarget(tls: tls, host: String(host), port: port)
    }

    public var description: String {
        (tls ? "https://" : "http://") + (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    }
}

/// How `fanout push` sends.
public struct PushOptions: Sendable {
    public var target: PushTarget
    /// `fanout push A,B,...`: the targets after the first (`target`); with N targets in all, target i is serve
    /// shard i/N (`fanout serve --shard i/N`): each token push goes to its device's shard, each broadcast to all.
    public var moreTargets: [PushTarget] = []
    /// Every target, `target` first.
    public var targets: [PushTarget] { [target] + moreTargets }
    /// The targets as given (comma-separated).
    public var shownTargets: String { targets.map(\.description).joined(separator: ",") }
    /// HTTP/2 connections, requests spread over them (the one with the fewest open and queued first).
    public var connections = 1
    /// TLS: the CAs the server's certificate must chain to (nil: the system's), or no verification at all.
    public var caFile: String?
    public var insecure = false
    /// Provider tokens (ES256 JWT): the key id, the `.p8`'s PEM bytes, the team id.
    public var authKeyId: String?
    public var authKeyPEM: [UInt8]?
    public var team: String?
    /// The dispatchLag p99 above which the generator counts as saturated, and the streamWait p99 above which the
    /// run counts as server-limited (`--max-schedule-lag`).
    public var maxScheduleLagNanos: UInt64 = 10_000_000
    /// After the schedule's last event, how long answers are waited for before the connections are closed.
    public var drainSeconds = 10.0
    /// How long a connection may take to be ready (TCP connect, TLS handshake, the server's SETTINGS): the first
    /// ones before the run gives up, and every one opened during the run, reconnects included (one that is not
    /// ready in time ends, and counts as a failed attempt).
    public var connectTimeoutSeconds = 10.0
    /// A request unanswered this long after it was handed to a connection (queued or sent) fails as `timeout`: its
    /// stream is reset (RST_STREAM CANCEL) and its latency recorded censored, at the deadline (`--request-timeout`).
    public var requestTimeoutSeconds = 10.0
    /// A PING on every ready connection this often; one whose PING is not answered by the next is closed, as a lost
    /// connection (0: no PING; `--ping-interval`).
    public var pingIntervalSeconds = 10.0
    /// Requests waiting for a stream per connection at most, and waiting for a ready connection per connection of a
    /// target (`--max-queued`): past it a request fails at once as `dropped (queue full)`.
    public var maxQueued = 100_000
    /// How long a connection slot keeps trying to reconnect after losing its connection, with exponential backoff
    /// and jitter between attempts (`--reconnect-budget`): the clock starts at the loss and stops when a replacement
    /// is ready; past it the slot gives up (0: no reconnect at all).
    public var reconnectBudgetSeconds = 30.0
    /// The backoff between failed attempts of one slot: `reconnectBackoffMinSeconds` after the first failure,
    /// doubling up to `reconnectBackoffMaxSeconds`, each delay drawn between half of it and all of it (jitter).
    /// A replacement for a connection that ended after being ready (or that drains: a GOAWAY, its stream ids) is
    /// opened at once.
    public var reconnectBackoffMinSeconds = 0.05
    public var reconnectBackoffMaxSeconds = 5.0
    /// The first stream id of the connections opened at the start (not of replacements): a test starts them near
    /// the end of their stream ids to see them drain and be replaced (1: the normal start).
    public var firstStreamId: Int32 = 1
    /// Streams per connection at most (also bounded by the server's SETTINGS_MAX_CONCURRENT_STREAMS).
    public var maxStreamsPerConnection = 1000
    /// SIGINT and SIGTERM end the run early (what is open or queued is unanswered at the end) instead of the
    /// process: the run folder is still written (the command line sets this).
    public var stopOnSignals = false
    /// Connections opened in place of ones that ended or drain during the run (a GOAWAY, a lost connection, stream
    /// ids used up), at most, over the whole run (`--reconnects`; 0: none).
    public var maxReconnects = 1000
    /// The scenario's clock at t0 (UNIX seconds; `fanout push --epoch`): the payloads' timestamps and dates and the
    /// `apns-expiration` count from it, as `fanout run`'s do from its virtual epoch. nil: the wall clock at start.
    /// Provider tokens are signed at the wall clock either way.
    public var epochSeconds: Int64?
    /// Send only the events whose index is K modulo N (`--shard K/N`): every event's pushes are sent by exactly one
    /// of the N shards, so their counts add up to the whole run's.
    public var shard: Shard = .whole
    /// The schedule's t0, in UNIX nanoseconds (`--start-at`): the first event is due at this instant (nil: as soon
    /// as every connection is ready). The connections are opened `connectLeadSeconds` before it (at once if nearer).
    public var startAtUnixNanos: Int64?
    /// With `startAtUnixNanos`: a run whose connections were ready more than this after it refuses to start (its
    /// shards would not start together): `PushResults.startRefused`.
    public var maxStartSkewNanos: Int64 = 100_000_000
    /// With a `startAtUnixNanos` further ahead than this, the connections are opened this long before it.
    public var connectLeadSeconds = 5.0
    /// `--barrier DIR` (with a shard K/N): once ready, the run writes `DIR/ready-K` and waits until all N shards'
    /// files are there; its start is then the latest ready instant + `barrierMarginSeconds` (PushRun+Barrier.swift).
    /// Not with `startAtUnixNanos`.
    public var barrierDirectory: String?
    /// How long the run waits for its peers at the barrier before it gives up (nothing sent, its folder saying so).
    public var barrierTimeoutSeconds = 120.0
    public var barrierMarginSeconds = 0.5
    /// How often the barrier's directory is looked at.
    public var barrierPollMillis: UInt64 = 5

    public init(target: PushTarget) { self.target = target }
}

/// One second of the run, for the progress line.
public struct PushProgress: Sendable {
    public var seconds: Int
    public var sent: Int
    public var answered: Int
    public var inFlight: Int
    public var queued: Int
    public var latencyP99Nanos: UInt64
    public var scheduleLagP99Nanos: UInt64
    /// The generator's own lateness, and the wait for the server's streams (the second's p99 of each).
    public var dispatchLagP99Nanos: UInt64 = 0
    public var streamWaitP99Nanos: UInt64 = 0
}


extension PushRun {
    /// Header names and values every request shares.
    static let channelIdName = Array("apns-channel-id".utf8)
    static let topicName = Array("apns-topic".utf8)
    static let pushTypeName = Array("apns-push-type".utf8)
    static let liveActivity = Array("liveactivity".utf8)
    static let priorityName = Array("apns-priority".utf8)
    static let expirationName = Array("apns-expiration".utf8)
    static let authorizationName = Array("authorization".utf8)

    /// The number of token pushes the schedule makes per token source event (its followers).
    public func followers(of source: Int) -> Int { targets[source].count }

    /// The `reason` of an APNs error body (`{"reason":"BadDeviceToken"}`), or "unparsed body".
    static func reason(_ body: [UInt8]) -> String {
        // Not a JSON object (a server's HTML or text page): no parser needed to say so. APNs's bodies are UTF-8 JSON
        // objects; one in UTF-16, or after a byte-order mark, is not a reason either.
        guard let first = body.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }), first == 0x7B
        else { return "unparsed body" }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let reason = object["reason"] as? String
        else { return "unparsed body" }
        return reason
    }

    /// `byReason`'s key for an error body: its `reason` when it is one APNs documents (``APNsReason``, docs/INGEST.md
    /// §3), "unparsed body", or "other": a server's strings never become keys without bound.
    static func reasonKey(_ body: [UInt8]) -> String {
        let reason = reason(body)
        return reason == "unparsed body" || APNsReason(rawValue: reason) != nil ? reason : "other"
    }

    /// `failures`' key for a failure: its description, with a reset's error code kept only when RFC 9113 defines it
    /// (0–13; "reset (other)" else), so that a server's codes never become keys without bound.
    static func failureKey(_ failure: H2ClientFailure) -> String {
        if case .reset(let code) = failure, code > 13 { return "reset (other)" }
        return failure.description
    }

    /// A UUID's text (8-4-4-4-12 lowercase hex) from the seed, the event's index and the push's number within the
    /// event: unique per request, the same each run, and the same whether the run is sharded or not (shards never
    /// send two requests under one id).
    /// The header `name` with that UUID (formatted when the request is sent, into a stack buffer).
    static func requestId(_ name: H2UUIDHeader.Name, seed: UInt64, event: Int, push: Int) -> H2UUIDHeader {
        H2UUIDHeader(
            name: name, high: Mix.hash(seed, 0xA1D, UInt64(event), UInt64(push)),
            low: Mix.hash(seed, 0xA1E, UInt64(event), UInt64(push)))
    }
}
