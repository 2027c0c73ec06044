#!/usr/bin/env python3
"""Seeds for the serve fuzz target: what a client sends after the 24-byte HTTP/2 preface (the target adds
the preface), made with the `h2` library: SETTINGS and requests of every kind the endpoint serves.

    python3 Fuzz/make-serve-corpus.py   # writes Fuzz/corpus/serve/*.bin
"""
import json
import os

import h2.config
import h2.connection

TOKEN = "0449e09d1eee4cac661266e08dc5fb2d40b8d4123ef0e0eea2815a53afe116ef"
PAYLOAD = json.dumps({"aps": {"event": "update", "timestamp": 1800000001, "content-state": {
    "home": 1, "away": 0, "clock": "1:00", "winProbability": 0.5, "final": False, "lastEvent": "x"}}}).encode()
REQUESTS = {
    "push": ("POST", f"/3/device/{TOKEN}", [("apns-push-type", "liveactivity"),
                                             ("apns-topic", "com.example.scores.push-type.liveactivity")], PAYLOAD),
    "broadcast": ("POST", "/4/broadcasts/apps/com.example.scores",
                  [("apns-channel-id", "c291cmNlLTAwMDAx"), ("apns-push-type", "LiveActivity"),
                   ("apns-priority", "10"), ("apns-expiration", "0")], PAYLOAD),
    "create-channel": ("POST", "/1/apps/com.example.scores/channels", [],
                       b'{"message-storage-policy": 1, "push-type": "LiveActivity"}'),
    "list-channels": ("GET", "/1/apps/com.example.scores/all-channels", [], b""),
    "bad-path": ("POST", "/nowhere", [], b"{}"),
}

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus", "serve")
os.makedirs(out, exist_ok=True)
for name, (method, path, headers, body) in REQUESTS.items():
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    for _ in range(2):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [(":method", method), (":path", path), (":scheme", "https"),
                                (":authority", "localhost")] + headers, end_stream=not body)
        if body:
            conn.send_data(sid, body, end_stream=True)
    data = conn.data_to_send()[24:]  # the target sends the preface itself
    with open(os.path.join(out, f"{name}.bin"), "wb") as f:
        f.write(data)
print(f"wrote {len(REQUESTS)} seeds to {out}")
