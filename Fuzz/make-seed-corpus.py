#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz targets (Fuzz/corpus/<target>/) from the tests.

    Fuzz/make-seed-corpus.py [path/to/fanout]

payload:  every distinct payload of the trace fixtures' push lines, behind the two selector bytes of
          FuzzPayload (target: token, channel or start token as in the line; headers: valid).
trace:    the trace fixtures (replayable and unreadable), the largest ones left out.
scenario: the minimal scenario of the tests, its error variants, and the built-in scenarios' canonical
          text when a fanout binary is given (`fanout scenarios show NAME`).
Files are named by the SHA-1 of their contents, as libFuzzer names what it adds.
"""
import hashlib
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "Tests/FanoutTraceTests/Fixtures"
CORPUS = ROOT / "Fuzz/corpus"
MAX_BYTES = 8192


def write(target, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)


def traces():
    return sorted(FIXTURES.glob("*/*.trace.jsonl"))


def payloads():
    # Target selector byte of FuzzPayload: 0 token aa01, 3 channel ch1, 4 start token 5501.
    selector = {"token": 0, "channel": 3, "startToken": 4}
    seen = set()
    for path in traces():
        for raw in path.read_bytes().split(b"\n")[1:]:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(line, dict) or line.get("op") != "push" or not isinstance(line.get("payload"), str):
                continue
            payload = line["payload"].encode("utf-8", "surrogatepass")
            kind = next((k for k in selector if isinstance(line.get(k), str)), "token")
            key = (selector[kind], payload)
            if key in seen or len(payload) > MAX_BYTES:
                continue
            seen.add(key)
            write("payload", bytes([selector[kind], 0]) + payload)


MINIMAL = """{
  "name": "t",
  "durationSeconds": 10,
  "population": {"devices": 10, "activitiesPerDevice": {"min": 1, "max": 2}},
  "apps": [{"bundle": "com.x", "schema": "S"}],
  "schemas": {"S": {"n": "int"}},
  "sources": {"count": 3},
  "arrival": {"ratePerSecond": 5}
}
"""

FULL = """{"name": "f", "description": "every field", "seed": 7, "clock": "virtual", "durationSeconds": 60,
 "workers": 2, "population": {"devices": 50, "activitiesPerDevice": {"min": 1, "max": 3},
 "appsPerDevice": {"min": 1, "max": 2}},
 "apps": [{"bundle": "com.a", "schema": "S", "weight": 2}, {"bundle": "com.b", "schema": "T", "weight": 0.5}],
 "schemas": {"S": {"n": "int", "s": "string?"}, "T": {"d": "double", "b": "bool"}}, "stringBytes": 8,
 "sources": {"count": 10, "zipfExponent": 1.2, "broadcastShare": 0.3},
 "arrival": {"process": "constant", "ratePerSecond": 10,
  "phases": [{"atSeconds": 30, "ratePerSecond": 10, "rampToPerSecond": 20}],
  "bursts": [{"atSeconds": 5, "events": 100, "sourceRank": 2, "overSeconds": 0.5}]},
 "faults": {"outOfOrderShare": 0.1, "malformedShare": 0.01, "oversizedShare": 0.01, "rotationShare": 0.02,
  "dismissShare": 0.001, "offline": {"share": 0.1, "windowSeconds": 5, "expirationSeconds": 10},
  "coalescing": true},
 "lifecycle": {"endFractionMin": 0.5, "endFractionMax": 0.9, "dismissalAfterSeconds": 60},
 "limits": {"perApp": 3, "perDevice": 6}, "budgetPerHour": 100, "priority10Share": 0.25,
 "stageSampleEvery": 4}
"""


def scenarios(fanout):
    write("scenario", MINIMAL.encode())
    write("scenario", FULL.encode())
    for old, new in [('"devices": 10,', '"devices": -1,'), ('"schema": "S"', '"schema": "T"'),
                     ('{"n": "int"}', '{"n": "float"}'), ('"ratePerSecond": 5}', '"ratePerSecond": 5, "x": 1}'),
                     ('"durationSeconds": 10,', '"durationSeconds": 10, "clock": "wall",')]:
        write("scenario", MINIMAL.replace(old, new).encode())
    if fanout:
        for name in ["default", "smoke", "million"]:
            write("scenario", subprocess.run([fanout, "scenarios", "show", name], check=True,
                                             capture_output=True).stdout)


def main():
    for path in traces():
        data = path.read_bytes()
        if len(data) <= MAX_BYTES:
            write("trace", data)
    payloads()
    scenarios(sys.argv[1] if len(sys.argv) > 1 else None)


if __name__ == "__main__":
    main()
