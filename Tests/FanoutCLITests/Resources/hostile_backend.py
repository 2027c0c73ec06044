"""A misbehaving backend for fanout's trigger and registration POSTs (BackendFailureTests).

    python3 hostile_backend.py MODE PORTFILE LOG [--cert C --key K]

MODE: hang (reads each request and never answers; the connection stays open until the client closes it),
partial (answers `HTTP/1.1 200 OK` with `Content-Length: 100`, sends 10 bytes of the body and closes), close
(reads the request and closes the connection without a byte), reset (reads the request and resets the
connection: SO_LINGER 0, an RST), plain (a plain-HTTP server that answers whatever
bytes arrive first, a TLS ClientHello too, with `400 Bad Request` and closes; http.server instead waits for a
newline the ClientHello may not hold), 500 (answers every request at once with `500 Internal Server Error`,
keep-alive; quiet when the client resets). With --cert and --key it speaks TLS (no ALPN).
Binds 127.0.0.1:0 and writes the port to PORTFILE. Each request read is one JSON line in LOG: {"t": arrival UNIX
time, "path"}. Runs until killed.
"""
import asyncio
import json
import os
import socket
import ssl
import struct
import sys
import time

args = sys.argv[1:]
mode, port_file, log_path = args[0], args[1], args[2]
opts = dict(zip(args[3::2], args[4::2]))
log = open(log_path, "a", buffering=1)
held = []


async def handle(reader, writer):
    try:
        if mode == "plain":
            await reader.read(1)
            log.write(json.dumps({"t": time.time(), "path": ""}) + "\n")
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            return
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if length:
                await reader.readexactly(length)
            parts = lines[0].split(b" ")
            log.write(json.dumps({"t": time.time(), "path": parts[1].decode() if len(parts) > 1 else ""}) + "\n")
            if mode == "hang":
                held.append(writer)
                await reader.read()  # until the client gives up and closes
                break
            if mode == "500":
                writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                continue
            if mode == "reset":
                writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                           struct.pack("ii", 1, 0))
                break
            if mode == "partial":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                             + b'{"ok":true')
                await writer.drain()
            break
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


def write_port(port):
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(port_file + ".tmp", port_file)


async def main():
    context = None
    if "--cert" in opts:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(opts["--cert"], opts["--key"])
    # Failed handshakes are the point here: not worth a traceback on stderr.
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: None)
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context, backlog=1024)
    write_port(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


asyncio.run(main())
