"""A small HTTP/2 server (Python's `h2` library, prior knowledge) for H2ClientConnection's tests; nobody here wrote
its HTTP/2 side. Binds 127.0.0.1:0, prints the port. MODE:
  apns     answer each request 200 with apns-id = the request's apns-id, except a path ending in /bad: 400 with
           {"reason":"BadDeviceToken"}; advertises SETTINGS_MAX_CONCURRENT_STREAMS 3
  reset    answer odd-numbered requests (1st, 3rd, ...) 200, reset the others with RST_STREAM CANCEL (8)
  goaway   answer the first 5 requests 200, then GOAWAY (last stream = the 5th's) and ignore the rest
  silent   read and never answer
  half     answer odd-numbered requests (1st, 3rd, ...) 200 and never answer the others (they stay open)
  slow     one stream at a time (SETTINGS_MAX_CONCURRENT_STREAMS 1), each answered 200 after 5 ms
  zero     SETTINGS_MAX_CONCURRENT_STREAMS 0: no stream may be opened, ever (the connection is kept)
  record FILE
           answer each request 200 (apns-id echoed) and append it to FILE as one JSON line, flushed before the answer:
           {"path": ..., "method": ..., "headers": [[name, value], ...] (every header but the pseudo-headers, in the
           order received, values decoded as Latin-1), "body": the body's bytes in hex}
  bigheaders   answer odd-numbered requests 200 with one 20,000-byte header field (HEADERS + CONTINUATION), the
               others 200 as apns does
  manyheaders  answer odd-numbered requests 200 with 150 header fields, the others 200 as apns does
  endless  answer odd-numbered requests 200 and a body that never ends (DATA as fast as flow control allows, until
           the client resets the stream), the others 200 as apns does
  promise  answer each request with a PUSH_PROMISE (the client sent SETTINGS_ENABLE_PUSH 0), then 200
  garbage  not HTTP/2: every connection is answered with an HTTP/1.1 error and kept open
  pings    a server that never reads: PING after PING, in batches of 64, until the connection breaks
  deaf     SETTINGS (1,000 streams, 1 GiB stream windows) and a connection window of 2^31 - 1, then never reads
  refuse   reset odd-numbered requests (1st, 3rd, ...) with RST_STREAM REFUSED_STREAM (7), answer the others 200
  restart  the first connection: answer 5 requests 200, then close it (no GOAWAY) and stop listening; 1 s later
           listen on the same port again and answer every request 200 (as apns), each connection on its thread
  mute     the first connection: answer 5 requests 200, then close it (no GOAWAY); every later one is accepted, read
           and never written to (no SETTINGS: a connection that never becomes ready)
  sink     SETTINGS (1,000 streams, 1 GiB stream windows, a connection window of 2^31 - 1), then read every byte and
           answer nothing but PINGs (an ACK each), by scanning frame headers: a server that never answers, at any
           rate Python can read
"""
import socket
import struct
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import json
import hpack

mode = sys.argv[1]
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 0))
server.listen(8)
record = open(sys.argv[2], "a") if mode == "record" else None
record_lock = threading.Lock()
print(server.getsockname()[1], flush=True)


def promise_frame(stream_id):
    # PUSH_PROMISE (type 5, END_HEADERS) promising stream 2: :method GET, :scheme https, :path / (static table
    # entries, so that h2's HPACK state stays in step) and :authority x (literal, not indexed). h2 itself refuses
    # to push to a client that disabled push, so the frame is written by hand.
    block = bytes([0x82, 0x87, 0x84, 0x01, 0x01]) + b"x"
    payload = (2).to_bytes(4, "big") + block
    return len(payload).to_bytes(3, "big") + bytes([5, 4]) + stream_id.to_bytes(4, "big") + payload


def pump_endless(conn, endless):
    for sid in list(endless):
        try:
            while True:  # all the window allows: the client's next WINDOW_UPDATE is what wakes this loop
                n = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, 16384)
                if n <= 0:
                    break
                conn.send_data(sid, b"x" * n)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
            endless.discard(sid)


def serve(client):
    if mode == "garbage":
        client.recv(65536)
        client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        client.recv(65536)
        client.close()
        return
    if mode == "pings":
        ping = (8).to_bytes(3, "big") + bytes([6, 0]) + bytes(4) + b"12345678"
        try:
            client.sendall((0).to_bytes(3, "big") + bytes([4, 0]) + bytes(4))  # SETTINGS, then never a read
            while True:
                client.sendall(ping * 64)
        except OSError:
            pass
        client.close()
        return
    if mode == "mute-later":
        try:
            while client.recv(65536):
                pass
        except OSError:
            pass
        client.close()
        return
    if mode == "sink":
        settings = struct.pack(">HIHI", 3, 1000, 4, 1 << 30)
        window = struct.pack(">I", (1 << 31) - 1 - 65535)
        client.sendall(struct.pack(">I", len(settings))[1:] + bytes([4, 0]) + bytes(4) + settings
                       + struct.pack(">I", 4)[1:] + bytes([8, 0]) + bytes(4) + window)
        pending = b""
        skip = 24  # the client preface
        try:
            while True:
                data = client.recv(1 << 20)
                if not data:
                    break
                pending += data
                at = 0
                out = b""
                while True:
                    if skip:
                        n = min(skip, len(pending) - at)
                        at += n
                        skip -= n
                        if skip:
                            break
                    if len(pending) - at < 9:
                        break
                    length = int.from_bytes(pending[at:at + 3], "big")
                    kind, flags = pending[at + 3], pending[at + 4]
                    if kind == 6 and len(pending) - at < 9 + length:
                        break  # a PING not read whole yet
                    if kind == 6 and not flags & 1 and len(pending) - at >= 9 + length:
                        out += pending[at:at + 3] + bytes([6, 1]) + pending[at + 5:at + 9 + length]
                    elif kind == 4 and not flags & 1:
                        out += bytes([0, 0, 0, 4, 1, 0, 0, 0, 0])  # SETTINGS ACK
                    at += 9
                    skip = length
                pending = pending[at:]
                if out:
                    client.sendall(out)
        except OSError:
            pass
        client.close()
        return
    if mode == "deaf":
        settings = struct.pack(">HIHI", 3, 1000, 4, 1 << 30)
        window = struct.pack(">I", (1 << 31) - 1 - 65535)
        client.sendall(struct.pack(">I", len(settings))[1:] + bytes([4, 0]) + bytes(4) + settings
                       + struct.pack(">I", 4)[1:] + bytes([8, 0]) + bytes(4) + window)
        time.sleep(120)
        client.close()
        return
    endless = set()
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    if mode == "bigheaders":
        # Without Huffman coding: hpack's pure-Python coder takes 0.3 s for a 20,000-byte value.
        encode = conn.encoder.encode
        conn.encoder.encode = lambda headers, huffman=True: encode(headers, huffman=False)
    conn.initiate_connection()
    if mode == "apns":
        conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 3})
    if mode == "slow":
        conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1})
    if mode == "zero":
        conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 0})
    client.sendall(conn.data_to_send())
    headers = {}
    raw_headers = {}
    bodies = {}
    seen = 0
    gone = False
    while True:
        try:
            data = client.recv(65536)
        except ConnectionResetError:
            break
        if not data:
            break
        try:
            events = conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            break  # after our GOAWAY the h2 state machine is closed: frames still arriving end this connection
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                headers[event.stream_id] = dict((k.decode() if isinstance(k, bytes) else k,
                                                 v.decode() if isinstance(v, bytes) else v) for k, v in event.headers)
                raw_headers[event.stream_id] = [
                    (k.decode("latin-1") if isinstance(k, bytes) else k, v.decode("latin-1") if isinstance(v, bytes)
                     else v) for k, v in event.headers]
            elif isinstance(event, h2.events.DataReceived):
                bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                endless.discard(event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                sid = event.stream_id
                seen += 1
                h = headers.pop(sid, {})
                raw = raw_headers.pop(sid, [])
                body = bodies.pop(sid, b"")
                if mode == "record":
                    line = json.dumps({"path": h.get(":path"), "method": h.get(":method"),
                                       "headers": [[k, v] for k, v in raw if not k.startswith(":")],
                                       "body": body.hex()})
                    with record_lock:
                        record.write(line + "\n")
                        record.flush()
                    conn.send_headers(sid, [(":status", "200"), ("apns-id", h.get("apns-id", ""))], end_stream=True)
                    continue
                if mode == "silent" or gone or (mode == "half" and seen % 2 == 0):
                    continue
                if mode == "apns":
                    if h.get(":path", "").endswith("/bad"):
                        body = b'{"reason":"BadDeviceToken"}'
                        conn.send_headers(sid, [(":status", "400"), ("apns-id", h.get("apns-id", "")),
                                                ("content-length", str(len(body)))])
                        conn.send_data(sid, body, end_stream=True)
                    else:
                        conn.send_headers(sid, [(":status", "200"), ("apns-id", h.get("apns-id", ""))],
                                          end_stream=True)
                elif mode in ("bigheaders", "manyheaders", "endless"):
                    base = [(":status", "200"), ("apns-id", h.get("apns-id", ""))]
                    if seen % 2 == 0:
                        conn.send_headers(sid, base, end_stream=True)
                    elif mode == "bigheaders":
                        # Never indexed: an entry larger than the HPACK table would empty it on both sides.
                        big = hpack.NeverIndexedHeaderTuple("x-big", "b" * 20000)
                        conn.send_headers(sid, base + [big], end_stream=True)
                    elif mode == "manyheaders":
                        conn.send_headers(sid, base + [("x-f%d" % k, "v") for k in range(150)], end_stream=True)
                    else:
                        conn.send_headers(sid, base)
                        endless.add(sid)
                elif mode == "promise":
                    client.sendall(conn.data_to_send() + promise_frame(sid))
                    conn.send_headers(sid, [(":status", "200")], end_stream=True)
                elif mode == "half":
                    conn.send_headers(sid, [(":status", "200")], end_stream=True)
                elif mode == "slow":
                    time.sleep(0.005)
                    conn.send_headers(sid, [(":status", "200")], end_stream=True)
                elif mode == "refuse":
                    if seen % 2 == 1:
                        conn.reset_stream(sid, error_code=7)
                    else:
                        conn.send_headers(sid, [(":status", "200")], end_stream=True)
                elif mode in ("restart", "mute"):
                    conn.send_headers(sid, [(":status", "200")], end_stream=True)
                    if seen == 5:
                        # FIN after the answers, then read until the client closes: a close with unread requests
                        # would send RST, and the client could lose the answers with it.
                        client.sendall(conn.data_to_send())
                        client.shutdown(socket.SHUT_WR)
                        client.settimeout(5)
                        try:
                            while client.recv(65536):
                                pass
                        except OSError:
                            pass
                        client.close()
                        return
                elif mode == "reset":
                    if seen % 2 == 1:
                        conn.send_headers(sid, [(":status", "200")], end_stream=True)
                    else:
                        conn.reset_stream(sid, error_code=8)
                elif mode == "goaway":
                    if seen <= 5:
                        conn.send_headers(sid, [(":status", "200")], end_stream=True)
                    if seen == 5:
                        conn.close_connection(error_code=0, last_stream_id=sid)
                        gone = True
        pump_endless(conn, endless)
        out = conn.data_to_send()
        if out:
            client.sendall(out)
    client.close()


if mode == "restart":
    first, _ = server.accept()
    serve(first)
    port = server.getsockname()[1]
    server.close()
    time.sleep(1)
    mode = "apns"
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(8)

if mode == "mute":
    first, _ = server.accept()
    serve(first)
    mode = "mute-later"

# Each connection on its own thread, as a real server accepts the next connection while the last one is still
# closing (a client reconnecting after our GOAWAY must not wait for its old connection to end).
while True:
    client, _ = server.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()
