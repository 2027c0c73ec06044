#!/usr/bin/env python3
"""Clients that try to kill, hang or fill a running `fanout serve` (started and stopped by ServeBoundsTests and
ServeCommandTests): raw HTTP/2 frames where the `h2` library would refuse to misbehave, `serve_client.Client`
elsewhere. Prints one JSON object with what it saw; exits 1 with a message on the first failed expectation.

    serve_bounds.py silent PORT
    serve_bounds.py flood PORT FOLDER ROUNDS
    serve_bounds.py stall PORT FOLDER SERVER_PID
    serve_bounds.py bounds PORT FOLDER
    serve_bounds.py unsent PORT FOLDER
"""
import json
import os
import signal
import socket
import struct
import sys
import time

from serve_client import RESULT, Client, expect, fail, live_payload, population


def silent(port):
    """A client that connects and says nothing: closed after the preface timeout (the only such client)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    t0 = time.time()
    try:
        while s.recv(4096):  # the server's SETTINGS, then the end
            pass
    except socket.timeout:
        fail("a silent connection was not closed within 30 s")
    RESULT["silentClosedAfterSeconds"] = round(time.time() - t0, 1)
    s.close()


def frame(kind, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", sid) + payload


def literal(name, value):
    """An HPACK literal without indexing (new name): the same bytes whatever was sent before."""
    n, v = name.encode(), value.encode()
    return bytes([0, len(n)]) + n + bytes([len(v)]) + v


def raw_connection(port, rcvbuf=4096, sndbuf=65536):
    """A socket that has sent the preface and opened every window wide: the server may send all it wants."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    s.connect(("127.0.0.1", port))
    settings = frame(4, 0, 0, struct.pack(">HI", 4, 2**31 - 1))  # INITIAL_WINDOW_SIZE
    update = frame(8, 0, 0, struct.pack(">I", 2**31 - 1 - 65535))  # the connection's window
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + settings + update)
    return s


def pipelined(count, first=1):
    """`count` GET requests on a push path, each answered 405 with a JSON body and an apns-id."""
    block = (literal(":method", "GET") + literal(":scheme", "https") + literal(":path", "/3/device/ab")
             + literal(":authority", "x"))
    return b"".join(frame(1, 0x5, first + 2 * k, block) for k in range(count))


def send_until_blocked(s, data, stall_seconds):
    """Sends without reading; stops when the server has taken nothing for `stall_seconds` (it stopped reading)."""
    s.setblocking(False)
    offset = 0
    last = time.time()
    while offset < len(data):
        try:
            n = s.send(data[offset:offset + 65536])
            offset += n
            last = time.time()
        except BlockingIOError:
            if time.time() - last > stall_seconds:
                break
            time.sleep(0.005)
    s.setblocking(True)
    return offset


def reset_close(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def flood(port, folder, rounds):
    """Pipelined requests (far more than 64 KiB), never a byte read, then a reset (SO_LINGER 0): repeated."""
    p = population(folder)[0]
    sent = []
    for _ in range(rounds):
        s = raw_connection(port)
        data = pipelined(20000)
        sent.append(send_until_blocked(s, data, 3.0))
        expect(sent[-1] > 65536, f"more than 64 KiB of requests sent: {sent[-1]}")
        reset_close(s)
    c = Client(port)
    status, _, _ = c.request("POST", f"/3/device/{p['token']}",
                             [("apns-push-type", "liveactivity"), ("apns-topic", p["app"] + ".push-type.liveactivity")],
                             live_payload())
    expect(status == 200, f"served after the resets: {status}")
    c.close()
    RESULT["sentBytes"] = sent


def stall(port, folder, pid):
    """A client that asks and never reads until the server stops reading too; then SIGTERM to the server, whose
    run folder must appear within the drain time and a second, while this client still holds its socket."""
    s = raw_connection(port)
    data = pipelined(300000)
    sent = send_until_blocked(s, data, 2.0)
    expect(sent < len(data), "the server stopped reading from a client that does not read")
    RESULT["sentBeforeBlocked"] = sent
    t0 = time.time()
    os.kill(pid, signal.SIGTERM)
    summary = os.path.join(folder, "summary.json")
    while not os.path.exists(summary) and time.time() - t0 < 30:
        time.sleep(0.02)
    expect(os.path.exists(summary), "the run folder was written after SIGTERM")
    RESULT["folderAfterSeconds"] = round(time.time() - t0, 2)
    s.close()


def served_client(port, refusals):
    """A client the server took (its SETTINGS arrived); connections refused on the way (the server may not have
    seen earlier ones close yet) are counted in refusals[0]."""
    while True:
        try:
            c = Client(port)
            c.pump(lambda: c.got_settings or c.terminated, timeout=60)
        except (ConnectionResetError, BrokenPipeError):
            c = None
        if c is not None and c.got_settings and not c.terminated:
            return c
        refusals[0] += 1
        if c is not None:
            c.sock.close()
        time.sleep(0.05)


def bounds(port, folder):
    """--max-open-streams 3, --request-timeout 1, --idle-timeout 2, --max-connections 3 (one loop)."""
    p = population(folder)[0]
    path = f"/3/device/{p['token']}"
    hs = [("apns-push-type", "liveactivity"), ("apns-topic", p["app"] + ".push-type.liveactivity")]
    # The connection cap, first (nothing else is open): three served, the next three closed at once.
    opened, refusals = [], [0]
    for _ in range(6):
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b""))
        try:
            answer = s.recv(4096)
        except ConnectionResetError:  # closed at once, with the preface unread
            answer = b""
        if answer:
            opened.append(s)
        else:
            refusals[0] += 1
            s.close()
    expect(len(opened) == 3 and refusals[0] == 3, f"3 served, 3 refused under --max-connections 3: {refusals}")
    for s in opened:
        s.close()
    # Three streams that never end hold the loop's budget: a fourth is refused; the three are reset at the deadline.
    a = served_client(port, refusals)
    held = []
    for _ in range(3):
        sid = a.conn.get_next_available_stream_id()
        a.conn.send_headers(sid, [(":method", "POST"), (":path", path), (":scheme", "https"),
                                  (":authority", "localhost")] + hs)
        held.append(sid)
    refused = a.conn.get_next_available_stream_id()
    a.conn.send_headers(refused, [(":method", "POST"), (":path", path), (":scheme", "https"),
                                  (":authority", "localhost")] + hs, end_stream=True)
    a.sock.sendall(a.conn.data_to_send())
    a.pump(lambda: all(sid in a.resets for sid in held + [refused]) or a.terminated, timeout=60)
    expect(all(sid in a.resets for sid in held + [refused]), f"every held stream reset, the extra refused: {a.resets}")
    RESULT["resetCodes"] = {str(k): v for k, v in sorted(a.reset_codes.items())}
    expect(a.reset_codes[refused] == 7, f"REFUSED_STREAM for the stream over the budget: {a.reset_codes}")
    expect(all(a.reset_codes[sid] == 8 for sid in held), f"CANCEL at the request deadline: {a.reset_codes}")
    status, _, _ = a.request("POST", path, hs, live_payload())
    expect(status == 200, f"served once the budget is free again: {status}")
    a.close()
    # PINGs only: idle all the same, GOAWAY IdleTimeout.
    b = served_client(port, refusals)
    t0 = time.time()
    while not b.terminated and time.time() - t0 < 60:
        b.conn.ping(b"12345678")
        b.sock.sendall(b.conn.data_to_send())
        b.pump(lambda: b.terminated or b.pongs > 0, timeout=60)
        b.pongs = 0
        time.sleep(0.2)
    expect(isinstance(b.terminated, dict) and "IdleTimeout" in b.terminated["debug"],
           f"GOAWAY IdleTimeout despite PINGs: {b.terminated}")
    RESULT["idleAfterSeconds"] = round(time.time() - t0, 1)
    b.sock.close()
    RESULT["refused"] = refusals[0]


def unsent(port, folder, lists=2000, channels=300):
    """A client that asks for the largest answers there are (`all-channels` of an app with `channels` live
    channels, ~35 bytes per channel), its windows wide open, and never reads: its answers are held only up to
    --max-unsent-bytes, the rest of its requests refused; meanwhile another client is served."""
    app = "com.example.news"
    body = json.dumps({"message-storage-policy": 0, "push-type": "LiveActivity"}).encode()
    c = Client(port)
    for _ in range(channels):
        status, _, _ = c.request("POST", f"/1/apps/{app}/channels", [("apns-push-type", "liveactivity")], body)
        expect(status == 201, f"channel created: {status}")
    block = (literal(":method", "GET") + literal(":scheme", "https") + literal(":path", f"/1/apps/{app}/all-channels")
             + literal(":authority", "x"))
    s = raw_connection(port)
    data = b"".join(frame(1, 0x5, 1 + 2 * k, block) for k in range(lists))
    RESULT["sentBytes"] = send_until_blocked(s, data, 2.0)
    time.sleep(1.0)
    p = population(folder)[0]
    status, _, _ = c.request("POST", f"/3/device/{p['token']}",
                             [("apns-push-type", "liveactivity"), ("apns-topic", p["app"] + ".push-type.liveactivity")],
                             live_payload())
    expect(status == 200, f"another client is served while one holds its answers unread: {status}")
    c.close()
    reset_close(s)


if __name__ == "__main__":
    mode = sys.argv[1]
    args = sys.argv[2:]
    if mode == "silent":
        silent(int(args[0]))
    elif mode == "flood":
        flood(int(args[0]), args[1], int(args[2]))
    elif mode == "stall":
        stall(int(args[0]), args[1], int(args[2]))
    elif mode == "bounds":
        bounds(int(args[0]), args[1])
    elif mode == "unsent":
        unsent(int(args[0]), args[1])
    else:
        fail(f"unknown mode {mode}")
    RESULT["ok"] = True
    print(json.dumps(RESULT))
