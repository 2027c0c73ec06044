internal import CZlib

/// DEFLATE in the zlib format (RFC 1950), through the system's zlib — what HdrHistogram's compressed
/// histogram encoding uses. zlib rather than compress-nio: it is one C call each way and needs no
/// NIO buffers; Debian ships it (`zlib1g-dev`).
public enum Zlib {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Compresses `input` at zlib's default level (as the reference implementations do).
    public static func compress(_ input: [UInt8]) -> [UInt8] {
        var length = compressBound(uLong(input.count))
        var output = [UInt8](repeating: 0, count: Int(length))
        let status = output.withUnsafeMutableBufferPointer { out in
            input.withUnsafeBufferPointer { inp in
                compress2(out.baseAddress, &length, inp.baseAddress, uLong(inp.count), Z_DEFAULT_COMPRESSION)
            }
        }
        precondition(status == Z_OK, "zlib compress2 failed with \(status)")
        output.removeLast(output.count - Int(length))
        return output
    }

    /// Inflates a zlib stream whose uncompressed size is not known in advance.
    public static func decompress(_ input: [UInt8]) throws(Failure) -> [UInt8] {
        var stream = z_stream()
        guard CZlib_inflateInit(&stream) == Z_OK else { throw Failure(description: "inflateInit failed") }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        var status: Int32 = Z_OK
        var input = input
        input.withUnsafeMutableBufferPointer { inp in
            stream.next_in = inp.baseAddress
            stream.avail_in = uInt(inp.count)
            while status == Z_OK {
                chunk.withUnsafeMutableBufferPointer { out in
                    stream.next_out = out.baseAddress
                    stream.avail_out = uInt(out.count)
                    status = inflate(&stream, Z_NO_FLUSH)
                    output.append(contentsOf: out[0..<(out.count - Int(stream.avail_out))])
                }
                if status == Z_BUF_ERROR && stream.avail_in == 0 { break }
            }
        }
        guard status == Z_STREAM_END else {
            throw Failure(description: "not a complete zlib stream (status \(status))")
        }
        return output
    }
}
