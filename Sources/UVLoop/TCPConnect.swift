internal import CLibUV

#if canImport(Glibc)
import Glibc
#endif

/// The client side of a ``TCPStream``: `uv_tcp_connect`, and a blocking name lookup for the start of a run.
extension TCPStream {
    /// The connection is up (the stream, not reading yet) or failed (the error; the stream is closed by then).
    public typealias ConnectCallback = (Result<TCPStream, UVError>) -> Void

    /// Connects to `host:port` (an IPv4 or IPv6 literal; see ``resolve(_:)`` for names). The stream is returned
    /// at once so the caller can give up by closing it (the callback then gets `ECANCELED`); the callback runs
    /// exactly once, on the loop. A bad address throws (no handle is left open); a refused or unreachable peer
    /// is the callback's error, and the stream is closed before it runs.
    @discardableResult
    public static func connect(loop: EventLoop, host: String, port: Int, _ callback: @escaping ConnectCallback)
        throws(UVError) -> TCPStream
    {
        let address = try SocketAddress(host: host, port: port)
        let stream = TCPStream(loop: loop)
        let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
        request.initialize(to: uv_connect_t())
        let box = Unmanaged.passRetained(ConnectBox(callback)).toOpaque()
        uv_req_set_data(CLibUV_connect_as_req(request), box)
        let status = address.withSockaddr { address in
            uv_tcp_connect(request, stream.tcp, address) { request, status in TCPStream.connected(request, status) }
        }
        if status != 0 {
            Unmanaged<ConnectBox>.fromOpaque(box).release()
            request.deinitialize(count: 1)
            request.deallocate()
            stream.close()
            throw UVError(code: status, operation: "uv_tcp_connect")
        }
        return stream
    }

    private static func connected(_ request: UnsafeMutablePointer<uv_connect_t>?, _ status: Int32) {
        guard let request, let data = uv_req_get_data(CLibUV_connect_as_req(request)) else {
            preconditionFailure("connect callback without its request")
        }
        let box = Unmanaged<ConnectBox>.fromOpaque(data).takeRetainedValue()
        let handle = request.pointee.handle
        request.deinitialize(count: 1)
        request.deallocate()
        let stream = UVHandle.owner(handle, TCPStream.self)
        if status == 0, !stream.isClosed {
            uv_tcp_nodelay(stream.tcp, 1)
            box.callback(.success(stream))
        } else {
            stream.close()
            box.callback(.failure(UVError(code: status == 0 ? UV_ECANCELED.rawValue : status,
                operation: "uv_tcp_connect")))
        }
    }

    /// The numeric address for `host` (`uv_getaddrinfo` without a callback, which blocks: for the start of a run,
    /// not for the loop's hot path); an IP literal comes back unchanged. IPv4 is preferred when both exist.
    public static func resolve(_ host: String, loop: EventLoop) throws(UVError) -> String {
        var numeric = [UInt8](repeating: 0, count: 16)
        if host.contains(":") || uv_inet_pton(AF_INET, host, &numeric) == 0 { return host }
        var request = uv_getaddrinfo_t()
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        try check(uv_getaddrinfo(loop.pointer, &request, nil, host, nil, &hints), "uv_getaddrinfo")
        defer { uv_freeaddrinfo(request.addrinfo) }
        var best: String?
        var entry = request.addrinfo
        while let current = entry {
            var name = [CChar](repeating: 0, count: 64)
            if current.pointee.ai_family == AF_INET {
                current.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    _ = uv_ip4_name($0, &name, name.count)
                }
                return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            } else if current.pointee.ai_family == AF_INET6, best == nil {
                current.pointee.ai_addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    _ = uv_ip6_name($0, &name, name.count)
                }
                best = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            entry = current.pointee.ai_next
        }
        guard let best else { throw UVError(code: UV_EAI_NONAME.rawValue, operation: "uv_getaddrinfo") }
        return best
    }
}

private final class ConnectBox {
    let callback: TCPStream.ConnectCallback
    init(_ callback: @escaping TCPStream.ConnectCallback) { self.callback = callback }
}
