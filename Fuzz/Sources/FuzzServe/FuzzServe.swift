import FanoutAPNs
import FanoutMetrics
import Glibc
import FanoutServe
import FanoutSim
import FanoutWire

/// Arbitrary bytes as a client's input after a valid HTTP/2 preface, into `fanout serve`'s real servers in memory
/// (`InMemoryServe`: the `APNsServer` delegate, its cluster forwarding and inboxes, nghttp2 without sockets).
///
/// The first byte picks the setup (the rest is the client's input, in two reads):
///   bit 0: provider tokens checked (ES256, the key below), or none;
///   bit 1: two workers (event loops) in a cluster, pushes forwarded to the worker owning the token, or one;
///   bit 2: with two workers, the connection arrives at worker 1 instead of worker 0;
///   bit 3: APNs on a bad day and the events judged: `--faults 503=5%,429=5%,500=2%,reset=5%` and `--latency 10ms`
///          (answers held on the harness's clock, moved on a second per input), `--expect-events` correlating every
///          push with the scenario's events;
///   bits 4–5: `--manage-listen` (listeners split): 1 or 3, the connection arrived on the push listener; 2, on the
///          channel-management listener (a request for the other one's API answers 404 BadPath); 0, one listener;
///   bit 6: over TLS (the server's real TLS session over memory, the key and certificate below);
///   bit 7: with bit 6, a real TLS client (fanout's own client session) makes the handshake first and sends the
///          preface and the input encrypted; without it, the input goes in as the client's raw records (a
///          ClientHello's parser, records out of order, garbage): the connection must end cleanly and be counted.
/// Every setup is built once (a small population, the wall clock fixed at `nowSeconds`) and serves input after
/// input; each input is one connection, closed once the workers have settled.
/// Invariants: no crash; a TLS client's handshake completes; every request the connection completed was judged once
/// by the real servers (their
/// `ServeStats`), forwarded ones answered back; the answers' and the devices' identities hold; what the server
/// wrote stays bounded by what it was sent.

/// The time the fuzz runs at (UNIX seconds): the seed corpus's tokens are issued at it (Fuzz/make-serve-corpus.py).
let nowSeconds: Int64 = 1_800_000_000

/// The public half of the test key the corpus's tokens are signed with: a P-256 key whose private scalar is
/// SHA-256("fanout fuzz serve test key") mod n (made by Fuzz/make-serve-corpus.py; a test key, signs nothing else).
let testKeyPEM = """
    -----BEGIN PUBLIC KEY-----
    MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEFUoySS7zu97Fby5cJYAqznCaONam
    0ovMG6qHp6UncXR6g0Z0RzILbRD4Pm/7efC6oHzhmnfKrVNsdbkFuMqd3A==
    -----END PUBLIC KEY-----

    """

/// The server's TLS key and self-signed certificate (CN and subjectAltName 127.0.0.1, P-256, valid to 2126): a test
/// pair made for this target with `openssl req -x509 -newkey ec`, which secures nothing else.
let tlsKeyPEM = """
    -----BEGIN PRIVATE KEY-----
    MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg0oyGerTMVipuehyE
    eEBtWXDLLlyxwWKNG9Gt1O7wyFOhRANCAAQ6WXCJu389XffPmyfWyb+eufWhATWZ
    sIjHNNkoDvd3x6GuuQCrYh30T+uLKWpcLt//yFvappoK1KvSR6YfjMJ3
    -----END PRIVATE KEY-----

    """
let tlsCertificatePEM = """
    -----BEGIN CERTIFICATE-----
    MIIBkDCCATagAwIBAgIUCZjchRrlgaKiZZ70IrKHR43dKgkwCgYIKoZIzj0EAwIw
    FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTEyODE3MTAwNloYDzIxMjYxMTA0
    MTcxMDA2WjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO
    PQMBBwNCAAQ6WXCJu389XffPmyfWyb+eufWhATWZsIjHNNkoDvd3x6GuuQCrYh30
    T+uLKWpcLt//yFvappoK1KvSR6YfjMJ3o2QwYjAdBgNVHQ4EFgQUbX7CUp8O0w7a
    JKv4OjRj47FDnWMwHwYDVR0jBBgwFoAUbX7CUp8O0w7aJKv4OjRj47FDnWMwDwYD
    VR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAABMAoGCCqGSM49BAMCA0gAMEUC
    IQDTPr30vrZ3eAAQpEfH+0hj9p+hGxDgUTQfSpi/JW6NjQIga3gz3+ho/+2Z5mwN
    bANOuHjnWSEGKBlVc+i2gTRFn3Q=
    -----END CERTIFICATE-----

    """

/// The server's context (the pair written to a temporary folder once: `TLSContext` reads files, as `--tls-cert` and
/// `--tls-key` do) and the client's (no verification: the pair is self-signed).
nonisolated(unsafe) let tlsContexts: (server: TLSContext, client: TLSContext) = {
    var folder = Array("/tmp/fanout-fuzz-tls-XXXXXX".utf8CString)
    guard mkdtemp(&folder) != nil else { fatalError("fuzz setup: mkdtemp") }
    let dir = String(decoding: folder.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    func write(_ name: String, _ text: String) -> String {
        let path = dir + "/" + name
        guard let file = fopen(path, "w"), fputs(text, file) >= 0, fclose(file) == 0 else {
            fatalError("fuzz setup: cannot write \(path)")
        }
        return path
    }
    let key = write("key.pem", tlsKeyPEM)
    let certificate = write("cert.pem", tlsCertificatePEM)
    do {
        let server = try TLSContext(certificateFile: certificate, keyFile: key)
        let client = try TLSContext(clientCAFile: nil, insecure: true)
        unlink(key)
        unlink(certificate)
        rmdir(dir)
        return (server, client)
    } catch {
        fatalError("fuzz setup: \(error)")
    }
}()

func makeSetup(jwt: Bool, workers: Int, badDay: Bool = false, split: Bool = false) -> InMemoryServe {
    var scenario = BuiltinScenarios.named("smoke")!
    scenario.population.devices = 40
    let auth: ProviderAuth?
    if jwt {
        do {
            auth = ProviderAuth(
                team: "FUZZTEAM01", keys: ["FUZZKEY001": ProviderKey(try ES256Key(pem: Array(testKeyPEM.utf8), name: "fuzz key"))])
        } catch {
            fatalError("fuzz setup: \(error)")
        }
    } else {
        auth = nil
    }
    let services = (0..<workers).map { k in
        APNsService(scenario: scenario, auth: auth, nowSeconds: nowSeconds, worker: k, of: workers) { 0 }
    }
    var options = ServeOptions()
    if badDay {
        do {
            options.faults.latency = try ServeFaults.parseLatency("10ms")
            try ServeFaults.parseFaults("503=5%,429=5%,500=2%,reset=5%", into: &options.faults)
        } catch {
            fatalError("fuzz setup: \(error)")
        }
        options.faults.seed = 7
        _ = ServeEvents.expect(services: services)
    }
    if split { options.managePort = 0 }
    do {
        return try InMemoryServe(services: services, options: options, wallMillis: nowSeconds * 1000)
    } catch {
        fatalError("fuzz setup: \(error)")
    }
}

/// Indexed by the first byte's bits 0, 1, 3 and whether bits 4–5 split the listeners.
nonisolated(unsafe) let setups: [InMemoryServe] = [false, true].flatMap { split in
    [false, true].flatMap { badDay in
        [
            makeSetup(jwt: false, workers: 1, badDay: badDay, split: split),
            makeSetup(jwt: true, workers: 1, badDay: badDay, split: split),
            makeSetup(jwt: false, workers: 2, badDay: badDay, split: split),
            makeSetup(jwt: true, workers: 2, badDay: badDay, split: split),
        ]
    }
}

/// The bad-day setups' clock (nanoseconds since they were built): a second more per input, so every answer held
/// by `--latency` is due by the end of its input.
nonisolated(unsafe) var clockNanos: UInt64 = 0

let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

/// Bytes the server wrote for the current input (a global: the output closure captures nothing), and with a TLS
/// client, the records it wrote that the client has not read yet.
nonisolated(unsafe) var written = 0
nonisolated(unsafe) var toClient: [UInt8] = []

/// The client's records into the server (`connection.receive`), the server's into the client; until the client's
/// handshake is done and nothing is left to exchange. Returns whether the handshake completed.
func handshake(_ client: TLSSession, _ connection: H2ServerConnection) -> Bool {
    do throws(TLSError) {
        try client.startHandshake()
        for _ in 0..<8 {
            client.takeCiphertext { connection.receive($0) }
            if toClient.isEmpty { break }
            try readServer(client)
        }
        return client.handshakeDone && connection.endReason == nil
    } catch {
        return false
    }
}

/// What the server wrote, read by the client (its SETTINGS, answers, session tickets), and dropped.
func readServer(_ client: TLSSession) throws(TLSError) {
    let records = toClient
    toClient.removeAll(keepingCapacity: true)
    let failure: TLSError? = records.withUnsafeBytes { bytes in
        do throws(TLSError) {
            try client.feed(bytes)
            return nil
        } catch {
            return error
        }
    }
    if let failure { throw failure }
    try client.readPlaintext { _ in }
}

/// Plaintext from the client: encrypted by its session and handed to the server as one read.
func send(_ client: TLSSession, _ bytes: UnsafeRawBufferPointer, to connection: H2ServerConnection) {
    do throws(TLSError) {
        try client.writePlaintext(bytes)
    } catch {
        fatalError("fuzz invariant: the client could not encrypt: \(error)")
    }
    client.takeCiphertext { connection.receive($0) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServe(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard size > 0, let data else { return 0 }
    let badDay = data[0] & 8 != 0
    let listener = data[0] >> 4 & 3
    let role: ServeListener.Role = listener == 0 ? .all : listener == 2 ? .manage : .push
    let setup = setups[Int(data[0] & 3) + (badDay ? 4 : 0) + (listener != 0 ? 8 : 0)]
    let worker = setup.servers.count > 1 ? Int(data[0] >> 2 & 1) : 0
    let tls = data[0] & 64 != 0
    let client: TLSSession?
    do {
        client = tls && data[0] & 128 != 0
            ? try TLSSession(clientContext: tlsContexts.client, serverName: "127.0.0.1") : nil
    } catch {
        fatalError("fuzz setup: \(error)")
    }
    let input = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    let judgedBefore = setup.judged
    let resetBefore = setup.servers.reduce(0) { $0 + $1.connectionStats.faults[.reset] }
    let tlsBefore = setup.servers.reduce(0) { $0 + $1.connectionStats[.tlsConnections] }
    written = 0
    toClient.removeAll(keepingCapacity: true)
    let connection: H2ServerConnection
    do {
        connection = try setup.open(on: worker, tls: tls ? tlsContexts.server : nil, serving: role) {
            written += $0.count
            if client != nil { toClient.append(contentsOf: $0) }
        }
    } catch {
        fatalError("fuzz invariant: the connection did not start: \(error)")
    }
    if tls && setup.servers.reduce(0, { $0 + $1.connectionStats[.tlsConnections] }) != tlsBefore + 1 {
        fatalError("fuzz invariant: a TLS connection not counted as one")
    }
    // In two reads, so that a frame (or a record) split across reads is exercised too.
    let half = input.count / 2
    if let client {
        guard handshake(client, connection) else {
            fatalError("fuzz invariant: the TLS handshake failed: \(connection.endReason ?? "no reason")")
        }
        preface.withUnsafeBytes { send(client, $0, to: connection) }
        send(client, UnsafeRawBufferPointer(rebasing: input[..<half]), to: connection)
        send(client, UnsafeRawBufferPointer(rebasing: input[half...]), to: connection)
    } else {
        if !tls { preface.withUnsafeBytes { connection.receive($0) } }
        connection.receive(UnsafeRawBufferPointer(rebasing: input[..<half]))
        connection.receive(UnsafeRawBufferPointer(rebasing: input[half...]))
    }
    setup.settle()
    if badDay {
        clockNanos += 1_000_000_000
        setup.advance(toNanos: clockNanos)
        if setup.heldAnswers != 0 {
            fatalError("fuzz invariant: \(setup.heldAnswers) answers still held after their delay passed")
        }
    }
    if let client {
        do throws(TLSError) {
            try readServer(client)  // the answers decrypt: the server's records are well formed
        } catch {
            fatalError("fuzz invariant: the server's records did not decrypt: \(error)")
        }
    }
    let requests = connection.requestsReceived
    let waiting = setup.forwardedWaiting
    connection.abort(reason: "end of the fuzz input")
    if setup.openConnections != 0 {
        fatalError("fuzz invariant: \(setup.openConnections) connections still open after abort")
    }
    if waiting != 0 {
        fatalError("fuzz invariant: \(waiting) forwarded requests unanswered after the workers settled")
    }
    let judged = setup.judged - judgedBefore
    // A request reset by `--faults reset=` is not judged (RST_STREAM instead of an answer; counted as a fault).
    let reset = setup.servers.reduce(0) { $0 + $1.connectionStats.faults[.reset] } - resetBefore
    if judged + reset != requests {
        fatalError("fuzz invariant: \(requests) requests completed, \(judged) judged, \(reset) reset by a fault")
    }
    if judged > 0 && !setup.identitiesHold {  // nothing judged, nothing changed
        fatalError("fuzz invariant: identities broken")
    }
    if badDay && judged > 0 {
        guard let events = ServeEventsReport.judge(services: setup.servers.map(\.service), nowNanos: clockNanos) else {
            fatalError("fuzz invariant: the bad-day setup correlates no events")
        }
        if !events.identitiesHold { fatalError("fuzz invariant: the events' identities broken") }
    }
    // Each answer is at most a few hundred bytes plus frame overhead (a channel list: at most 1,000 ids); a server
    // writing far more than it was sent would be amplifying.
    // A TLS handshake's records (the certificate) are ~1 KiB more.
    if written > 4096 + 1024 * (size + 64) + (tls ? 4096 : 0) {
        fatalError("fuzz invariant: wrote \(written) bytes for \(size) bytes of input")
    }
    return 0
}
