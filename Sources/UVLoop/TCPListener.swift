internal import CLibUV

/// What a TCP listener and a TCP stream share: one `uv_tcp_t` (`uv_tcp_init`), with the lifecycle of every
/// ``UVHandle``.
public class TCPHandle: UVHandle {
    init(loop: EventLoop) {
        do {
            try super.init(loop: loop, uv_tcp_t(), "uv_tcp_init") { loop, tcp in uv_tcp_init(loop, tcp) }
        } catch {
            // uv_tcp_init fails only on an unsupported address family (AF_UNSPEC here: never).
            preconditionFailure("libuv call failed unexpectedly: \(error)")
        }
    }

    final var tcp: UnsafeMutablePointer<uv_tcp_t> { raw(uv_tcp_t.self) }

    final var stream: UnsafeMutablePointer<uv_stream_t> { CLibUV_tcp_as_stream(tcp) }

    /// The local port the handle is bound to (`uv_tcp_getsockname`); 0 when unknown.
    public final var localPort: Int {
        guard state == .open else { return 0 }
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getsockname(tcp, $0, &length) }
        }
        return status == 0 ? SocketAddress(storage: storage).port : 0
    }
}

/// A listening TCP socket (`uv_listen`). Each accepted connection becomes a ``TCPStream`` handed
/// to the callback, which owns it from then on (it must close it).
public final class TCPListener: TCPHandle {
    public typealias Callback = (TCPStream) -> Void
    private var callback: Callback?
    /// Connections that failed before they could be accepted (`uv_accept` or the listen status).
    public private(set) var acceptErrors = 0

    /// Binds `host:port` (IPv4 or IPv6 literal, see ``SocketAddress``; port 0 picks a free one, see
    /// ``TCPHandle/localPort``) and listens. On failure the handle is closed and the error thrown (no handle is
    /// opened for an address that does not parse).
    public init(loop: EventLoop, host: String, port: Int, backlog: Int32 = 1024, _ callback: @escaping Callback)
        throws(UVError)
    {
        let address = try SocketAddress(host: host, port: port)
        self.callback = callback
        super.init(loop: loop)
        do {
            try check(address.withSockaddr { uv_tcp_bind(tcp, $0, 0) }, "uv_tcp_bind")
            try listen(backlog)
        } catch {
            close()
            throw error
        }
    }

    /// Listens on a socket bound by ``ReusePortSockets`` (`uv_tcp_open`, then `uv_listen`): one per loop, so
    /// the kernel spreads new connections over the loops (`SO_REUSEPORT`). The handle owns the socket from
    /// here on (closing it closes the socket); on failure it is closed and the error thrown.
    public init(loop: EventLoop, socket fd: Int32, backlog: Int32 = 1024, _ callback: @escaping Callback)
        throws(UVError)
    {
        self.callback = callback
        super.init(loop: loop)
        do {
            try check(uv_tcp_open(tcp, uv_os_sock_t(fd)), "uv_tcp_open")
            try listen(backlog)
        } catch {
            close()
            throw error
        }
    }

    private func listen(_ backlog: Int32) throws(UVError) {
        try check(uv_listen(stream, backlog) { server, status in TCPListener.connection(server, status) }, "uv_listen")
    }

    override func didClose() { callback = nil }

    private static func connection(_ server: UnsafeMutablePointer<uv_stream_t>?, _ status: Int32) {
        UVHandle.owner(server, TCPListener.self).accept(status)
    }

    private func accept(_ status: Int32) {
        guard state == .open else { return }
        guard status == 0 else {
            acceptErrors += 1
            return
        }
        let accepted = TCPStream(loop: loop)
        guard uv_accept(stream, accepted.stream) == 0 else {
            acceptErrors += 1
            accepted.close()
            return
        }
        uv_tcp_nodelay(accepted.tcp, 1)
        callback?(accepted)
    }
}
