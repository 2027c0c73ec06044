import FanoutCore
import Testing

@testable import FanoutWire

@Suite("H2ServerConnection.holdOutput (answers written together)")
struct H2ServerHoldOutputTests {
    @Test("answers submitted while the output is held are written at the release, in one write, all of them")
    func heldAnswersGoOutTogether() throws {
        var written: [UInt8] = []
        let keeper = Keeper()
        let connection = H2ServerConnection(output: { written += $0 }, settings: H2ServerSettings())
        connection.delegate = keeper
        try connection.start()
        let feed = { (bytes: [UInt8]) in bytes.withUnsafeBytes { connection.receive($0) } }
        feed(Client.preface + Client.settings + Client.request(1, end: true) + Client.request(3, end: true)
            + Client.request(5, end: true))
        #expect(keeper.requests.count == 3)
        let before = (writes: connection.writes, bytes: written.count)
        connection.holdOutput()
        #expect(connection.holdsOutput)
        for request in keeper.requests {
            connection.respond(to: request, with: H2Response(status: 200, body: []))
        }
        #expect(connection.writes == before.writes && written.count == before.bytes, "nothing written while held")
        #expect(connection.responsesSubmitted == 3)
        connection.releaseOutput()
        #expect(!connection.holdsOutput)
        #expect(connection.writes == before.writes + 1, "one flush wrote the three answers")
        let answered = frames(Array(written[before.bytes...])).filter { $0.type == 0x1 }.map(\.stream)
        #expect(answered == [1, 3, 5])
    }

    @Test("without a hold each answer outside a read is written at once (what the hold saves)")
    func unheldAnswersGoOutOneByOne() throws {
        let keeper = Keeper()
        let connection = H2ServerConnection(output: { _ in }, settings: H2ServerSettings())
        connection.delegate = keeper
        try connection.start()
        let feed = { (bytes: [UInt8]) in bytes.withUnsafeBytes { connection.receive($0) } }
        feed(Client.preface + Client.settings + Client.request(1, end: true) + Client.request(3, end: true))
        let before = connection.writes
        for request in keeper.requests {
            connection.respond(to: request, with: H2Response(status: 200, body: []))
        }
        #expect(connection.writes == before + 2)
    }
}
