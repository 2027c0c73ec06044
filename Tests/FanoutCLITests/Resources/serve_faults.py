#!/usr/bin/env python3
"""A real HTTP/2 client (`h2`) against `fanout serve --faults/--latency` (started and stopped by
ServeFaultsCommandTests). Prints one JSON object with what it saw; exits 1 with a message on the first failed
expectation. (GOAWAY is tested with nghttp: `h2` refuses frames after a GOAWAY, even of streams in flight.)

    serve_faults.py answers PORT FOLDER COUNT   pushes one at a time; each answer is APNs's exact one, or a reset;
                                                a refused push is sent once more (a retry), every other
                                                one under a fresh apns-id
    serve_faults.py dropheld PORT FOLDER COUNT  pushes whose answers are held, then the connection is closed
"""
import json
import sys
import time
import uuid

from serve_client import RESULT, Client, expect, fail, live_payload, population

REASONS = {503: "ServiceUnavailable", 429: "TooManyRequests", 500: "InternalServerError"}


def push_headers(p, apns_id):
    return [("apns-push-type", "liveactivity"), ("apns-topic", p["app"] + ".push-type.liveactivity"),
            ("apns-id", apns_id)]


def answers(port, folder, count):
    p = population(folder)[0]
    c = Client(port)
    seen = {"200": 0, "503": 0, "429": 0, "500": 0, "reset": 0}
    refused = {"first": 0, "retry": 0}
    for k in range(count):
        apns_id = str(uuid.uuid4())
        payload = live_payload(ts=1_800_000_000 + k)  # each push its own update
        if answer(c, p, apns_id, payload, seen) != "200":
            refused["first"] += 1
            # The same update again: every other one under a fresh apns-id (as a client that makes one per attempt).
            again = apns_id if refused["first"] % 2 else str(uuid.uuid4())
            if answer(c, p, again, payload, seen) != "200":
                refused["retry"] += 1
    RESULT["seen"] = seen
    RESULT["refused"] = refused
    c.close()


def answer(c, p, apns_id, payload, seen):
    """Sends one push and checks its answer; returns "200", the status, or "reset"."""
    sid = c.send("POST", f"/3/device/{p['token']}", push_headers(p, apns_id), payload)
    c.pump(lambda: c.responses.get(sid, {}).get("done") or sid in c.resets or c.terminated)
    expect(not c.terminated, f"the connection stays open: {c.terminated}")
    if sid in c.resets:
        expect(c.reset_codes[sid] == 2, f"RST_STREAM INTERNAL_ERROR (2), got {c.reset_codes[sid]}")
        seen["reset"] += 1
        return "reset"
    r = c.responses[sid]
    status = int(r["headers"][":status"])
    expect(r["headers"].get("apns-id") == apns_id, f"{status}: the request's apns-id, got {r['headers']}")
    if status == 200:
        expect(r["body"] == b"", "200 has no body")
    else:
        expect(status in REASONS, f"an injected status, got {status} {r['body']}")
        expect(r["body"] == ('{"reason":"%s"}' % REASONS[status]).encode(), f"APNs's body, got {r['body']}")
        expect(r["headers"].get("content-type") == "application/json", f"JSON: {r['headers']}")
        expect(r["headers"].get("content-length") == str(len(r["body"])), "content-length")
    seen[str(status)] += 1
    return str(status)


def dropheld(port, folder, count):
    p = population(folder)[0]
    c = Client(port)
    for _ in range(count):
        c.send("POST", f"/3/device/{p['token']}", push_headers(p, str(uuid.uuid4())), live_payload())
    time.sleep(0.1)
    c.receive_once()
    expect(not any(r.get("done") for r in c.responses.values()), "no answer yet: they are held")
    c.sock.close()  # gone without a word, answers still held


if __name__ == "__main__":
    mode = sys.argv[1]
    args = sys.argv[2:]
    if mode == "answers":
        answers(int(args[0]), args[1], int(args[2]))
    elif mode == "dropheld":
        dropheld(int(args[0]), args[1], int(args[2]))
    else:
        fail(f"unknown mode {mode}")
    RESULT["ok"] = True
    print(json.dumps(RESULT))
