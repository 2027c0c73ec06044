import FanoutAPNs
import FanoutWire
import FanoutCore
import UVLoop
import Synchronization

/// What the serving workers send each other: requests judged by the worker owning the device, their answers,
/// and the service's peer messages (broadcast fan-outs, channel changes, fan-out parts).
public enum ClusterMessage: Sendable {
    case request(id: Int, origin: Int, input: RequestInput)
    case response(id: Int, response: APNsAnswer)
    case peer(PeerMessage)
    /// Every worker has drained its connections: close up.
    case allDrained
    /// A worker began its shutdown (its duration is over, a signal came): this one begins its own now. Each loop
    /// times its duration from its own start, so without it the last loop kept serving after the first had sent
    /// GOAWAY; a client that fails its in-flight requests on GOAWAY (aioapns does, even those the server goes on to
    /// answer) resent them on a connection to a loop still serving, which applied them again (duplicates).
    case shutdown
}

/// The workers of one `fanout serve` (one loop each, shared-nothing): their inboxes (a lock and a wakeup each;
/// a wakeup's callback drains the inbox in one batch), the token directory, and the shutdown count.
public final class ServeCluster: @unchecked Sendable {
    // @unchecked: `inboxes`, `senders` and `drained` are touched only under `lock`; `directory` and `count`
    // are immutable.
    public let count: Int
    public let directory: TokenDirectory
    /// `--faults`: each push identity's arrivals, every worker's together (a retry may arrive on another loop).
    let faultAttempts = FaultAttempts()
    /// `--faults`: the pushes refused and not back yet, every worker's together (a retry may arrive on another loop).
    let retries = RetryLedger()
    /// Set by the first worker to begin its shutdown, before it tells the others or sends any GOAWAY: from then on
    /// serving has ended for the whole serve, and a request that completes on a worker that has not stopped yet is
    /// refused, not applied (see `APNsServer.connection(_:received:)`). One relaxed load per request.
    let stopping = Atomic<Bool>(false)
    private let lock = Lock()
    private var inboxes: [[ClusterMessage]]
    private var senders: [Wakeup.Sender?]
    private var drained = Set<Int>()
    /// Batches handed over (`send(_:to:)` of a batch): a worker's messages for one peer from one read or one inbox
    /// drain go as one batch, one wakeup.
    private var batches = 0
    public var batchesHanded: Int { lock.withLock { batches } }

    public init(count: Int, directory: TokenDirectory) {
        self.count = count
        self.directory = directory
        inboxes = Array(repeating: [], count: count)
        senders = Array(repeating: nil, count: count)
    }

    func attach(_ worker: Int, _ sender: Wakeup.Sender) {
        lock.lock()
        senders[worker] = sender
        let pending = !inboxes[worker].isEmpty
        lock.unlock()
        if pending { sender.send() }
    }

    func send(_ message: ClusterMessage, to worker: Int) {
        lock.lock()
        inboxes[worker].append(message)
        let sender = senders[worker]
        lock.unlock()
        sender?.send()
    }

    /// Appends a batch of messages to `worker`'s inbox under one lock and wakes it once; `batch` is emptied (its
    /// capacity kept for the sender's next batch).
    func send(_ batch: inout [ClusterMessage], to worker: Int) {
        lock.lock()
        if inboxes[worker].isEmpty {
            swap(&inboxes[worker], &batch)  // the batch becomes the inbox: no message copied
        } else {
            inboxes[worker].append(contentsOf: batch)
        }
        batches += 1
        let sender = senders[worker]
        lock.unlock()
        batch.removeAll(keepingCapacity: true)
        sender?.send()
    }

    /// After every worker has stopped: answers still waiting in an inbox. A worker closes up once every worker has
    /// drained (`.allDrained`), and a peer may answer a request forwarded before that after it: the answer arrives
    /// behind `.allDrained` and is never read. Its connection had closed (a worker drains when it has none), so it
    /// is an answer produced and never submitted, counted as dropped: answers produced = submitted + dropped holds.
    public func answersLeftInInboxes() -> Int {
        lock.lock()
        defer { lock.unlock() }
        var n = 0
        for k in inboxes.indices {
            for case .response in inboxes[k] { n += 1 }
            inboxes[k].removeAll()
        }
        return n
    }

    /// Swaps `worker`'s inbox with `spare` (empty): the messages waiting come out in `spare` without a copy, and the
    /// inbox goes on in the spare's storage.
    func take(_ worker: Int, into spare: inout [ClusterMessage]) {
        lock.lock()
        swap(&inboxes[worker], &spare)
        lock.unlock()
    }

    /// No message waits in any inbox (the in-memory harness steps its loops until then).
    var isIdle: Bool {
        lock.lock()
        defer { lock.unlock() }
        return inboxes.allSatisfy(\.isEmpty)
    }

    /// A worker has no connection left; once all have, every worker is told to close up.
    func markDrained(_ worker: Int) {
        lock.lock()
        let first = drained.insert(worker).inserted
        let all = drained.count == count
        lock.unlock()
        if first && all {
            for k in 0..<count { send(.allDrained, to: k) }
        }
    }
}
