internal import CLibUV

/// A libuv poll handle (`uv_poll_t`): readiness of a socket someone else reads and writes (libcurl's, in
/// `FanoutWire`'s HTTP client), reported on the loop's thread.
///
/// The callback is set once, at creation; it receives the poll handle, the status (0, or a negative libuv
/// error such as `UV_EBADF`) and the events that are ready, so it needs to capture nothing of the handle.
///
/// Lifecycle: ``close()`` it exactly once, and before the socket itself is closed (libuv's rule for poll
/// handles); its memory and the loop's retain on this object are released in libuv's close callback (see
/// ``EventLoop``). Loop affinity: see ``EventLoop``.
public final class Poll {
    /// Readiness a poll watches for and reports (`UV_READABLE`, `UV_WRITABLE`).
    public struct Events: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        public static let readable = Events(rawValue: Int32(UV_READABLE.rawValue))
        public static let writable = Events(rawValue: Int32(UV_WRITABLE.rawValue))
    }

    public typealias Callback = (Poll, _ status: Int32, _ events: Events) -> Void

    /// The loop this handle belongs to (kept alive by the handle).
    public let loop: EventLoop
    /// The socket watched.
    public let socket: Int32
    private let handle: UnsafeMutablePointer<uv_poll_t>
    private var state: HandleState
    /// Set in `init`, dropped in the close callback (which breaks any reference cycle through it).
    private var callback: Callback?

    /// Creates a stopped poll handle for `socket` (`uv_poll_init_socket`).
    ///
    /// - Throws: ``UVError`` if libuv refuses the socket (e.g. `EEXIST`: another poll handle watches it); no
    ///   handle is left open then.
    public init(loop: EventLoop, socket: Int32, _ callback: @escaping Callback) throws(UVError) {
        loop.preconditionUsable("Poll.init")
        self.loop = loop
        self.socket = socket
        self.callback = callback
        handle = .allocate(capacity: 1)
        handle.initialize(to: uv_poll_t())
        state = .closed
        do {
            try check(uv_poll_init_socket(loop.pointer, handle, socket), "uv_poll_init_socket")
        } catch {
            // Init failed: nothing to close, the memory is ours to free.
            handle.deinitialize(count: 1)
            handle.deallocate()
            self.callback = nil
            throw error
        }
        state = .open
        uv_handle_set_data(CLibUV_poll_as_handle(handle), Unmanaged.passRetained(self).toOpaque())
        loop.ownerCreated()
        loop.handleOpened()
        didOpen = true
    }

    deinit {
        // An open or closing handle holds a retain on its owner; a handle whose init failed was never counted.
        precondition(state == .closed, "Poll deinitialised before its close callback ran")
        if didOpen { loop.ownerDestroyed() }
    }

    /// Whether init succeeded (the loop counts the owner only then).
    private var didOpen = false

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

    /// Whether the handle watches something (`uv_is_active`).
    public var isActive: Bool {
        state == .open && uv_is_active(CLibUV_poll_as_handle(handle)) != 0
    }

    /// Whether ``close()`` has been called (the close callback may still be pending).
    public var isClosed: Bool { state != .open }

    /// Stops and closes the handle (`uv_close`); the callback will not run again. Its memory is released in the
    /// close callback, on the next loop iteration (or in ``EventLoop/close()``). Safe inside any callback,
    /// including this handle's own.
    ///
    /// - Precondition: not closed before.
    public func close() {
        preconditionOpen("close")
        state = .closing
        loop.handleClosing()
        uv_close(CLibUV_poll_as_handle(handle)) { handle in Poll.handleClosed(handle) }
    }

    // MARK: libuv callbacks (capture-free, forward to one method)

    private static func ready(_ handle: UnsafeMutablePointer<uv_poll_t>?, _ status: Int32, _ events: Int32) {
        guard let handle, let data = uv_handle_get_data(CLibUV_poll_as_handle(handle)) else {
            preconditionFailure("poll callback without an owner")
        }
        let owner = Unmanaged<Poll>.fromOpaque(data).takeUnretainedValue()
        owner.callback?(owner, status, Events(rawValue: events))
    }

    private static func handleClosed(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
        guard let handle, let data = uv_handle_get_data(handle) else {
            preconditionFailure("poll close callback without an owner")
        }
        // Balances `passRetained` in `init`; the owner may be deinitialised when `owner` goes.
        let owner = Unmanaged<Poll>.fromOpaque(data).takeRetainedValue()
        owner.finishClose()
    }

    private func finishClose() {
        precondition(state == .closing, "close callback for a poll handle that is not closing")
        handle.deinitialize(count: 1)
        handle.deallocate()
        state = .closed
        callback = nil
        loop.handleClosed()
    }

    private func preconditionOpen(_ operation: StaticString) {
        precondition(state == .open, "Poll.\(operation) used after close()")
    }
}
