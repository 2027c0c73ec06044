import FanoutAPNs
import FanoutMetrics
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
///          push with the scenario's events.
/// Every setup is built once (a small population, the wall clock fixed at `nowSeconds`) and serves input after
/// input; each input is one connection, closed once the workers have settled.
/// Invariants: no crash; every request the connection completed was judged once by the real servers (their
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

func makeSetup(jwt: Bool, workers: Int, badDay: Bool = false) -> InMemoryServe {
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
    do {
        return try InMemoryServe(services: services, options: options, wallMillis: nowSeconds * 1000)
    } catch {
        fatalError("fuzz setup: \(error)")
    }
}

/// Indexed by the first byte's bits 0, 1 and 3.
nonisolated(unsafe) let setups: [InMemoryServe] = [false, true].flatMap { badDay in
    [
        makeSetup(jwt: false, workers: 1, badDay: badDay), makeSetup(jwt: true, workers: 1, badDay: badDay),
        makeSetup(jwt: false, workers: 2, badDay: badDay), makeSetup(jwt: true, workers: 2, badDay: badDay),
    ]
}

/// The bad-day setups' clock (nanoseconds since they were built): a second more per input, so every answer held
/// by `--latency` is due by the end of its input.
nonisolated(unsafe) var clockNanos: UInt64 = 0

let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

/// Bytes the server wrote for the current input (a global: the output closure captures nothing).
nonisolated(unsafe) var written = 0

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServe(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard size > 0, let data else { return 0 }
    let badDay = data[0] & 8 != 0
    let setup = setups[Int(data[0] & 3) + (badDay ? 4 : 0)]
    let worker = setup.servers.count > 1 ? Int(data[0] >> 2 & 1) : 0
    let input = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    let judgedBefore = setup.judged
    let resetBefore = setup.servers.reduce(0) { $0 + $1.connectionStats.faults[.reset] }
    written = 0
    let connection: H2ServerConnection
    do {
        connection = try setup.open(on: worker) { written += $0.count }
    } catch {
        fatalError("fuzz invariant: the connection did not start: \(error)")
    }
    preface.withUnsafeBytes { connection.receive($0) }
    // In two reads, so that a frame split across reads is exercised too.
    let half = input.count / 2
    connection.receive(UnsafeRawBufferPointer(rebasing: input[..<half]))
    connection.receive(UnsafeRawBufferPointer(rebasing: input[half...]))
    setup.settle()
    if badDay {
        clockNanos += 1_000_000_000
        setup.advance(toNanos: clockNanos)
        if setup.heldAnswers != 0 {
            fatalError("fuzz invariant: \(setup.heldAnswers) answers still held after their delay passed")
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
    if written > 4096 + 1024 * (size + 64) {
        fatalError("fuzz invariant: wrote \(written) bytes for \(size) bytes of input")
    }
    return 0
}
