#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A write to a file that failed: which file, what the system said.
public struct FileWriteError: Error, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String { "cannot write \(path): \(reason)" }

    init(_ path: String, errno code: Int32) {
        self.path = path
        reason = String(cString: strerror(code))
    }
}

/// A large file written as it is produced, in bounded chunks: the producer appends to a buffer of its own and hands
/// it to `write` each time it holds `chunkBytes` or more (POSIX `write`, the buffer emptied), so memory stays at one
/// chunk whatever the file's size. The bytes go to a temporary name in the same folder; `commit` renames it into
/// place, so the final name holds a whole file or nothing (a failed or abandoned file is removed). Confined to one
/// thread, but for `write(_:at:)`: threads writing their own ranges of one file at once.
public final class StreamedFile {
    public static let chunkBytes = 1 << 20

    public let path: String
    public let temporaryPath: String
    /// Bytes written to the file so far.
    public private(set) var bytesWritten = 0
    /// Counts the bytes as they are written (a progress line), when set.
    public var progress: ProgressCounter?
    private var fd: Int32
    private var finished = false

    /// Creates (truncates) the temporary file `.NAME.tmp-PID[-TAG]` next to `path`.
    public init(path: String, tag: String = "", progress: ProgressCounter? = nil) throws(FileWriteError) {
        self.path = path
        self.progress = progress
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        temporaryPath = folder + "." + name + ".tmp-\(getpid())" + (tag.isEmpty ? "" : "-" + tag)
        fd = open(temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FileWriteError(path, errno: errno) }
    }

    deinit { if !finished { discard() } }

    /// Writes out `chunk` and empties it (its capacity kept for the next one).
    public func write(_ chunk: inout [UInt8]) throws(FileWriteError) {
        let count = chunk.count
        guard count > 0 else { return }
        let failure: Int32? = chunk.withUnsafeBytes { Self.writeAll(fd, $0) }
        if let failure { throw FileWriteError(path, errno: failure) }
        chunk.removeAll(keepingCapacity: true)
        bytesWritten += count
        progress?.add(count)
    }

    /// Writes `chunk` at `offset` (POSIX `pwrite`, the file position untouched) and empties it: several threads may
    /// each write their own range of the file at once (each with its own chunk). Not counted in `bytesWritten`.
    public func write(_ chunk: inout [UInt8], at offset: Int) throws(FileWriteError) {
        let count = chunk.count
        var done = 0
        while done < count {
            let n = chunk.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, count - done, off_t(offset + done)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileWriteError(path, errno: errno)
            }
            done += n
        }
        chunk.removeAll(keepingCapacity: true)
        progress?.add(count)
    }

    /// Closes the file and renames it into place (write the last chunk first).
    public func commit() throws(FileWriteError) {
        guard !finished else { return }
        finished = true
        let closed = close(fd)
        fd = -1
        if closed != 0 {
            let code = errno
            unlink(temporaryPath)
            throw FileWriteError(path, errno: code)
        }
        if rename(temporaryPath, path) != 0 {
            let code = errno
            unlink(temporaryPath)
            throw FileWriteError(path, errno: code)
        }
    }

    /// Closes and removes the temporary file; nothing appears under the final name.
    public func discard() {
        guard !finished else { return }
        finished = true
        if fd >= 0 { close(fd) }
        fd = -1
        unlink(temporaryPath)
    }

    /// The errno of a failed write, nil when every byte went out.
    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let n = systemWrite(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += n
        }
        return nil
    }
}

/// POSIX `write` (the name `write` inside `StreamedFile` is its own method).
private func systemWrite(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, bytes, count)
}
