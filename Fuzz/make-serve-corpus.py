#!/usr/bin/env python3
"""Seeds for the serve fuzz target: a setup byte (bit 0: provider tokens checked, bit 1: two workers, bit 2: the
connection on worker 1, bit 3: faults, latency and the events judged, bits 4-5: --manage-listen's push or management
listener, bit 6: TLS, bit 7: a TLS client's handshake first), then what a client sends after the 24-byte HTTP/2
preface (the target adds the preface),
made with the `h2` library: SETTINGS and requests of every kind the endpoint serves, with a valid provider token
where tokens are checked (and a few bad ones).

    python3 Fuzz/make-serve-corpus.py   # writes Fuzz/corpus/serve/*.bin

The tokens are signed by a test key whose private scalar is SHA-256("fanout fuzz serve test key") mod n; its
public half is `testKeyPEM` in Sources/FuzzServe/FuzzServe.swift (checked below). They are issued at the time the
target runs at (`nowSeconds`, 1,800,000,000).
"""
import base64
import hashlib
import json
import os

import h2.config
import h2.connection
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

NOW = 1_800_000_000
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
KEY = ec.derive_private_key(
    int.from_bytes(hashlib.sha256(b"fanout fuzz serve test key").digest(), "big") % P256_ORDER, ec.SECP256R1())

here = os.path.dirname(os.path.abspath(__file__))
public_pem = KEY.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
with open(os.path.join(here, "Sources", "FuzzServe", "FuzzServe.swift")) as f:
    target = f.read()
assert all(line in target for line in public_pem.strip().splitlines()), "testKeyPEM differs from the corpus key"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def token(iat=NOW, kid="FUZZKEY001", iss="FUZZTEAM01"):
    signed = b64url(json.dumps({"alg": "ES256", "kid": kid}).encode()) + b"." + b64url(
        json.dumps({"iss": iss, "iat": iat}).encode())
    r, s = decode_dss_signature(KEY.sign(signed, ec.ECDSA(hashes.SHA256())))
    return "bearer " + (signed + b"." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))).decode()


GOOD = token()
# Update tokens of the `smoke` population at 40 devices: devices 0 and 1 (device d belongs to worker d % 2), and a
# channel of its (c291cmNlLTAwMDAz, source-00003): `fanout serve smoke --devices 40` lists them in population.jsonl.
TOKEN_WORKER_0 = "0449e09d1eee4cac661266e08dc5fb2d40b8d4123ef0e0eea2815a53afe116ef"
TOKEN_WORKER_1 = "a8eb65c7fe2226594722df7e01d57f80e55a593292dcc9db8391d2eb2bd6ebf2"
PAYLOAD = json.dumps({"aps": {"event": "update", "timestamp": 1800000001, "content-state": {
    "home": 1, "away": 0, "clock": "1:00", "winProbability": 0.5, "final": False, "lastEvent": "x"}}}).encode()
PUSH_HEADERS = [("apns-push-type", "liveactivity"), ("apns-topic", "com.example.scores.push-type.liveactivity")]
REQUESTS = {
    "push": ("POST", f"/3/device/{TOKEN_WORKER_0}", PUSH_HEADERS, PAYLOAD),
    "push-w1": ("POST", f"/3/device/{TOKEN_WORKER_1}", PUSH_HEADERS, PAYLOAD),
    "broadcast": ("POST", "/4/broadcasts/apps/com.example.scores",
                  [("apns-channel-id", "c291cmNlLTAwMDAz"), ("apns-push-type", "LiveActivity"),
                   ("apns-priority", "10"), ("apns-expiration", "0")], PAYLOAD),
    "create-channel": ("POST", "/1/apps/com.example.scores/channels", [],
                       b'{"message-storage-policy": 1, "push-type": "LiveActivity"}'),
    "list-channels": ("GET", "/1/apps/com.example.scores/all-channels", [], b""),
    "bad-path": ("POST", "/nowhere", [], b"{}"),
}
# Setups (the first byte): one worker, two workers (the connection on worker 0, on worker 1); tokens or none; APNs
# on a bad day (faults, latency) with the events judged.
# --manage-listen: the connection on the push listener (bit 4) or on the management one (bit 5). TLS (bit 6) with
# fanout's own client making the handshake and encrypting the input (bit 7), or the input as raw records.
SETUPS = {"1w": 0, "2w": 2, "2w-on1": 6, "1w-bad": 8, "2w-on1-bad": 14, "1w-split-push": 16, "2w-split-manage": 34,
          "2w-on1-split-push-bad": 30, "1w-tls": 192, "2w-on1-tls": 198, "2w-tls-split-manage": 226,
          "1w-tls-raw": 64}
# Provider tokens other than the good one, on a push (two workers, tokens checked).
BAD_TOKENS = {
    "token-expired": token(iat=NOW - 7200),
    "token-other-team": token(iss="OTHERTEAM1"),
    "token-unknown-kid": token(kid="NOSUCHKEY1"),
    "token-tampered": GOOD[:-4] + ("AAAA" if not GOOD.endswith("AAAA") else "BBBB"),
}


def seed(method, path, headers, body, authorization):
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    for _ in range(2):
        sid = conn.get_next_available_stream_id()
        extra = [("authorization", authorization)] if authorization else []
        conn.send_headers(sid, [(":method", method), (":path", path), (":scheme", "https"),
                                (":authority", "localhost")] + extra + headers, end_stream=not body)
        if body:
            conn.send_data(sid, body, end_stream=True)
    return conn.data_to_send()[24:]  # the target sends the preface itself


out = os.path.join(here, "corpus", "serve")
os.makedirs(out, exist_ok=True)
for old in os.listdir(out):
    os.remove(os.path.join(out, old))
written = 0
for name, (method, path, headers, body) in REQUESTS.items():
    for setup, bits in SETUPS.items():
        for jwt in (False, True):
            data = bytes([bits | jwt]) + seed(method, path, headers, body, GOOD if jwt else None)
            with open(os.path.join(out, f"{name}-{setup}{'-jwt' if jwt else ''}.bin"), "wb") as f:
                f.write(data)
            written += 1
for name, authorization in BAD_TOKENS.items():
    method, path, headers, body = REQUESTS["push-w1"]
    with open(os.path.join(out, f"{name}.bin"), "wb") as f:
        f.write(bytes([3]) + seed(method, path, headers, body, authorization))
    written += 1
print(f"wrote {written} seeds to {out}")
