import FanoutServe
import FanoutSim
import FanoutWire

/// Arbitrary bytes as a client's input after a valid HTTP/2 preface, into the server side of `fanout serve`
/// (nghttp2 in memory, every complete request judged and applied by an APNsService with a small population).
/// Invariants: no crash, every request the connection completed was answered, the answers' and the devices'
/// identities hold, and what the server wrote stays bounded by what it was sent.
final class Answerer: H2ServerDelegate {
    let service: APNsService
    let auth = ProviderAuth.ConnectionState()
    var received = 0
    var answered = 0

    init(service: APNsService) { self.service = service }

    func connection(_ connection: H2ServerConnection, received request: H2Request) {
        received += 1
        var became = false
        let input = RequestInput(
            method: request.method, path: request.path, headers: request.headers, body: request.body,
            arrivalNanos: request.arrivalNanos)
        let response = service.handle(input, auth: auth, wallMillis: 1_800_000_000_000, becameAuthenticated: &became)
        connection.respond(to: request, with: response)
        if request.answered { answered += 1 }
    }

    func connectionClosed(_ connection: H2ServerConnection) {}

    func connectionDidProcessInput(_ connection: H2ServerConnection) {
        service.runPendingFanouts(wallMillis: 1_800_000_000_000)
    }
}

nonisolated(unsafe) let service: APNsService = {
    var s = BuiltinScenarios.named("smoke")!
    s.population.devices = 40
    return APNsService(scenario: s, auth: nil, nowSeconds: 1_800_000_000) { 0 }
}()

let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServe(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let answerer = Answerer(service: service)
    var written = 0
    var settings = H2ServerSettings()
    settings.bodyLimit = 5120
    let connection = H2ServerConnection(output: { written += $0.count }, settings: settings)
    connection.delegate = answerer
    do { try connection.start() } catch { fatalError("fuzz invariant: start failed: \(error)") }
    preface.withUnsafeBytes { connection.receive($0) }
    if size > 0, let data {
        // In two pieces, so that a frame split across reads is exercised too.
        let half = size / 2
        connection.receive(UnsafeRawBufferPointer(start: data, count: half))
        connection.receive(UnsafeRawBufferPointer(start: data + half, count: size - half))
    }
    if answerer.answered != answerer.received {
        fatalError("fuzz invariant: \(answerer.received) requests completed, \(answerer.answered) answered")
    }
    if !service.stats.identitiesHold || !service.pipeline.accounting.identitiesHold {
        fatalError("fuzz invariant: identities broken")
    }
    // Each answer is at most a few hundred bytes plus frame overhead; a server writing far more than it was
    // sent would be amplifying.
    if written > 4096 + 1024 * (size + 64) {
        fatalError("fuzz invariant: wrote \(written) bytes for \(size) bytes of input")
    }
    withExtendedLifetime(connection) {}
    return 0
}
