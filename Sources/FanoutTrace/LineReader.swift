#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Streams a file line by line through one reusable buffer (a million-line trace is never held in
/// memory at once). Lines are handed out without their `\n`.
public struct LineReader: ~Copyable {
    private let fd: Int32
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private var eof = false
    public let path: String

    public init(path: String, chunkBytes: Int = 1 << 20) throws(FileError) {
        self.path = path
        fd = open(path, O_RDONLY)
        if fd < 0 { throw FileError(path: path, String(cString: strerror(errno))) }
        buffer = [UInt8](repeating: 0, count: chunkBytes)
    }

    deinit { close(fd) }

    /// Calls `body` with the next line; returns false at the end of the file.
    public mutating func nextLine(_ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        while true {
            if let newline = findNewline() {
                let lineStart = start
                start = newline + 1
                try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[lineStart..<newline])) }
                return true
            }
            if eof {
                guard start < end else { return false }
                let lineStart = start
                let lineEnd = end
                start = end
                try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[lineStart..<lineEnd])) }
                return true
            }
            try fill()
        }
    }

    private func findNewline() -> Int? {
        guard start < end else { return nil }
        return buffer.withUnsafeBytes { bytes -> Int? in
            guard let found = memchr(bytes.baseAddress! + start, 0x0A, end - start) else { return nil }
            return UnsafeRawPointer(found) - bytes.baseAddress!
        }
    }

    private mutating func fill() throws(FileError) {
        // Move the partial line to the front; grow when one line fills the whole buffer.
        if start > 0 {
            let remaining = end - start
            buffer.withUnsafeMutableBytes { bytes in
                let base = bytes.baseAddress!
                base.copyMemory(from: base + start, byteCount: remaining)
            }
            end = remaining
            start = 0
        }
        if end == buffer.count { buffer.append(contentsOf: repeatElement(0, count: buffer.count)) }
        let count = buffer.withUnsafeMutableBytes { bytes in
            read(fd, bytes.baseAddress! + end, bytes.count - end)
        }
        if count < 0 { throw FileError(path: path, String(cString: strerror(errno))) }
        if count == 0 { eof = true }
        end += count
    }
}
