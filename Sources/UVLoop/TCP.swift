internal import CLibUV

#if canImport(Glibc)
import Glibc
#endif

/// What a TCP listener and a TCP stream share: one `uv_tcp_t` owned by a Swift object, retained by
/// libuv from `uv_tcp_init` until the close callback (see ``EventLoop``).
public class TCPHandle {
    /// The loop this handle belongs to (kept alive by the handle).
    public let loop: EventLoop
    let handle: UnsafeMutablePointer<uv_tcp_t>
    var state: HandleState

    init(loop: EventLoop) {
        loop.preconditionUsable("TCP init")
        self.loop = loop
        handle = .allocate(capacity: 1)
        handle.initialize(to: uv_tcp_t())
        state = .open
        // uv_tcp_init fails only on an unsupported address family (AF_UNSPEC here: never).
        checkInvariant(uv_tcp_init(loop.pointer, handle), "uv_tcp_init")
        uv_handle_set_data(CLibUV_tcp_as_handle(handle), Unmanaged.passRetained(self).toOpaque())
        loop.ownerCreated()
        loop.handleOpened()
    }

    deinit {
        precondition(state == .closed, "TCP handle deinitialised before its close callback ran")
        loop.ownerDestroyed()
    }

    /// Whether ``close()`` has been called (the close callback may still be pending).
    public var isClosed: Bool { state != .open }

    /// Closes the handle (`uv_close`): pending writes complete with a cancellation, no read
    /// callback runs any more, and the memory goes in the close callback. Safe in any callback.
    /// A second call does nothing.
    public func close() {
        guard state == .open else { return }
        state = .closing
        loop.handleClosing()
        willClose()
        uv_close(CLibUV_tcp_as_handle(handle)) { handle in TCPHandle.handleClosed(handle) }
    }

    /// Subclasses stop what they started before the handle goes (called once, from ``close()``).
    func willClose() {}

    /// Subclasses drop their callbacks here (breaking reference cycles through them).
    func didClose() {}

    private static func handleClosed(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
        guard let handle, let data = uv_handle_get_data(handle) else {
            preconditionFailure("tcp close callback without an owner")
        }
        let owner = Unmanaged<TCPHandle>.fromOpaque(data).takeRetainedValue()
        precondition(owner.state == .closing, "close callback for a tcp handle that is not closing")
        owner.handle.deinitialize(count: 1)
        owner.handle.deallocate()
        owner.state = .closed
        owner.loop.handleClosed()
        owner.didClose()
    }

    /// The local port the handle is bound to (`uv_tcp_getsockname`); 0 when unknown.
    public var localPort: Int {
        guard state == .open else { return 0 }
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getsockname(handle, $0, &length) }
        }
        guard status == 0 else { return 0 }
        return withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    static func owner(_ stream: UnsafeMutablePointer<uv_stream_t>?) -> TCPHandle {
        guard let stream, let data = uv_handle_get_data(UnsafeMutableRawPointer(stream).assumingMemoryBound(
            to: uv_handle_t.self))
        else { preconditionFailure("tcp callback without an owner") }
        return Unmanaged<TCPHandle>.fromOpaque(data).takeUnretainedValue()
    }
}

/// A listening TCP socket (`uv_listen`). Each accepted connection becomes a ``TCPStream`` handed
/// to the callback, which owns it from then on (it must close it).
public final class TCPListener: TCPHandle {
    public typealias Callback = (TCPStream) -> Void
    private var callback: Callback?
    /// Connections that failed before they could be accepted (`uv_accept` or the listen status).
    public private(set) var acceptErrors = 0

    /// Binds `host:port` (IPv4 or IPv6 literal; port 0 picks a free one, see ``localPort``) and
    /// listens. On failure the handle is closed and the error thrown.
    public init(loop: EventLoop, host: String, port: Int, backlog: Int32 = 1024, _ callback: @escaping Callback)
        throws(UVError)
    {
        self.callback = callback
        super.init(loop: loop)
        do {
            var storage = sockaddr_storage()
            try withUnsafeMutablePointer(to: &storage) { pointer throws(UVError) in
                let address = UnsafeMutableRawPointer(pointer)
                if host.contains(":") {
                    try check(uv_ip6_addr(host, Int32(port), address.assumingMemoryBound(to: sockaddr_in6.self)),
                        "uv_ip6_addr")
                } else {
                    try check(uv_ip4_addr(host, Int32(port), address.assumingMemoryBound(to: sockaddr_in.self)),
                        "uv_ip4_addr")
                }
                try check(uv_tcp_bind(handle, address.assumingMemoryBound(to: sockaddr.self), 0), "uv_tcp_bind")
            }
            try listen(backlog)
        } catch {
            close()
            throw error
        }
    }

    /// Listens on a socket bound by ``ReusePortSockets`` (`uv_tcp_open`, then `uv_listen`): one per loop, so
    /// the kernel spreads new connections over the loops (`SO_REUSEPORT`). The handle owns the socket from
    /// here on (closing it closes the socket); on failure it is closed and the error thrown.
    public init(loop: EventLoop, socket fd: Int32, backlog: Int32 = 1024, _ callback: @escaping Callback) throws(UVError) {
        self.callback = callback
        super.init(loop: loop)
        do {
            try check(uv_tcp_open(handle, uv_os_sock_t(fd)), "uv_tcp_open")
            try listen(backlog)
        } catch {
            close()
            throw error
        }
    }

    private func listen(_ backlog: Int32) throws(UVError) {
        try check(
            uv_listen(CLibUV_tcp_as_stream(handle), backlog) { server, status in
                TCPListener.connection(server, status)
            }, "uv_listen")
    }

    override func didClose() { callback = nil }

    private static func connection(_ server: UnsafeMutablePointer<uv_stream_t>?, _ status: Int32) {
        guard let listener = TCPHandle.owner(server) as? TCPListener else { return }
        listener.accept(status)
    }

    private func accept(_ status: Int32) {
        guard state == .open else { return }
        guard status == 0 else {
            acceptErrors += 1
            return
        }
        let stream = TCPStream(loop: loop)
        guard uv_accept(CLibUV_tcp_as_stream(handle), CLibUV_tcp_as_stream(stream.handle)) == 0 else {
            acceptErrors += 1
            stream.close()
            return
        }
        uv_tcp_nodelay(stream.handle, 1)
        callback?(stream)
    }
}

/// A connected TCP stream: reads into the loop's shared buffer and hands each chunk to the read
/// callback; writes copy their bytes (the caller's buffer may be reused at once) and free the copy in
/// the write callback.
public final class TCPStream: TCPHandle {
    /// A chunk that arrived, valid during the call only.
    public typealias ReadCallback = (TCPStream, UnsafeRawBufferPointer) -> Void
    /// The peer closed its side (`nil`) or the connection failed (the error).
    public typealias EndCallback = (TCPStream, UVError?) -> Void
    /// All queued writes have been handed to the kernel.
    public typealias DrainCallback = (TCPStream) -> Void

    private var onRead: ReadCallback?
    private var onEnd: EndCallback?
    /// Called when ``pendingWriteBytes`` drops to 0.
    public var onDrain: DrainCallback?
    /// Bytes queued with ``write(_:)`` whose write callback has not run yet.
    public private(set) var pendingWriteBytes = 0
    /// Bytes read and written over the stream's life.
    public private(set) var bytesRead = 0
    public private(set) var bytesWritten = 0
    public private(set) var isReading = false

    override init(loop: EventLoop) {
        super.init(loop: loop)
    }

    override func willClose() {
        isReading = false
        drainTimer?.close()
        drainTimer = nil
    }

    override func didClose() {
        onRead = nil
        onEnd = nil
        onDrain = nil
    }

    /// Starts reading (`uv_read_start`). The callbacks are kept until the stream is closed.
    public func startReading(onRead: @escaping ReadCallback, onEnd: @escaping EndCallback) throws(UVError) {
        precondition(state == .open, "TCPStream.startReading after close()")
        self.onRead = onRead
        self.onEnd = onEnd
        try resumeReading()
    }

    /// Starts reading again after ``pauseReading()`` (backpressure).
    public func resumeReading() throws(UVError) {
        guard state == .open, !isReading else { return }
        try check(
            uv_read_start(
                CLibUV_tcp_as_stream(handle),
                { handle, _, buffer in TCPStream.allocate(handle, buffer) },
                { stream, count, buffer in TCPStream.read(stream, count) }), "uv_read_start")
        isReading = true
    }

    /// Stops reading until ``resumeReading()`` (`uv_read_stop`).
    public func pauseReading() {
        guard state == .open, isReading else { return }
        uv_read_stop(CLibUV_tcp_as_stream(handle))
        isReading = false
    }

    /// Queues `bytes` for writing (`uv_write`); the bytes are copied. A failed write is reported to the end
    /// callback, then closes the stream (its other queued writes are cancelled).
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard state == .open, bytes.count > 0 else { return }
        var gather = TCPWriteGather(capacity: bytes.count)
        gather.append(bytes)
        issue(gather)
    }

    /// Queues for writing, as one `uv_write`, the bytes `fill` appends to the gather (each copied once, straight
    /// into the write's own block; nothing is written when it appends nothing). The block starts at the size of
    /// the last gathered write and grows when needed.
    public func write(gathering fill: (inout TCPWriteGather) -> Void) {
        var gather = TCPWriteGather(capacity: max(lastGatheredBytes, 4096))
        fill(&gather)
        lastGatheredBytes = gather.count
        guard state == .open, gather.count > 0 else {
            gather.block.deallocate()
            return
        }
        issue(gather)
    }

    /// The size of the last ``write(gathering:)``: the next one's first block.
    private var lastGatheredBytes = 0

    private func issue(_ gather: TCPWriteGather) {
        let block = gather.block
        let count = gather.count
        let request = block.bindMemory(to: uv_write_t.self, capacity: 1)
        request.initialize(to: uv_write_t())
        var buffer = uv_buf_init((block + TCPWriteGather.header).assumingMemoryBound(to: CChar.self), UInt32(count))
        uv_req_set_data(UnsafeMutableRawPointer(request).assumingMemoryBound(to: uv_req_t.self),
            UnsafeMutableRawPointer(bitPattern: count))
        let status = uv_write(request, CLibUV_tcp_as_stream(handle), &buffer, 1) { request, status in
            TCPStream.written(request, status)
        }
        if status != 0 {
            request.deinitialize(count: 1)
            block.deallocate()
            fail(UVError(code: status, operation: "uv_write"))
            return
        }
        pendingWriteBytes += count
    }

    /// Stops both directions and closes once queued writes are flushed (`uv_shutdown` is not needed
    /// for HTTP/2: a GOAWAY is written first, then the stream closes when drained), or after
    /// `withinMillis` whatever is left (a peer that never reads cannot keep the handle open; closing
    /// cancels the queued writes).
    /// The read and end callbacks are dropped here (nothing more is read; the owner asked for the end), so
    /// closures that capture their owner strongly do not outlive it.
    public func closeWhenDrained(withinMillis: UInt64 = TCPStream.defaultDrainMillis) {
        guard state == .open else { return }
        pauseReading()
        onRead = nil
        onEnd = nil
        if pendingWriteBytes == 0 {
            close()
            return
        }
        onDrain = { $0.close() }
        guard drainTimer == nil else { return }
        let timer = Timer(loop: loop) { [unowned self] _ in
            self.drainDeadlinesMissed += 1
            self.close()
        }
        timer.start(afterMillis: withinMillis)
        drainTimer = timer
    }

    /// How long ``closeWhenDrained(withinMillis:)`` waits by default for queued writes.
    public static let defaultDrainMillis: UInt64 = 5000
    /// The drain deadline's timer, while one runs (closed with the stream).
    private var drainTimer: Timer?
    /// 1 when the stream was closed by its drain deadline with writes still queued.
    public private(set) var drainDeadlinesMissed = 0

    /// A read or write failed, or the peer ended its side: the owner is told, then the stream closes (a failed
    /// stream at once, cancelling its queued writes; an ended one once what is queued has been written, within
    /// the drain deadline), whatever the owner did.
    private func fail(_ error: UVError?) {
        guard state == .open else { return }
        let end = onEnd
        pauseReading()
        end?(self, error)
        if error != nil {
            close()
        } else {
            closeWhenDrained()
        }
    }

    private static func allocate(
        _ handle: UnsafeMutablePointer<uv_handle_t>?, _ buffer: UnsafeMutablePointer<uv_buf_t>?
    ) {
        guard let handle, let buffer, let data = uv_handle_get_data(handle) else { return }
        let owner = Unmanaged<TCPHandle>.fromOpaque(data).takeUnretainedValue()
        buffer.pointee = uv_buf_init(
            owner.loop.readBuffer.assumingMemoryBound(to: CChar.self), UInt32(EventLoop.readBufferBytes))
    }

    private static func read(_ stream: UnsafeMutablePointer<uv_stream_t>?, _ count: Int) {
        guard let owner = TCPHandle.owner(stream) as? TCPStream else { return }
        if count > 0 {
            owner.bytesRead += count
            owner.onRead?(owner, UnsafeRawBufferPointer(start: owner.loop.readBuffer, count: count))
        } else if count < 0 {
            owner.fail(count == Int(UV_EOF.rawValue) ? nil : UVError(code: Int32(count), operation: "uv_read"))
        }
    }

    private static func written(_ request: UnsafeMutablePointer<uv_write_t>?, _ status: Int32) {
        guard let request else { return }
        let count = Int(bitPattern: uv_req_get_data(
            UnsafeMutableRawPointer(request).assumingMemoryBound(to: uv_req_t.self)))
        let stream = request.pointee.handle
        request.deinitialize(count: 1)
        UnsafeMutableRawPointer(request).deallocate()
        guard let owner = TCPHandle.owner(stream) as? TCPStream else { return }
        owner.pendingWriteBytes -= count
        owner.bytesWritten += status == 0 ? count : 0
        if status != 0 && status != UV_ECANCELED.rawValue {
            owner.fail(UVError(code: status, operation: "uv_write"))
        } else if owner.pendingWriteBytes == 0, owner.state == .open, let drain = owner.onDrain {
            drain(owner)
        }
    }
}

/// The bytes of one write being gathered (``TCPStream/write(gathering:)``): one block holds the `uv_write_t`, then
/// the bytes, so that the write costs one allocation and each byte one copy.
public struct TCPWriteGather {
    /// The request's room at the block's start (16-byte aligned).
    static let header = (MemoryLayout<uv_write_t>.size + 15) & ~15
    fileprivate(set) var block: UnsafeMutableRawPointer
    private var capacity: Int
    /// Bytes gathered so far.
    public private(set) var count = 0

    init(capacity: Int) {
        self.capacity = capacity
        block = UnsafeMutableRawPointer.allocate(byteCount: TCPWriteGather.header + capacity, alignment: 16)
    }

    /// Appends a copy of `bytes`.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        if count + bytes.count > capacity {
            let grown = max(capacity * 2, count + bytes.count)
            let larger = UnsafeMutableRawPointer.allocate(byteCount: TCPWriteGather.header + grown, alignment: 16)
            (larger + TCPWriteGather.header).copyMemory(from: block + TCPWriteGather.header, byteCount: count)
            block.deallocate()
            block = larger
            capacity = grown
        }
        (block + TCPWriteGather.header + count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        count += bytes.count
    }
}

/// Sockets bound to one address with `SO_REUSEPORT`, one per event loop (libuv 1.44 has no flag for it, so they
/// are made here and handed to ``TCPListener/init(loop:socket:backlog:_:)``). With port 0 the first one picks a
/// free port and the others bind the same.
public enum ReusePortSockets {
    public static func bind(host: String, port: Int, count: Int) throws(UVError) -> (sockets: [Int32], port: Int) {
        precondition(count >= 1)
        var storage = sockaddr_storage()
        let family: Int32
        let length: socklen_t
        if host.contains(":") {
            family = AF_INET6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            _ = try withUnsafeMutablePointer(to: &storage) { p throws(UVError) in
                try check(uv_ip6_addr(host, Int32(port), UnsafeMutableRawPointer(p).assumingMemoryBound(to: sockaddr_in6.self)),
                    "uv_ip6_addr")
            }
        } else {
            family = AF_INET
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = try withUnsafeMutablePointer(to: &storage) { p throws(UVError) in
                try check(uv_ip4_addr(host, Int32(port), UnsafeMutableRawPointer(p).assumingMemoryBound(to: sockaddr_in.self)),
                    "uv_ip4_addr")
            }
        }
        var sockets: [Int32] = []
        var bound = port
        do throws(UVError) {
            for _ in 0..<count {
                let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard fd >= 0 else { throw UVError(code: -errno, operation: "socket") }
                sockets.append(fd)
                var one: Int32 = 1
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
                guard setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
                    throw UVError(code: -errno, operation: "setsockopt(SO_REUSEPORT)")
                }
                withUnsafeMutablePointer(to: &storage) { p in
                    let port = UInt16(bound).bigEndian
                    if family == AF_INET6 {
                        UnsafeMutableRawPointer(p).assumingMemoryBound(to: sockaddr_in6.self).pointee.sin6_port = port
                    } else {
                        UnsafeMutableRawPointer(p).assumingMemoryBound(to: sockaddr_in.self).pointee.sin_port = port
                    }
                }
                let status = withUnsafePointer(to: &storage) { p in
                    p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
                }
                guard status == 0 else { throw UVError(code: -errno, operation: "bind") }
                if bound == 0 {
                    var local = sockaddr_storage()
                    var size = socklen_t(MemoryLayout<sockaddr_storage>.size)
                    _ = withUnsafeMutablePointer(to: &local) { p in
                        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &size) }
                    }
                    bound = withUnsafePointer(to: &local) { p in
                        p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
                    }
                }
            }
        } catch {
            for fd in sockets { Glibc.close(fd) }
            throw error
        }
        return (sockets, bound)
    }
}
