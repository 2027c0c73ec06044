#!/usr/bin/env python3
"""Seeds for the push fuzz target (the client side): a setup byte (bits 0-2: requests submitted - 1; bit 3: the
target sends a valid server preface first; bit 4: small bounds; bit 5: the client's stream limit 2; bit 6: requests
submitted from the callbacks; bit 7: one more request between the two reads), a bounds byte (bit 0: --max-queued 2;
bit 1: stream ids 12 short of their end; bit 2: the request deadline swept; bit 3: PINGs swept; bit 4: the connect
deadline swept; see Sources/FuzzPush/FuzzPush.swift), then what a server sends: frames built here with the `hpack`
library's encoder (the client's streams are 1, 3, 5..., or from 2147483635 with bit 1).

    python3 Fuzz/make-push-corpus.py   # writes Fuzz/corpus/push/*.bin

Valid answers (200 with apns-id, 400 with a reason body, interim 100, trailers), RST_STREAM, GOAWAY (after an
answer, with an error, refusing streams), SETTINGS_MAX_CONCURRENT_STREAMS 0 and 1, a header block past the bounds
(HEADERS + CONTINUATION, many fields), a CONTINUATION flood, an endless body, a PUSH_PROMISE, SETTINGS and PING
floods, WINDOW_UPDATE, frames on streams never opened.
"""
import os
import struct

import hpack

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def settings(**values):
    ids = {"max_concurrent_streams": 3, "initial_window_size": 4, "max_frame_size": 5, "header_table_size": 1}
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v) for k, v in values.items()))


def apns_id(stream):
    return "00000000-0000-0000-0000-%012d" % (stream // 2)


class Server:
    def __init__(self):
        self.encoder = hpack.Encoder()

    def headers(self, stream, fields, end_stream=True, flags=END_HEADERS):
        return frame(HEADERS, flags | (END_STREAM if end_stream else 0), stream, self.encoder.encode(fields))

    def answer(self, stream, status=200):
        return self.headers(stream, [(":status", str(status)), ("apns-id", apns_id(stream))])


def seeds():
    preface = settings() + frame(SETTINGS, ACK, 0)
    s = Server()
    yield "ok-1", 0, preface + s.answer(1)
    s = Server()
    yield "ok-8", 7, preface + b"".join(s.answer(k) for k in range(1, 17, 2))
    s = Server()
    yield "ok-3-preface-by-target", 8 | 2, b"".join(s.answer(k) for k in (1, 3, 5))
    s = Server()
    body = b'{"reason":"BadDeviceToken"}'
    yield "bad-token", 1, preface + s.headers(1, [(":status", "400"), ("apns-id", apns_id(1)),
                                                ("content-length", str(len(body)))], end_stream=False) + frame(
        DATA, END_STREAM, 1, body) + s.answer(3)
    s = Server()
    yield "interim-and-trailers", 1, preface + s.headers(1, [(":status", "100")], end_stream=False) + s.headers(
        1, [(":status", "200"), ("apns-id", apns_id(1))], end_stream=False) + frame(DATA, 0, 1, b"{}") + s.headers(
        1, [("x-trailer", "t")]) + s.answer(3)
    s = Server()
    yield "reset", 3, preface + s.answer(1) + frame(RST_STREAM, 0, 3, struct.pack(">I", 8)) + frame(
        RST_STREAM, 0, 5, struct.pack(">I", 7)) + s.answer(7)
    s = Server()
    yield "goaway-after-one", 4, preface + s.answer(1) + frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0))
    yield "goaway-error", 0x40 | 2, preface + frame(GOAWAY, 0, 0, struct.pack(">II", 0, 2) + b"debug")
    s = Server()
    yield "goaway-then-answer", 0x80 | 3, preface + frame(GOAWAY, 0, 0, struct.pack(">II", 3, 0)) + s.answer(
        1) + s.answer(3)
    s = Server()
    yield "max-streams-0", 0x80 | 4, settings(max_concurrent_streams=0) + frame(SETTINGS, ACK, 0) + settings(
        max_concurrent_streams=2) + s.answer(1)
    s = Server()
    yield "max-streams-1", 0x20 | 3, settings(max_concurrent_streams=1) + frame(SETTINGS, ACK, 0) + s.answer(
        1) + s.answer(3) + s.answer(5)
    s = Server()
    many = [(":status", "200"), ("apns-id", apns_id(1))] + [("x-f%d" % k, "v" * 8) for k in range(150)]
    yield "many-header-fields", 1, preface + s.headers(1, many) + s.answer(3)
    s = Server()
    yield "many-header-fields-small-bounds", 0x10 | 1, preface + s.headers(1, many[:20]) + s.answer(3)
    s = Server()
    block = s.encoder.encode([(":status", "200"), ("apns-id", apns_id(1))] +
                             [("x-big%d" % k, "b" * 4000) for k in range(5)])
    chunks = [block[k:k + 4096] for k in range(0, len(block), 4096)]
    huge = frame(HEADERS, END_STREAM, 1, chunks[0]) + b"".join(
        frame(CONTINUATION, END_HEADERS if k == len(chunks) - 1 else 0, 1, c) for k, c in enumerate(chunks[1:], 1))
    yield "huge-header-block", 1, preface + huge + s.answer(3)
    s = Server()
    flood = frame(HEADERS, 0, 1, s.encoder.encode([(":status", "200")])) + frame(CONTINUATION, 0, 1) * 30
    yield "continuation-flood", 0, preface + flood
    s = Server()
    endless = s.headers(1, [(":status", "200"), ("apns-id", apns_id(1))], end_stream=False) + frame(
        DATA, 0, 1, b"x" * 1000) * 28
    yield "endless-body", 1, preface + endless
    s = Server()
    yield "endless-body-small-bounds", 0x10 | 1, preface + s.headers(
        1, [(":status", "200")], end_stream=False) + frame(DATA, 0, 1, b"y" * 100) * 5 + s.answer(3)
    s = Server()
    promise = struct.pack(">I", 2) + s.encoder.encode([(":method", "GET"), (":scheme", "https"),
                                                       (":authority", "x"), (":path", "/")])
    yield "push-promise", 1, preface + frame(PUSH_PROMISE, END_HEADERS, 1, promise) + s.answer(1)
    # More than nghttp2's 1,000 ACKs queued in one read: its flood protection ends the session.
    yield "settings-flood", 0, settings() + frame(SETTINGS, 0, 0) * 1100
    yield "ping-flood", 0, preface + frame(PING, 0, 0, b"12345678") * 1100
    yield "ping-some", 0, preface + frame(PING, 0, 0, b"12345678") * 20 + Server().answer(1)
    s = Server()
    yield "window-update-data", 0x40, preface + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20)) + frame(
        WINDOW_UPDATE, 0, 1, struct.pack(">I", 100)) + s.headers(1, [(":status", "200")], end_stream=False) + frame(
        DATA, END_STREAM, 1, b"{}")
    s = Server()
    yield "unopened-streams", 0, preface + s.answer(9) + frame(DATA, 0, 11, b"z") + frame(
        RST_STREAM, 0, 13, struct.pack(">I", 0)) + s.answer(1)
    s = Server()
    yield "priority-and-small-frames", 0x20 | 7, settings(max_frame_size=16384, header_table_size=0) + frame(
        PRIORITY, 0, 1, struct.pack(">IB", 0, 16)) + b"".join(s.answer(k) for k in range(1, 17, 2))
    # The bounds byte (a third field): the queue bound, the stream ids' end, the deadlines.
    # (The target's preface first, bit 3: the requests go out before the input answers them.)
    s = Server()
    yield "queue-bound", 8 | 0x20 | 7, s.answer(1) + s.answer(3) + s.answer(5), 1
    s = Server()
    last = 2147483647 - 12
    yield "stream-ids-end", 8 | 7, b"".join(s.answer(last + 2 * k) for k in range(4)), 2
    s = Server()
    yield "stream-ids-end-chained", 8 | 0x40 | 3, s.answer(last) + s.answer(last + 2) + s.answer(last + 4), 2
    s = Server()
    yield "request-timeout", 8 | 3, s.answer(1) + frame(PING, 0, 0, b"12345678") + s.answer(3), 4
    yield "ping-unanswered", 8 | 1, frame(PING, 0, 0, b"12345678"), 8
    s = Server()
    yield "connect-deadline", 3, preface + s.answer(1), 16
    s = Server()
    yield "all-deadlines", 0x20 | 0x80 | 5, preface + s.answer(1) + frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0)), 31


here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus", "push")
os.makedirs(out, exist_ok=True)
for old in os.listdir(out):
    os.remove(os.path.join(out, old))
count = 0
for name, setup, data, *bounds in seeds():
    assert len(data) + 2 <= 32768, name
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(bytes([setup, bounds[0] if bounds else 0]) + data)
    count += 1
print(f"wrote {count} seeds to {out}")
