internal import CLibUV

/// A libuv async handle (`uv_async_t`): other threads signal it, its callback runs on the loop's
/// thread.
///
/// Signals coalesce: however many ``Sender/send()`` calls happen before the loop gets to the
/// handle, the callback runs at least once after them, and possibly only once. So the callback
/// drains whatever the senders queued (a queue the caller owns), instead of counting calls.
///
/// The `Wakeup` itself is confined to the loop thread like every handle (see ``EventLoop``). The
/// cross-thread part is its ``sender``, the only `Sendable` object in this module: hand it to
/// producer threads. A send after ``close()`` is harmless and returns `false`.
///
/// An active wakeup keeps ``EventLoop/run()`` running until it is closed (or unreferenced with
/// ``isReferenced``); a worker typically closes it when told to stop.
public final class Wakeup {
    public typealias Callback = (Wakeup) -> Void

    /// Signals a ``Wakeup`` from any thread.
    ///
    /// `@unchecked Sendable` is sound because: the only mutable state, the handle pointer, is read
    /// and written only while holding `lock`; `uv_async_send` is the one libuv function documented
    /// as safe to call from any thread; and ``Wakeup/close()`` clears the pointer under the same
    /// lock *before* calling `uv_close`, so no send can touch the handle once it is closing, and
    /// its memory (freed later, in the close callback) is never reached from another thread.
    public final class Sender: @unchecked Sendable {
        private let lock = UVLock()
        /// The handle while the wakeup is open; `nil` once it is closing. Guarded by `lock`.
        private var handle: UnsafeMutablePointer<uv_async_t>?

        fileprivate init() {}

        /// Wakes the loop so the wakeup's callback runs soon on the loop thread (`uv_async_send`).
        /// Safe from any thread, including the loop thread.
        ///
        /// - Returns: `false` if the wakeup is closing or closed (nothing was sent).
        @discardableResult
        public func send() -> Bool {
            lock.withLock {
                guard let handle else { return false }
                // uv_async_send returns 0 in libuv 1.x (it aborts on a failed write to its fd).
                checkInvariant(uv_async_send(handle), "uv_async_send")
                return true
            }
        }

        fileprivate func attach(_ handle: UnsafeMutablePointer<uv_async_t>) {
            lock.withLock { self.handle = handle }
        }

        fileprivate func detach() {
            lock.withLock { handle = nil }
        }
    }

    /// The loop this wakeup belongs to (kept alive by the wakeup).
    public let loop: EventLoop
    /// The thread-safe signalling side; it may outlive the wakeup.
    public let sender: Sender
    private let handle: UnsafeMutablePointer<uv_async_t>
    private var state: HandleState
    /// Set in `init`, dropped in the close callback (which breaks any reference cycle through it).
    private var callback: Callback?

    /// Creates an open wakeup on `loop` (`uv_async_init`).
    ///
    /// - Throws: ``UVError`` if libuv cannot create the loop's wakeup descriptor (e.g. `EMFILE`).
    /// - Precondition: `loop` is not closed.
    public init(loop: EventLoop, _ callback: @escaping Callback) throws(UVError) {
        loop.preconditionUsable("Wakeup.init")
        self.loop = loop
        self.callback = callback
        sender = Sender()
        handle = .allocate(capacity: 1)
        handle.initialize(to: uv_async_t())
        state = .closed
        loop.ownerCreated()
        let status = uv_async_init(loop.pointer, handle) { async in Wakeup.asyncFired(async) }
        do {
            try check(status, "uv_async_init")
        } catch {
            // Init failed, so there is nothing to uv_close: free the memory now; deinit balances
            // ownerCreated().
            handle.deinitialize(count: 1)
            handle.deallocate()
            throw error
        }
        state = .open
        uv_handle_set_data(CLibUV_async_as_handle(handle), Unmanaged.passRetained(self).toOpaque())
        loop.handleOpened()
        sender.attach(handle)
    }

    deinit {
        // An open or closing handle holds a retain on its owner, so only a closed one gets here.
        precondition(state == .closed, "Wakeup deinitialised before its close callback ran")
        loop.ownerDestroyed()
    }

    /// Same as `sender.send()`, for the loop thread.
    @discardableResult
    public func send() -> Bool {
        sender.send()
    }

    /// Whether an open wakeup keeps ``EventLoop/run()`` from returning (`uv_ref`/`uv_unref`);
    /// `true` by default.
    public var isReferenced: Bool {
        get {
            preconditionOpen("isReferenced")
            return uv_has_ref(CLibUV_async_as_handle(handle)) != 0
        }
        set {
            preconditionOpen("isReferenced")
            if newValue {
                uv_ref(CLibUV_async_as_handle(handle))
            } else {
                uv_unref(CLibUV_async_as_handle(handle))
            }
        }
    }

    /// Whether ``close()`` has been called (the close callback may still be pending).
    public var isClosed: Bool {
        state != .open
    }

    /// Closes the wakeup (`uv_close`): from now on ``Sender/send()`` returns `false` and the
    /// callback does not run again, even for sends that were pending. Memory is released in the
    /// close callback. Safe inside any callback, including this wakeup's own.
    ///
    /// - Precondition: not closed before; called on the loop thread.
    public func close() {
        preconditionOpen("close")
        state = .closing
        sender.detach()
        loop.handleClosing()
        uv_close(CLibUV_async_as_handle(handle)) { handle in Wakeup.handleClosed(handle) }
    }

    // MARK: libuv callbacks (capture-free, forward to one method)

    private static func asyncFired(_ handle: UnsafeMutablePointer<uv_async_t>?) {
        guard let handle, let data = uv_handle_get_data(CLibUV_async_as_handle(handle)) else {
            preconditionFailure("async callback without an owner")
        }
        Unmanaged<Wakeup>.fromOpaque(data).takeUnretainedValue().fire()
    }

    private static func handleClosed(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
        guard let handle, let data = uv_handle_get_data(handle) else {
            preconditionFailure("async close callback without an owner")
        }
        // Balances `passRetained` in `init`; the owner may be deinitialised when `owner` goes.
        let owner = Unmanaged<Wakeup>.fromOpaque(data).takeRetainedValue()
        owner.finishClose()
    }

    private func fire() {
        callback?(self)
    }

    private func finishClose() {
        precondition(state == .closing, "close callback for a wakeup that is not closing")
        handle.deinitialize(count: 1)
        handle.deallocate()
        state = .closed
        callback = nil
        loop.handleClosed()
    }

    private func preconditionOpen(_ operation: StaticString) {
        precondition(state == .open, "Wakeup.\(operation) used after close()")
    }
}
