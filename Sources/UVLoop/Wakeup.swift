internal import CLibUV
internal import FanoutCore

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
/// ``UVHandle/isReferenced``); a worker typically closes it when told to stop. Lifecycle: see ``UVHandle`` (a
/// second ``UVHandle/close()`` does nothing).
public final class Wakeup: UVHandle {
    public typealias Callback = (Wakeup) -> Void

    /// Signals a ``Wakeup`` from any thread.
    ///
    /// `@unchecked Sendable` is sound because: the only mutable state, the handle pointer, is read
    /// and written only while holding `lock`; `uv_async_send` is the one libuv function documented
    /// as safe to call from any thread; and ``UVHandle/close()`` clears the pointer under the same
    /// lock *before* calling `uv_close`, so no send can touch the handle once it is closing, and
    /// its memory (freed later, in the close callback) is never reached from another thread.
    public final class Sender: @unchecked Sendable {
        private let lock = Lock()
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

    /// The thread-safe signalling side; it may outlive the wakeup.
    public let sender: Sender
    /// Set in `init`, dropped in the close callback (which breaks any reference cycle through it).
    private var callback: Callback?

    /// Creates an open wakeup on `loop` (`uv_async_init`).
    ///
    /// - Throws: ``UVError`` if libuv cannot create the loop's wakeup descriptor (e.g. `EMFILE`).
    /// - Precondition: `loop` is not closed.
    public init(loop: EventLoop, _ callback: @escaping Callback) throws(UVError) {
        self.callback = callback
        sender = Sender()
        try super.init(loop: loop, uv_async_t(), "uv_async_init") { loop, async in
            uv_async_init(loop, async) { async in Wakeup.asyncFired(async) }
        }
        sender.attach(raw(uv_async_t.self))
    }

    /// Same as `sender.send()`, for the loop thread.
    @discardableResult
    public func send() -> Bool {
        sender.send()
    }

    /// From now on ``Sender/send()`` returns `false` and the callback does not run again, even for sends that
    /// were pending: the sender lets go of the handle before `uv_close` (see ``Sender``).
    override func willClose() {
        sender.detach()
    }

    override func didClose() {
        callback = nil
    }

    // MARK: libuv callback (capture-free, forwards to one method)

    private static func asyncFired(_ handle: UnsafeMutablePointer<uv_async_t>?) {
        let owner = UVHandle.owner(handle, Wakeup.self)
        owner.callback?(owner)
    }
}
