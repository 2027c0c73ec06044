internal import CLibUV

/// A libuv poll handle (`uv_poll_t`): readiness of a socket someone else reads and writes (libcurl's, in
/// `FanoutWire`'s HTTP client), reported on the loop's thread.
///
/// The callback is set once, at creation; it receives the poll handle, the status (0, or a negative libuv
/// error such as `UV_EBADF`) and the events that are ready, so it needs to capture nothing of the handle.
///
/// Lifecycle: ``UVHandle/close()`` it before the socket itself is closed (libuv's rule for poll handles; a
/// second close does nothing); its memory and the loop's retain on this object are released in libuv's close
/// callback (see ``UVHandle``). Loop affinity: see ``EventLoop``.
public final class Poll: UVHandle {
    /// Readiness a poll watches for and reports (`UV_READABLE`, `UV_WRITABLE`).
    public struct Events: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        public static let readable = Events(rawValue: Int32(UV_READABLE.rawValue))
        public static let writable = Events(rawValue: Int32(UV_WRITABLE.rawValue))
    }

    public typealias Callback = (Poll, _ status: Int32, _ events: Events) -> Void

    /// The socket watched.
    public let socket: Int32
    /// Set in `init`, dropped in the close callback (which breaks any reference cycle through it).
    private var callback: Callback?

    /// Creates a stopped poll handle for `socket` (`uv_poll_init_socket`).
    ///
    /// - Throws: ``UVError`` if libuv refuses the socket (e.g. `EEXIST`: another poll handle watches it); no
    ///   handle is left open then.
    public init(loop: EventLoop, socket: Int32, _ callback: @escaping Callback) throws(UVError) {
        self.socket = socket
        self.callback = callback
        try super.init(loop: loop, uv_poll_t(), "uv_poll_init_socket") { loop, poll in
            uv_poll_init_socket(loop, poll, socket)
        }
    }

    private var handle: UnsafeMutablePointer<uv_poll_t> { raw(uv_poll_t.self) }

    /// Watches for `events` (replacing what was watched before), calling the callback when any is ready
    /// (`uv_poll_start`).
    ///
    /// - Throws: ``UVError`` from libuv (e.g. the socket was closed).
    /// - Precondition: the handle is not closing or closed.
    public func start(_ events: Events) throws(UVError) {
        preconditionOpen("start")
        try check(
            uv_poll_start(handle, events.rawValue) { poll, status, events in Poll.ready(poll, status, events) },
            "uv_poll_start")
    }

    /// Stops watching (`uv_poll_stop`); the callback does not run until ``start(_:)`` again.
    public func stop() {
        preconditionOpen("stop")
        checkInvariant(uv_poll_stop(handle), "uv_poll_stop")
    }

    override func didClose() {
        callback = nil
    }

    // MARK: libuv callback (capture-free, forwards to one method)

    private static func ready(_ handle: UnsafeMutablePointer<uv_poll_t>?, _ status: Int32, _ events: Int32) {
        let owner = UVHandle.owner(handle, Poll.self)
        owner.callback?(owner, status, Events(rawValue: events))
    }
}
