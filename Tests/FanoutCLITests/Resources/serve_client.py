#!/usr/bin/env python3
"""HTTP/2 client checks against a running `fanout serve` (started and stopped by the Swift tests).

Uses the `h2` library (python-hyper, not written here) for framing, over plain sockets or TLS with ALPN h2,
so that hostile cases (garbage, malformed frames, oversized header blocks, slow readers) can be sent too.
Prints one JSON object with what it saw; exits 1 with a message on the first failed expectation.

    serve_client.py channels PORT FOLDER
    serve_client.py jwt PORT KEY1.pem KID1 KEY2.pem KID2 TEAM
    serve_client.py hostile PORT FOLDER
    serve_client.py tls PORT CA.pem FOLDER
    serve_client.py events PORT FOLDER   (fanout serve --expect-events: pushes carrying the events' timestamps)
    serve_client.py faults PORT FOLDER   (--faults: what each push got, by apns-id; refused event pushes)
"""
import base64
import json
import socket
import ssl
import sys
import time
import uuid

import h2.config
import h2.connection
import h2.events
import h2.settings
from hpack import NeverIndexedHeaderTuple

RESULT = {}


def fail(message):
    print(json.dumps({"failed": message, "seen": RESULT}))
    sys.exit(1)


def expect(condition, message):
    if not condition:
        fail(message)


class Client:
    """One HTTP/2 connection; requests are sent and answered one at a time unless pipelined by hand."""

    def __init__(self, port, tls_ca=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if tls_ca:
            context = ssl.create_default_context(cafile=tls_ca)
            context.set_alpn_protocols(["h2"])
            self.sock = context.wrap_socket(self.sock, server_hostname="localhost")
            expect(self.sock.selected_alpn_protocol() == "h2", "ALPN h2 selected")
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.responses = {}
        self.terminated = None
        self.resets = set()
        self.reset_codes = {}
        self.pongs = 0
        self.got_settings = False

    # Bounds only against a hang (a loaded test machine may be slow): nothing here asserts an elapsed time.
    def pump(self, until, timeout=60):
        deadline = time.time() + timeout
        while not until():
            if time.time() > deadline:
                fail("timed out waiting for the server")
            if not self.receive_once():
                return

    def receive_once(self):
        """Reads once and handles the events; False once the server closed the connection."""
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return True
        if not data:
            self.terminated = self.terminated or "closed"
            return False
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                r = self.responses.setdefault(event.stream_id, {"body": b""})
                r["headers"] = {k.decode(): v.decode() for k, v in event.headers}
                r["never_indexed"] = {h[0].decode() for h in event.headers if isinstance(h, NeverIndexedHeaderTuple)}
            elif isinstance(event, h2.events.DataReceived):
                self.responses.setdefault(event.stream_id, {"body": b""})["body"] += event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.responses.setdefault(event.stream_id, {"body": b""})["done"] = True
            elif isinstance(event, h2.events.StreamReset):
                self.resets.add(event.stream_id)
                self.reset_codes[event.stream_id] = int(event.error_code)
            elif isinstance(event, h2.events.RemoteSettingsChanged):
                self.got_settings = True
            elif isinstance(event, h2.events.PingAckReceived):
                self.pongs += 1
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.terminated = {"error": int(event.error_code),
                                   "debug": (event.additional_data or b"").decode(errors="replace")}
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)
        return True

    def send(self, method, path, headers=(), body=b""):
        sid = self.conn.get_next_available_stream_id()
        hs = [(":method", method), (":path", path), (":scheme", "https"), (":authority", "localhost")]
        hs += list(headers)
        self.conn.send_headers(sid, hs, end_stream=not body)
        self.sock.sendall(self.conn.data_to_send())
        offset = 0
        while offset < len(body):
            window = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
            if window == 0:
                self.pump_once()
                if sid in self.resets or self.responses.get(sid, {}).get("done") or self.terminated:
                    return sid
                continue
            chunk = body[offset:offset + window]
            offset += len(chunk)
            self.conn.send_data(sid, chunk, end_stream=offset == len(body))
            self.sock.sendall(self.conn.data_to_send())
        return sid

    def pump_once(self):
        self.receive_once()

    def request(self, method, path, headers=(), body=b""):
        sid = self.send(method, path, headers, body)
        self.pump(lambda: self.responses.get(sid, {}).get("done") or sid in self.resets or self.terminated)
        r = self.responses.get(sid, {})
        status = int(r.get("headers", {}).get(":status", "0"))
        text = r.get("body", b"")
        return status, r.get("headers", {}), (json.loads(text) if text else None)

    def close(self):
        try:
            self.conn.close_connection()
            self.sock.sendall(self.conn.data_to_send())
        except OSError:
            pass
        self.sock.close()


def population(folder):
    with open(f"{folder}/population.jsonl") as f:
        return [json.loads(line) for line in f]


def live_payload(event="update", ts=None, content=None):
    ts = ts or int(time.time())
    return json.dumps({"aps": {"event": event, "timestamp": ts, "content-state": content or {
        "home": 2, "away": 1, "clock": "80:00", "winProbability": 0.7, "final": False, "lastEvent": "goal"}}}).encode()


def expect_answer(answer, status, reason, what):
    got_status, _, body = answer
    got_reason = body.get("reason") if body else None
    expect(got_status == status and got_reason == reason,
           f"{what}: expected {status} {reason}, got {got_status} {body}")


def channels(port, folder):
    pop = population(folder)
    subscribed = [p for p in pop if p["channel"]]
    expect(subscribed, "the scenario has broadcast subscribers")
    channel = subscribed[0]["channel"]
    app = subscribed[0]["app"]
    subscribers = sum(1 for p in subscribed if p["channel"] == channel)
    c = Client(port)
    rid = str(uuid.uuid4())
    bh = [("apns-channel-id", channel), ("apns-push-type", "LiveActivity"), ("apns-priority", "10"),
          ("apns-expiration", "0"), ("apns-request-id", rid)]
    status, headers, body = c.request("POST", f"/4/broadcasts/apps/{app}", bh, live_payload())
    expect(status == 200 and body is None, f"broadcast 200, got {status} {body}")
    expect(headers.get("apns-request-id") == rid, "broadcast echoes apns-request-id")
    expect(uuid.UUID(headers.get("apns-unique-id", "x")), "broadcast has apns-unique-id")
    # Ids are unique per response: sent as HPACK "never indexed", so they do not fill the dynamic table.
    never = c.responses[max(c.responses)]["never_indexed"]
    expect(never == {"apns-request-id", "apns-unique-id"}, f"ids never indexed, the rest indexable: {never}")
    # Channel management.
    ch = [("apns-push-type", "LiveActivity")]
    status, headers, _ = c.request("POST", f"/1/apps/{app}/channels", ch,
                                   json.dumps({"message-storage-policy": 0, "push-type": "LiveActivity"}).encode())
    expect(status == 201 and "apns-channel-id" in headers, f"create 201, got {status}")
    created = headers["apns-channel-id"]
    base64.b64decode(created, validate=True)
    status, _, body = c.request("GET", f"/1/apps/{app}/channels", [("apns-channel-id", created)])
    expect(status == 200 and body == {"message-storage-policy": 0, "push-type": "LiveActivity"}, f"read: {body}")
    status, _, body = c.request("GET", f"/1/apps/{app}/all-channels")
    expect(status == 200 and created in body["channels"] and channel in body["channels"], f"list: {body}")
    stored = [("apns-channel-id", created), ("apns-push-type", "liveactivity"), ("apns-priority", "10")]
    expect_answer(c.request("POST", f"/4/broadcasts/apps/{app}", stored + [("apns-expiration", "100")],
                            live_payload()), 400, "BadExpirationDate", "expiration to a no-storage channel")
    status, _, _ = c.request("POST", f"/4/broadcasts/apps/{app}", stored + [("apns-expiration", "0")], live_payload())
    expect(status == 200, "broadcast to a new channel without subscribers")
    status, _, body = c.request("DELETE", f"/1/apps/{app}/channels", [("apns-channel-id", created)])
    expect(status == 204 and body is None, f"delete 204, got {status}")
    expect_answer(c.request("GET", f"/1/apps/{app}/channels", [("apns-channel-id", created)]),
                  400, "ChannelNotRegistered", "read a deleted channel")
    expect_answer(c.request("POST", f"/4/broadcasts/apps/{app}", stored + [("apns-expiration", "0")], live_payload()),
                  400, "ChannelNotRegistered", "broadcast to a deleted channel")
    expect_answer(c.request("POST", f"/1/apps/{app}/channels", ch, b'{"push-type": "LiveActivity", "x": 1}'),
                  400, "BadRequestParams", "unknown attribute")
    expect_answer(c.request("POST", f"/1/apps/{app}/channels", ch, b'{"push-type": '),
                  400, "BadRequestPayload", "unparseable channel body")
    expect_answer(c.request("POST", f"/4/broadcasts/apps/{app}", [h for h in bh if h[0] != "apns-push-type"],
                            live_payload()), 400, "MissingPushType", "broadcast without push type")
    expect_answer(c.request("POST", f"/4/broadcasts/apps/{app}", [h for h in bh if h[0] != "apns-channel-id"],
                            live_payload()), 400, "MissingChannelId", "broadcast without channel id")
    expect_answer(c.request("POST", f"/4/broadcasts/apps/{app}",
                            [("apns-channel-id", "!!")] + bh[1:], live_payload()), 400, "BadChannelId", "bad base64")
    expect_answer(c.request("POST", f"/4/broadcasts/apps/{app}", bh[:2] + [("apns-priority", "7")] + bh[3:],
                            live_payload()), 400, "BadPriority", "broadcast priority 7")
    c.close()
    RESULT.update({"subscribers": subscribers, "broadcasts": 2})


def jwt(port, key1, kid1, key2, kid2, team, folder):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    def b64url(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    def token(key_file, kid, iss, iat, raw=True, corrupt=False):
        key = serialization.load_pem_private_key(open(key_file, "rb").read(), password=None)
        head = b64url(json.dumps({"alg": "ES256", "kid": kid}).encode())
        claims = b64url(json.dumps({"iss": iss, "iat": iat}).encode())
        der = key.sign(f"{head}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))
        if raw:
            r, s = decode_dss_signature(der)
            sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        else:
            sig = der
        if corrupt:
            sig = bytes([sig[0] ^ 1]) + sig[1:]
        return f"{head}.{claims}.{b64url(sig)}"

    p = population(folder)[0]
    path = f"/3/device/{p['token']}"
    topic = p["app"] + ".push-type.liveactivity"
    base = [("apns-push-type", "liveactivity"), ("apns-topic", topic)]
    now = int(time.time())

    def ask(client, tok, ts):
        hs = base + ([("authorization", f"bearer {tok}")] if tok else [])
        return client.request("POST", path, hs, live_payload(ts=ts))

    c = Client(port)
    c.pump(lambda: c.conn.remote_settings.max_concurrent_streams == 1, timeout=60)
    expect(c.conn.remote_settings.max_concurrent_streams == 1, "one stream before authentication")
    expect_answer(ask(c, None, now), 403, "MissingProviderToken", "no token")
    expect_answer(ask(c, token(key1, kid1, team, now, corrupt=True), now), 403, "InvalidProviderToken", "bad signature")
    expect_answer(ask(c, token(key1, kid1, "OTHERTEAM1", now), now), 403, "InvalidProviderToken", "wrong team")
    expect_answer(ask(c, token(key1, "NOSUCHKEY1", team, now), now), 403, "InvalidProviderToken", "unknown key")
    expect_answer(ask(c, token(key1, kid1, team, now - 7200), now), 403, "ExpiredProviderToken", "two hours old")
    expect_answer(ask(c, token(key1, kid1, team, now + 3600), now), 403, "InvalidProviderToken", "an hour ahead")
    expect_answer(ask(c, token(key1, kid1, team, "-9223372036854775808"), now), 403, "InvalidProviderToken",
                  "iat Int64.min as a string")
    expect_answer(ask(c, token(key1, kid1, team, 1e300), now), 403, "InvalidProviderToken", "iat 1e300")
    unsigned = (b64url(json.dumps({"alg": "none", "kid": kid1}).encode()) + "."
                + b64url(json.dumps({"iss": team, "iat": now}).encode()) + ".")
    expect_answer(ask(c, unsigned, now), 403, "InvalidProviderToken", "alg none")
    status, _, _ = ask(c, token(key1, kid1, team, now), now + 1)
    expect(status == 200, f"valid raw R||S token: {status}")
    c.pump(lambda: c.conn.remote_settings.max_concurrent_streams == 1000, timeout=60)
    expect(c.conn.remote_settings.max_concurrent_streams == 1000, "1000 streams after authentication")
    expect_answer(ask(c, token(key1, kid1, team, now + 1), now + 2), 429, "TooManyProviderTokenUpdates",
                  "a new token within 20 minutes")
    c.close()
    c = Client(port)
    status, _, _ = ask(c, token(key1, kid1, team, str(now), raw=False), now + 3)
    expect(status == 200, f"DER signature, iat as a string: {status}")
    expect_answer(ask(c, token(key2, kid2, team, now), now + 4), 403, "UnrelatedKeyIdInToken", "another key id")
    c.close()
    RESULT.update({"accepted": 2})


def hostile(port, folder):
    p = population(folder)[0]
    path = f"/3/device/{p['token']}"
    hs = [("apns-push-type", "liveactivity"), ("apns-topic", p["app"] + ".push-type.liveactivity")]
    # Garbage instead of the preface: the connection is closed.
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        fail("a client without the HTTP/2 preface was not disconnected")
    s.close()
    # A malformed frame after a valid preface: GOAWAY PROTOCOL_ERROR.
    c = Client(port)
    c.sock.sendall(b"\x00\x00\x04\x00\x00\x00\x00\x00\x00hey!")  # DATA on stream 0
    c.pump(lambda: c.terminated is not None)
    expect(isinstance(c.terminated, dict) and c.terminated["error"] == 1, f"GOAWAY PROTOCOL_ERROR: {c.terminated}")
    c.sock.close()
    # A header block over the limit: that stream is reset, the connection goes on.
    c = Client(port)
    c.conn.local_settings  # noqa
    sid = c.send("POST", path, hs + [("x-big", "v" * 20000)], live_payload())
    c.pump(lambda: sid in c.resets or c.responses.get(sid, {}).get("done") or c.terminated)
    expect(sid in c.resets or c.terminated, "an oversized header block is refused")
    if not c.terminated:
        status, _, _ = c.request("POST", path, hs, live_payload())
        expect(status == 200, "the connection serves after a reset stream")
    c.close()
    # A body over the limit: 413, with at most limit + 1 bytes kept.
    c = Client(port)
    c.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20})
    expect_answer(c.request("POST", path, hs, b"{" + b" " * 100000 + b"}"), 413, "PayloadTooLarge", "100 kB body")
    c.close()
    # Idle connections: hundreds open at once, a fresh client is still served at once.
    idle = [Client(port) for _ in range(300)]
    t0 = time.time()
    c = Client(port)
    status, _, _ = c.request("POST", path, hs, live_payload())
    expect(status == 200, "served beside 300 idle connections")
    RESULT["servedBesideIdleMillis"] = int((time.time() - t0) * 1000)
    c.close()
    for i in idle:
        i.close()
    # A slow reader: thousands of requests, no reading; another client is served meanwhile.
    slow = Client(port)
    slow.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 65535})
    for _ in range(900):
        slow.send("POST", "/nope", hs, b"x")
    c = Client(port)
    status, _, _ = c.request("POST", path, hs, live_payload())
    expect(status == 200, "served beside a slow reader")
    c.close()
    slow.sock.close()
    # A trailer repeating apns-topic: ignored, not merged into the request (no DuplicateHeaders).
    c = Client(port)
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, [(":method", "POST"), (":path", path), (":scheme", "https"), (":authority", "localhost")]
                        + hs)
    c.conn.send_data(sid, live_payload())
    c.conn.send_headers(sid, [("apns-topic", "com.example.other.push-type.liveactivity")], end_stream=True)
    c.sock.sendall(c.conn.data_to_send())
    c.pump(lambda: c.responses.get(sid, {}).get("done") or sid in c.resets or c.terminated)
    status = int(c.responses.get(sid, {}).get("headers", {}).get(":status", "0"))
    expect(status == 200, f"a request with a trailer is answered 200, got {status} {c.responses.get(sid)}")
    c.close()


def tls(port, ca, folder):
    p = population(folder)[0]
    c = Client(port, tls_ca=ca)
    status, headers, _ = c.request("POST", f"/3/device/{p['token']}",
                                   [("apns-push-type", "liveactivity"), ("apns-topic", p["app"] + ".push-type.liveactivity")],
                                   live_payload())
    expect(status == 200 and "apns-id" in headers, f"TLS push: {status}")
    c.close()


def events(port, folder):
    """Pushes with the scenario's event timestamps (events.jsonl) to a token source's followers: two delivered, a
    duplicate, a reordered one and an uncorrelated one (the Swift test checks summary.json's counts)."""
    with open(f"{folder}/events.jsonl") as f:
        evs = [json.loads(line) for line in f]
    pop = population(folder)
    by_source = {}
    for e in evs:
        by_source.setdefault(e["source"], []).append(e)
    chosen = None
    for source, list_ in sorted(by_source.items()):
        followers = [p for p in pop if p["source"] == source and p["channel"] is None]
        if list_[0]["app"] == "com.example.scores" and len(followers) >= 2 and len(list_) >= 2:
            chosen = (source, sorted(list_, key=lambda e: e["timestamp"]), followers)
            break
    expect(chosen, "a token source of the scores app with two followers and two events")
    source, list_, followers = chosen
    a, b = followers[0], followers[1]
    e0, e1 = list_[0], list_[1]
    c = Client(port)
    headers = [("apns-push-type", "liveactivity"), ("apns-topic", "com.example.scores.push-type.liveactivity"),
               ("apns-priority", "5")]

    def push(row, ts, event="update", content=None):
        status, _, body = c.request("POST", f"/3/device/{row['token']}", headers, live_payload(event, ts, content))
        expect(status == 200, f"push to {row['activity']} timestamp {ts}: {status} {body}")

    # Each event's own kind and content-state (events.jsonl): what a faithful backend sends.
    push(a, e0["timestamp"], e0["kind"], e0["content-state"])  # delivered
    push(a, e0["timestamp"], e0["kind"], e0["content-state"])  # duplicate
    push(a, e1["timestamp"], e1["kind"], e1["content-state"])  # delivered (e0 was delivered: nothing superseded)
    push(a, e0["timestamp"], e0["kind"], e0["content-state"])  # reordered
    push(b, e1["timestamp"] + 100000)     # uncorrelated (no event has it), applied
    c.close()
    RESULT.update({"source": source, "followers": e0["followers"], "events": len(evs), "a": a["activity"],
                   "b": b["activity"]})


def faults(port, folder):
    """One connection, one request at a time: 100 pushes with apns-ids 00000000-0000-4000-8000-<k> to a follower,
    each carrying no event's timestamp (what each got, by apns-id: the same seed must give the same), then each token
    follower of a scores-app source its source's first event, once, if that event is already due (how many were
    refused: the Swift test checks them against summary.json's missing deliveries by reason)."""
    started = time.time()
    with open(f"{folder}/events.jsonl") as f:
        evs = [json.loads(line) for line in f]
    pop = population(folder)
    token_sources = {e["source"] for e in evs if e["app"] == "com.example.scores"}
    followers = [p for p in pop if p["source"] in token_sources and p["channel"] is None]
    expect(followers, "token followers of the scores app")
    c = Client(port)
    # HEADERS and DATA go in two writes: without TCP_NODELAY each request waits out the peer's delayed ACK (~40 ms).
    c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    headers = [("apns-push-type", "liveactivity"), ("apns-topic", "com.example.scores.push-type.liveactivity"),
               ("apns-priority", "5")]

    def push(row, ts, extra=()):
        sid = c.send("POST", f"/3/device/{row['token']}", headers + list(extra), live_payload("update", ts))
        c.pump(lambda: c.responses.get(sid, {}).get("done") or sid in c.resets or c.terminated)
        if sid in c.resets:
            return "reset"
        r = c.responses.get(sid, {})
        body = json.loads(r["body"]) if r.get("body") else {}
        return body.get("reason", r.get("headers", {}).get(":status", "none"))

    by_id = {}
    for k in range(100):
        apns_id = f"00000000-0000-4000-8000-{k:012d}"
        by_id[apns_id] = push(followers[0], 1000 + k, [("apns-id", apns_id)])
    # The first event of each source (the lowest timestamp), once per follower, when it is due since the client
    # started (fanout serve started before: due by then too).
    first = {}
    for e in evs:
        if e["source"] in token_sources and (e["source"] not in first or e["timestamp"] < first[e["source"]]["timestamp"]):
            first[e["source"]] = e
    due = [e for e in first.values() if e["offsetNanos"] <= 1e9]
    expect(due, "a token source's first event within 1 s")
    time.sleep(max(0.0, started + 1.5 - time.time()))
    refused = 0
    pushed = 0
    for row in followers:
        e = first.get(row["source"])
        if e is None or e["offsetNanos"] > 1e9:
            continue
        pushed += 1
        got = push(row, e["timestamp"])
        if got == "ServiceUnavailable":
            refused += 1
        else:
            expect(got == "200", f"an event push got {got}")
    c.close()
    RESULT.update({"byId": by_id, "eventPushes": pushed, "eventRefused": refused})


if __name__ == "__main__":
    mode = sys.argv[1]
    args = sys.argv[2:]
    if mode == "channels":
        channels(int(args[0]), args[1])
    elif mode == "jwt":
        jwt(int(args[0]), args[1], args[2], args[3], args[4], args[5], args[6])
    elif mode == "hostile":
        hostile(int(args[0]), args[1])
    elif mode == "tls":
        tls(int(args[0]), args[1], args[2])
    elif mode == "events":
        events(int(args[0]), args[1])
    elif mode == "faults":
        faults(int(args[0]), args[1])
    else:
        fail(f"unknown mode {mode}")
    RESULT["ok"] = True
    print(json.dumps(RESULT))
