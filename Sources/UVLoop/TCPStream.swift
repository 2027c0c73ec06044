internal import CLibUV

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
        preconditionOpen("startReading")
        self.onRead = onRead
        self.onEnd = onEnd
        try resumeReading()
    }

    /// Starts reading again after ``pauseReading()`` (backpressure).
    public func resumeReading() throws(UVError) {
        guard state == .open, !isReading else { return }
        try check(
            uv_read_start(
                stream,
                { handle, _, buffer in TCPStream.allocate(handle, buffer) },
                { stream, count, buffer in TCPStream.read(stream, count) }), "uv_read_start")
        isReading = true
    }

    /// Stops reading until ``resumeReading()`` (`uv_read_stop`).
    public func pauseReading() {
        guard state == .open, isReading else { return }
        uv_read_stop(stream)
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
        let status = uv_write(request, stream, &buffer, 1) { request, status in
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
        guard let buffer else { return }
        let owner = UVHandle.owner(handle, TCPStream.self)
        buffer.pointee = uv_buf_init(
            owner.loop.readBuffer.assumingMemoryBound(to: CChar.self), UInt32(EventLoop.readBufferBytes))
    }

    private static func read(_ stream: UnsafeMutablePointer<uv_stream_t>?, _ count: Int) {
        let owner = UVHandle.owner(stream, TCPStream.self)
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
        let owner = UVHandle.owner(stream, TCPStream.self)
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
