"""A stand-in for a user's backend, receiving fanout's trigger and registration POSTs (docs/INGEST.md §5).

    python3 trigger_backend.py MODE PORTFILE LOG [--delay S] [--status N] [--fail-first N] [--cert C --key K]

MODE: h1 (http.server, HTTP/1.1 keep-alive), h2c (the `h2` library, prior knowledge), h2tls (h2 over TLS, ALPN
h2), silent (accepts connections, reads and discards, never writes a byte: not even a TLS handshake). Binds 127.0.0.1:0 and writes the port to PORTFILE. Each request is one JSON line in LOG at arrival:
{"t": arrival UNIX time, "path", "version": "1.1" | "2", "inflight": requests received and not answered yet
(this one included), "body": the parsed JSON body (or the text if it does not parse), "peer": the client's port
(h1 only: which connection it came on)}. Every answer waits
--delay seconds and carries --status (default 200); with --fail-first N the first N requests get 503.
Runs until killed.
"""
import asyncio
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = sys.argv[1:]
mode, port_file, log_path = args[0], args[1], args[2]
opts = {}
i = 3
while i < len(args):
    opts[args[i]] = args[i + 1]
    i += 2
delay = float(opts.get("--delay", "0"))
status = int(opts.get("--status", "200"))
fail_first = int(opts.get("--fail-first", "0"))

lock = threading.Lock()
state = {"inflight": 0, "seen": 0}
log = open(log_path, "a", buffering=1)


def arrived(path, version, body, peer=None):
    with lock:
        state["inflight"] += 1
        state["seen"] += 1
        n = state["seen"]
        try:
            parsed = json.loads(body)
        except Exception:
            parsed = body.decode("utf-8", "replace")
        line = {"t": time.time(), "path": path, "version": version, "inflight": state["inflight"], "body": parsed}
        if peer is not None:
            line["peer"] = peer
        log.write(json.dumps(line) + "\n")
    return 503 if n <= fail_first else status


def answered():
    with lock:
        state["inflight"] -= 1


def write_port(port):
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    import os
    os.rename(port_file + ".tmp", port_file)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        code = arrived(self.path, "1.1", body, self.client_address[1])
        time.sleep(delay)
        answered()
        payload = b'{"ok":true}'
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def serve_h1():
    ThreadingHTTPServer.daemon_threads = True
    # A burst of new connections (one per request in flight) must not overflow the listen backlog (default 5).
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    write_port(server.server_address[1])
    server.serve_forever()


async def serve_h2(tls):
    import h2.config
    import h2.connection
    import h2.events

    async def handle(reader, writer):
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        streams = {}

        async def answer(stream_id, path, body):
            code = arrived(path, "2", body)
            await asyncio.sleep(delay)
            answered()
            payload = b'{"ok":true}'
            try:
                conn.send_headers(stream_id, [(":status", str(code)), ("content-type", "application/json"),
                                              ("content-length", str(len(payload)))])
                conn.send_data(stream_id, payload, end_stream=True)
                writer.write(conn.data_to_send())
                await writer.drain()
            except Exception:
                pass

        while True:
            data = await reader.read(65536)
            if not data:
                break
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    headers = dict((k.decode() if isinstance(k, bytes) else k, v.decode() if isinstance(v, bytes) else v)
                                   for k, v in event.headers)
                    streams[event.stream_id] = [headers.get(":path", ""), b""]
                    if event.stream_ended:
                        path, body = streams.pop(event.stream_id)
                        asyncio.ensure_future(answer(event.stream_id, path, body))
                elif isinstance(event, h2.events.DataReceived):
                    streams[event.stream_id][1] += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    if event.stream_ended:
                        path, body = streams.pop(event.stream_id)
                        asyncio.ensure_future(answer(event.stream_id, path, body))
                elif isinstance(event, h2.events.StreamEnded):
                    if event.stream_id in streams:
                        path, body = streams.pop(event.stream_id)
                        asyncio.ensure_future(answer(event.stream_id, path, body))
            writer.write(conn.data_to_send())
            await writer.drain()
        writer.close()

    context = None
    if tls:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(opts["--cert"], opts["--key"])
        context.set_alpn_protocols(["h2"])
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context, backlog=1024)
    write_port(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def serve_silent():
    import socket
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    write_port(listener.getsockname()[1])

    def drain(conn):
        with conn:
            while conn.recv(65536):
                pass

    while True:
        conn, _ = listener.accept()
        threading.Thread(target=drain, args=(conn,), daemon=True).start()


if mode == "silent":
    serve_silent()
elif mode == "h1":
    serve_h1()
else:
    asyncio.run(serve_h2(mode == "h2tls"))
