internal import CLibUV

/// Where a handle is in libuv's lifecycle (libuv `docs/src/handle.rst`).
enum HandleState {
    /// Initialised (`uv_*_init` returned 0); libuv holds one retain on the owner.
    case open
    /// Passed to `uv_close`; the close callback has not run yet.
    case closing
    /// The close callback ran (or init failed): the memory is freed, the retain balanced.
    case closed
}

/// The one owner of a libuv handle's lifecycle, which every handle type of this module (``Timer``, ``Wakeup``,
/// ``Poll``, ``SignalWatcher``, ``TCPListener``, ``TCPStream``) subclasses, keeping only its own start, stop and
/// callbacks:
///
/// 1. `init` allocates the raw handle and has the subclass's hook call its `uv_*_init`. If that fails, the memory
///    is freed at once (libuv never saw the handle) and the error thrown; nothing is left open.
/// 2. Once init succeeded, libuv holds one retain on this object (`uv_handle_set_data(passRetained(self))`), so
///    the object lives at least until its close callback, and it keeps its ``loop`` alive.
/// 3. ``close()`` calls ``willClose()``, then `uv_close`. A **second `close()` is a no-op**, for every handle
///    type, whether the first came from the owner, from a callback or from
///    ``EventLoop/closeRemainingHandles(tcpOnly:)``.
/// 4. The close callback, the only place the raw memory is freed, takes back the retain, frees the memory and
///    calls ``didClose()`` (subclasses drop their callbacks there, which breaks reference cycles through them).
///
/// The libuv callbacks of subclasses are capture-free `@convention(c)` closures that find their owner through
/// the handle's `data` (``owner(_:_:)``, no allocation and no dynamic cast) and forward to one method.
/// Loop affinity: see ``EventLoop``.
public class UVHandle {
    /// The loop this handle belongs to (kept alive by the handle).
    public let loop: EventLoop
    /// The raw handle (a `uv_timer_t`, `uv_tcp_t`, ...), allocated in `init`, freed in the close callback.
    let pointer: UnsafeMutableRawPointer
    final var state: HandleState

    /// Allocates a handle initialised to `empty`, then `initialize(loop, handle)` (the subclass's `uv_*_init`).
    ///
    /// - Throws: ``UVError`` when `initialize` returns a negative status; the memory is freed then, and the
    ///   object (never open) only waits for its deinit.
    /// - Precondition: `loop` is not closed.
    init<Raw>(
        loop: EventLoop, _ empty: Raw, _ operation: StaticString,
        initialize: (UnsafeMutablePointer<uv_loop_t>, UnsafeMutablePointer<Raw>) -> Int32
    ) throws(UVError) {
        loop.preconditionUsable("\(operation)")
        self.loop = loop
        let handle = UnsafeMutablePointer<Raw>.allocate(capacity: 1)
        handle.initialize(to: empty)
        pointer = UnsafeMutableRawPointer(handle)
        state = .closed
        // Every stored property is set: from here on deinit runs whatever happens, and balances this count.
        loop.ownerCreated()
        let status = initialize(loop.pointer, handle)
        guard status >= 0 else {
            // libuv never saw the handle: nothing to uv_close, the memory is ours to free.
            handle.deinitialize(count: 1)
            handle.deallocate()
            throw UVError(code: status, operation: operation.description)
        }
        state = .open
        uv_handle_set_data(uvHandle, Unmanaged.passRetained(self).toOpaque())
        loop.handleOpened()
    }

    deinit {
        // An open or closing handle holds a retain on its owner, so only a closed one (or one whose init failed)
        // gets here.
        precondition(state == .closed, "\(type(of: self)) deinitialised before its close callback ran")
        loop.ownerDestroyed()
    }

    /// The handle as libuv's common `uv_handle_t` (every handle type begins with `UV_HANDLE_FIELDS`).
    final var uvHandle: UnsafeMutablePointer<uv_handle_t> {
        pointer.assumingMemoryBound(to: uv_handle_t.self)
    }

    /// The handle as its own libuv type (for the subclass that allocated it as `Raw`).
    @inline(__always)
    final func raw<Raw>(_ type: Raw.Type) -> UnsafeMutablePointer<Raw> {
        pointer.assumingMemoryBound(to: Raw.self)
    }

    // MARK: State

    /// Whether ``close()`` has been called (the close callback may still be pending).
    public final var isClosed: Bool { state != .open }

    /// Whether an active handle keeps ``EventLoop/run()`` from returning (`uv_ref`/`uv_unref`); `true` by default.
    /// Reads `false` once closing.
    ///
    /// - Precondition (set): the handle is not closing or closed.
    public final var isReferenced: Bool {
        get { state == .open && uv_has_ref(uvHandle) != 0 }
        set {
            preconditionOpen("isReferenced")
            if newValue { uv_ref(uvHandle) } else { uv_unref(uvHandle) }
        }
    }

    /// Whether the handle is started (`uv_is_active`); `false` once closing.
    public final var isActive: Bool {
        state == .open && uv_is_active(uvHandle) != 0
    }

    /// Stops the program when the handle is closing or closed (using one is a bug, not an error).
    @inline(__always)
    final func preconditionOpen(_ operation: StaticString) {
        precondition(state == .open, "\(type(of: self)).\(operation) used after close()")
    }

    // MARK: Closing

    /// Stops the handle and closes it (`uv_close`): its callback will not run again (pending TCP writes complete
    /// with a cancellation). The memory is released in the close callback, on the next loop iteration (or in
    /// ``EventLoop/close()``). Safe inside any callback, including this handle's own.
    ///
    /// A second call (or a call after ``EventLoop/closeRemainingHandles(tcpOnly:)`` closed the handle) does
    /// nothing.
    public final func close() {
        guard state == .open else { return }
        state = .closing
        loop.handleClosing()
        willClose()
        uv_close(uvHandle) { handle in UVHandle.closed(handle) }
    }

    /// Subclasses stop what they started before the handle goes (called once, from ``close()``, before
    /// `uv_close`).
    func willClose() {}

    /// Subclasses drop their callbacks here, breaking reference cycles through them (called once, from the close
    /// callback, after the memory is freed).
    func didClose() {}

    // MARK: libuv callbacks

    /// The owner of `handle` (any libuv handle type of this module), for a subclass's libuv callback: the object
    /// `init` put in the handle's `data`, of the subclass that registered the callback.
    @inline(__always)
    static func owner<Owner: UVHandle>(_ handle: UnsafeMutableRawPointer?, _ type: Owner.Type) -> Owner {
        guard let handle, let data = uv_handle_get_data(handle.assumingMemoryBound(to: uv_handle_t.self)) else {
            preconditionFailure("\(Owner.self) callback without an owner")
        }
        return Unmanaged<Owner>.fromOpaque(data).takeUnretainedValue()
    }

    private static func closed(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
        guard let handle, let data = uv_handle_get_data(handle) else {
            preconditionFailure("close callback without an owner")
        }
        // Balances `passRetained` in `init`; the owner may be deinitialised when `owner` goes.
        let owner = Unmanaged<UVHandle>.fromOpaque(data).takeRetainedValue()
        precondition(owner.state == .closing, "close callback for a \(type(of: owner)) that is not closing")
        // A C struct: nothing to deinitialise, only the memory to free.
        owner.pointer.deallocate()
        owner.state = .closed
        owner.loop.handleClosed()
        owner.didClose()
    }
}
