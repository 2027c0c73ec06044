internal import CLibUV

#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 address and port, in a `sockaddr_storage`: what a listener binds (``TCPListener``,
/// ``ReusePortSockets``) and a client connects to (``TCPStream/connect(loop:host:port:_:)``).
public struct SocketAddress: Sendable {
    /// A `sockaddr_in` or `sockaddr_in6`, by ``isIPv6``.
    private(set) var storage: sockaddr_storage

    /// Parses `host`, an IPv4 literal (`"127.0.0.1"`) or an IPv6 one (`"::1"`, `"fe80::1%eth0"`; anything with a
    /// colon is read as IPv6), with `port` (`uv_ip4_addr`, `uv_ip6_addr`; no name lookup, see
    /// ``TCPStream/resolve(_:loop:)``).
    ///
    /// - Throws: ``UVError`` `EINVAL` for a host that is not an address literal or a port outside 0...65535.
    public init(host: String, port: Int) throws(UVError) {
        let isIPv6 = host.contains(":")
        let operation: StaticString = isIPv6 ? "uv_ip6_addr" : "uv_ip4_addr"
        guard (0...Int(UInt16.max)).contains(port) else {
            throw UVError(code: UVError.invalidArgumentCode, operation: operation.description)
        }
        var storage = sockaddr_storage()
        let status = withUnsafeMutableBytes(of: &storage) { bytes in
            if isIPv6 {
                uv_ip6_addr(host, Int32(port), bytes.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self))
            } else {
                uv_ip4_addr(host, Int32(port), bytes.baseAddress!.assumingMemoryBound(to: sockaddr_in.self))
            }
        }
        try check(status, operation)
        self.storage = storage
    }

    /// An address the kernel filled in (`getsockname` and the like).
    init(storage: sockaddr_storage) {
        self.storage = storage
    }

    /// Whether this is an IPv6 address (`AF_INET6`); otherwise IPv4.
    public var isIPv6: Bool { Int32(storage.ss_family) == AF_INET6 }

    /// The address family, `AF_INET` or `AF_INET6`.
    var family: Int32 { Int32(storage.ss_family) }

    /// The size of the `sockaddr_in` or `sockaddr_in6` (for `bind` and the like).
    var length: socklen_t {
        socklen_t(isIPv6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
    }

    /// The port, in host byte order.
    public var port: Int {
        get {
            withUnsafeBytes(of: storage) { bytes in
                let port = isIPv6
                    ? bytes.load(as: sockaddr_in6.self).sin6_port : bytes.load(as: sockaddr_in.self).sin_port
                return Int(UInt16(bigEndian: port))
            }
        }
        set {
            precondition((0...Int(UInt16.max)).contains(newValue), "SocketAddress.port out of range: \(newValue)")
            let port = UInt16(newValue).bigEndian
            let isIPv6 = isIPv6
            withUnsafeMutableBytes(of: &storage) { bytes in
                if isIPv6 {
                    bytes.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self).pointee.sin6_port = port
                } else {
                    bytes.baseAddress!.assumingMemoryBound(to: sockaddr_in.self).pointee.sin_port = port
                }
            }
        }
    }

    /// The address without the port, numeric (`uv_ip4_name`, `uv_ip6_name`): `"127.0.0.1"`, `"::1"`.
    public var host: String {
        var name = [CChar](repeating: 0, count: 64)
        withSockaddr { address in
            if isIPv6 {
                address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { _ = uv_ip6_name($0, &name, name.count) }
            } else {
                address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { _ = uv_ip4_name($0, &name, name.count) }
            }
        }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Calls `body` with the address as a `sockaddr` (valid during the call only).
    func withSockaddr<Result, Failure: Error>(
        _ body: (UnsafePointer<sockaddr>) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var storage = storage
        return try withUnsafeMutablePointer(to: &storage) { pointer throws(Failure) in
            try body(UnsafeRawPointer(pointer).assumingMemoryBound(to: sockaddr.self))
        }
    }

    /// The local address of `fd` (`getsockname`), or `nil`.
    static func local(of fd: Int32) -> SocketAddress? {
        var storage = sockaddr_storage()
        var size = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &size) }
        }
        return status == 0 ? SocketAddress(storage: storage) : nil
    }
}
