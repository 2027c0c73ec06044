import FanoutCore
import FanoutWire
import UVLoop

/// Arbitrary bytes as a server's side of one HTTP/2 connection, into the client `fanout push` uses
/// (`H2ClientConnection` in memory: nghttp2's client session without a socket), with a few requests submitted.
///
/// The first byte picks the setup (the rest is the server's input, in two reads):
///   bits 0–2: requests submitted before any input (1 to 8), each with a small body and its own `apns-id`;
///   bit 3: the input is preceded by a valid server preface (an empty SETTINGS), so requests go out at once;
///   bit 4: small bounds (header block 512 bytes or 8 fields, body 256 bytes, 64 kept), reached by small inputs;
///   bit 5: the client's own stream limit is 2 (the others wait in its queue);
///   bit 6: each request that ends (the first 8) submits another from inside the callback, and one handed back
///          unprocessed is submitted again once;
///   bit 7: one more request is submitted between the two reads.
/// The second byte picks push's bounds and deadlines (`fanout push`'s owner sweeps them: here on a made-up clock):
///   bit 0: `--max-queued 2` (requests past the client's stream limit and two queued fail as `dropped (queue full)`);
///   bit 1: the stream ids start 12 short of their end with a margin of 4 (`--first-stream-id`): the connection
///          drains, hands back what it did not send, and fails nothing for it;
///   bit 2: `--request-timeout 10` swept 20 s after the requests were handed over, between the two reads (open
///          streams reset with CANCEL, queued ones failed, as `timeout`);
///   bit 3: `--ping-interval 10` swept at once (a PING goes out) and 30 s later after the second read (unless the
///          input answered it, a half-open connection: ended);
///   bit 4: `--connect-timeout 10` swept 11 s after the opening, before the input (not ready by then: ended).
/// Then the connection is closed by the client.
/// Invariants: no crash, leak (AddressSanitizer) or hang; every submitted request ends exactly once, and none after
/// the connection said it closed unless submitted after that; the connection's counts add up to the requests; an answer has a status and no
/// failure, a failure no status; a body kept is within its limit; only requests never sent or refused by a GOAWAY
/// are handed back; what the client wrote stays bounded by what it was sent.

/// One loop for every input: an in-memory connection opens no handle on it and the loop never runs.
nonisolated(unsafe) let loop: EventLoop = {
    do {
        return try EventLoop()
    } catch {
        fatalError("fuzz setup: \(error)")
    }
}()

let serverPreface: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0]

/// What the current input's connection did (globals: the closures capture nothing).
nonisolated(unsafe) var written = 0
nonisolated(unsafe) var ended: [Int] = []
nonisolated(unsafe) var closedCalls = 0
nonisolated(unsafe) var submitted = 0
/// Requests submitted after the connection said it closed: they fail at once, after it.
nonisolated(unsafe) var late: Set<Int> = []

func submit(_ connection: H2ClientConnection, _ request: H2ClientRequest) {
    submitted += 1
    if closedCalls != 0 { late.insert(request.tag) }
    connection.submit(request)
}

func request(_ tag: Int) -> H2ClientRequest {
    let content = H2RequestContent(
        headers: HeaderList([("apns-push-type", "liveactivity"), ("apns-topic", "com.example.push-type.liveactivity")]),
        body: Array("{\"aps\":{\"n\":\(tag)}}".utf8))
    return H2ClientRequest(
        path: Array("/3/device/\(String(repeating: "ab", count: 32))".utf8), content: content,
        uniqueHeader: H2UUIDHeader(name: .apnsId, high: 0, low: UInt64(tag)), tag: tag)
}

func check(_ response: H2ClientResponse, _ settings: H2ClientSettings) {
    if closedCalls != 0 && !late.contains(response.tag) {
        fatalError("fuzz invariant: request \(response.tag) ended after the connection closed")
    }
    if response.failure == nil {
        if response.status == 0 { fatalError("fuzz invariant: an answer without a status") }
        if response.unprocessed != nil { fatalError("fuzz invariant: an answered request handed back") }
    } else if response.status != 0 {
        fatalError("fuzz invariant: a failure with status \(response.status)")
    }
    if response.body.count > settings.bodyLimit { fatalError("fuzz invariant: \(response.body.count) body bytes kept") }
    // Sent and handed back only when the server said it did not process it: a GOAWAY or REFUSED_STREAM.
    if response.unprocessed != nil && response.submittedNanos != 0 && response.failure != .goAway
        && response.failure != .reset(7)
    {
        let outcome = response.failure.map { "\($0)" } ?? "an answer"
        fatalError("fuzz invariant: a sent request handed back after \(outcome)")
    }
    if let handed = response.unprocessed, handed.tag != response.tag {
        fatalError("fuzz invariant: request \(response.tag) handed back as \(handed.tag)")
    }
}

/// The owner's sweep at `now`; what it says it did must be what the connection did.
func sweep(_ connection: H2ClientConnection, at now: UInt64, _ deadlines: ClientDeadlines) {
    let closedBefore = closedCalls
    let timeoutsBefore = connection.requestTimeouts
    switch connection.sweep(now: now, deadlines) {
    case .none:
        if connection.requestTimeouts != timeoutsBefore { fatalError("fuzz invariant: requests expired unsaid") }
    case .ended:
        if closedCalls != closedBefore + 1 { fatalError("fuzz invariant: a sweep ended the connection unclosed") }
    case .expired(let n):
        if n <= 0 || connection.requestTimeouts != timeoutsBefore + n {
            fatalError("fuzz invariant: \(n) expired, \(connection.requestTimeouts - timeoutsBefore) counted")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPush(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard size > 1, let data else { return 0 }
    let setup = data[0]
    let bounds = data[1]
    var settings = H2ClientSettings()
    if bounds & 1 != 0 { settings.maxQueued = 2 }
    if bounds & 2 != 0 {
        settings.streamIdMargin = 4
        settings.firstStreamId = Int32.max - 12
    }
    let deadlines = ClientDeadlines(
        connectSeconds: bounds & 16 != 0 ? 10 : 0, requestSeconds: bounds & 4 != 0 ? 10 : 0,
        pingIntervalSeconds: bounds & 8 != 0 ? 10 : 0)
    if setup & 16 != 0 {
        settings.maxResponseHeaderBytes = 512
        settings.maxResponseHeaderFields = 8
        settings.maxResponseBodyBytes = 256
        settings.bodyLimit = 64
    }
    if setup & 32 != 0 { settings.maxConcurrentStreams = 2 }
    let chain = setup & 64 != 0
    written = 0
    ended = []
    closedCalls = 0
    submitted = 0
    late = []
    var chained = 0
    var resubmitted = Set<Int>()
    let input = UnsafeRawBufferPointer(start: data + 2, count: size - 2)
    do {
        let connection = H2ClientConnection(loop: loop, output: { written += $0.count }, settings: settings)
        connection.onResponse = { c, response in
            check(response, settings)
            if chain, let again = response.unprocessed, resubmitted.insert(again.tag).inserted {
                submit(c, again)  // the same tag: it ends once more, counted as a new submission
                return
            }
            ended.append(response.tag)
            if chain && chained < 8 {
                chained += 1
                submit(c, request(100 + chained))
            }
        }
        connection.onClosed = { _ in closedCalls += 1 }
        let opened = connection.openedNanos
        for tag in 0...Int(setup & 7) { submit(connection, request(tag)) }
        if bounds & 16 != 0 { sweep(connection, at: opened + 11_000_000_000, deadlines) }
        if setup & 8 != 0 { serverPreface.withUnsafeBytes { connection.receive($0) } }
        if bounds & 8 != 0 { sweep(connection, at: opened + 1, deadlines) }
        let half = input.count / 2
        connection.receive(UnsafeRawBufferPointer(rebasing: input[..<half]))
        if bounds & 4 != 0 { sweep(connection, at: EventLoop.hrtimeNanos + 20_000_000_000, deadlines) }
        if setup & 128 != 0 { submit(connection, request(99)) }
        connection.receive(UnsafeRawBufferPointer(rebasing: input[half...]))
        if bounds & 8 != 0 { sweep(connection, at: opened + 30_000_000_000, deadlines) }
        connection.close(reason: "end of the fuzz input")
        if closedCalls != 1 { fatalError("fuzz invariant: onClosed called \(closedCalls) times") }
        if connection.openStreams != 0 || connection.queuedRequests != 0 {
            fatalError("fuzz invariant: \(connection.openStreams) open, \(connection.queuedRequests) queued at the end")
        }
        let counted = connection.responsesReceived + connection.streamsReset + connection.failedByGoAway
            + connection.failedByConnectionEnd + connection.failedSubmissions + connection.responsesTooLarge
            + connection.requestTimeouts + connection.droppedQueueFull + connection.handedBackAtStreamIds
        // Only a connection whose ids were started near their end drains for them (a session nghttp2 ends after a
        // protocol error is not one).
        if connection.handedBackAtStreamIds > 0 && bounds & 2 == 0 {
            fatalError("fuzz invariant: \(connection.handedBackAtStreamIds) handed back at the ids' end, ids far from it")
        }
        if connection.droppedQueueFull > 0 && bounds & 1 == 0 { fatalError("fuzz invariant: a queue drop unbounded") }
        if connection.requestTimeouts > 0 && bounds & 4 == 0 { fatalError("fuzz invariant: a timeout with no deadline") }
        if counted != submitted {
            fatalError("fuzz invariant: \(submitted) requests submitted, \(counted) counted by the connection")
        }
        // Each tag ends once (a handed-back request resubmitted ends under its tag the second time only).
        let expected = (0...Int(setup & 7)).map { $0 } + (setup & 128 != 0 ? [99] : [])
            + (0..<chained).map { 101 + $0 }
        if ended.sorted() != expected.sorted() {
            fatalError("fuzz invariant: requests \(expected.sorted()) submitted, \(ended.sorted()) ended")
        }
    }
    // Requests (~300 bytes each, 17 at most), the preface and SETTINGS, and per frame received at most an answer
    // about as long (ACK, WINDOW_UPDATE, RST_STREAM): a client writing far more would be amplifying.
    if written > 16384 + 4 * size {
        fatalError("fuzz invariant: wrote \(written) bytes for \(size) bytes of input")
    }
    return 0
}
