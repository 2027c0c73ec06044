#if canImport(Glibc)
import Glibc
#endif

/// Sockets bound to one address with `SO_REUSEPORT`, one per event loop (libuv 1.44 has no flag for it, so they
/// are made here and handed to ``TCPListener/init(loop:socket:backlog:_:)``). With port 0 the first one picks a
/// free port and the others bind the same.
public enum ReusePortSockets {
    public static func bind(host: String, port: Int, count: Int) throws(UVError) -> (sockets: [Int32], port: Int) {
        precondition(count >= 1)
        var address = try SocketAddress(host: host, port: port)
        var sockets: [Int32] = []
        do throws(UVError) {
            for _ in 0..<count {
                let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard fd >= 0 else { throw UVError(code: -errno, operation: "socket") }
                sockets.append(fd)
                var one: Int32 = 1
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
                guard setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
                    throw UVError(code: -errno, operation: "setsockopt(SO_REUSEPORT)")
                }
                let length = address.length
                guard address.withSockaddr({ Glibc.bind(fd, $0, length) }) == 0 else {
                    throw UVError(code: -errno, operation: "bind")
                }
                // Port 0: the first socket's port, for the others.
                if address.port == 0, let local = SocketAddress.local(of: fd) { address.port = local.port }
            }
        } catch {
            for fd in sockets { Glibc.close(fd) }
            throw error
        }
        return (sockets, address.port)
    }
}
