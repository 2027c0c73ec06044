#!/usr/bin/env python3
"""Generate a synthetic, deterministic fanout trace (docs/TRACE.md) for examples and replay-rate runs.

A game night: devices request activities for matches (token updates), some subscribe to a match's
broadcast channel, scores change, tokens rotate, people dismiss, a few payloads are malformed or
oversized, a few pushes go to unknown tokens; every activity eventually ends.

    scripts/generate-trace.py --devices 2000 --lines 100000 --seed 7 > trace.jsonl
"""
import argparse
import json
import random
import sys

SCHEMA = {"home": "int", "away": "int", "clock": "string", "period": "string?",
          "winProbability": "double", "final": "bool"}
APPS = ["com.example.scores", "com.example.football"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=200)
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--matches", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out = sys.stdout
    dumps = lambda obj: json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    out.write(dumps({"trace": 1, "epoch": 1700000000, "schemas": {"GameAttributes": SCHEMA},
                     "limits": {"perApp": 5, "perDevice": 10}, "budgetPerHour": 120}) + "\n")
    at = 0
    lines = 1
    activities = []  # (id, app, token, match)
    scores = {}
    next_token = 1
    ts = 1700000000

    def token() -> str:
        nonlocal next_token
        next_token += 1
        return "%040x" % (next_token * 2654435761 % (1 << 160))

    def state(match: int, final: bool = False) -> dict:
        home, away = scores.get(match, (0, 0))
        return {"home": home, "away": away, "clock": "%02d:%02d" % (rng.randrange(90), rng.randrange(60)),
                "period": rng.choice(["1st", "2nd", None]), "winProbability": round(rng.random(), 3),
                "final": final}

    def push(target: dict, event: str, match: int, priority: int = 10, payload: str | None = None) -> dict:
        nonlocal ts
        ts += 1
        app = target.pop("_app")
        if payload is None:
            aps = {"timestamp": ts, "event": event, "content-state": state(match, event == "end"),
                   "relevance-score": rng.choice([0, 10, 50, 100])}
            if rng.random() < 0.2:
                aps["stale-date"] = 1700000000 + at // 1000 + rng.randrange(60, 7200)
            if event == "end" and rng.random() < 0.5:
                aps["dismissal-date"] = 1700000000 + at // 1000 + rng.randrange(0, 7200)
            payload = dumps({"aps": aps})
        line = {"at": at, "op": "push", **target, "pushType": "liveactivity",
                "topic": app + ".push-type.liveactivity", "priority": priority, "expiration": 0,
                "collapseId": None, "apnsId": None, "payload": payload}
        return line

    while lines < args.lines:
        at += rng.randrange(0, 400)
        r = rng.random()
        if r < 0.12 or len(activities) < 20:
            device = "device-%06d" % rng.randrange(args.devices)
            app = rng.choice(APPS)
            match = rng.randrange(args.matches)
            aid = "act-%07d" % len(activities)
            tok = token()
            channel = "match-%03d" % match if rng.random() < 0.4 else None
            line = {"at": at, "op": "request", "device": device, "app": app, "activity": aid,
                    "type": "GameAttributes", "attributes": {"match": match}, "state": state(match),
                    "staleDate": None, "relevance": rng.choice([0, 25, 50]), "token": tok, "channel": channel}
            activities.append([aid, app, tok, match])
        elif r < 0.80:
            aid, app, tok, match = rng.choice(activities)
            if rng.random() < 0.3:
                home, away = scores.get(match, (0, 0))
                scores[match] = (home + 1, away) if rng.random() < 0.5 else (home, away + 1)
            event = "end" if rng.random() < 0.03 else "update"
            priority = 10 if rng.random() < 0.7 else 5
            payload = None
            k = rng.random()
            if k < 0.01:
                payload = '{"aps":{"timestamp":1,"event":"update","content-state":{'  # malformed
            elif k < 0.015:
                payload = dumps({"aps": {"timestamp": ts, "event": "update", "content-state": state(match),
                                         "pad": "x" * 4100}})  # oversized
            elif k < 0.03:
                payload = dumps({"aps": {"timestamp": ts - 100, "event": "update", "content-state": state(match)}})
            line = push({"token": tok, "_app": app}, event, match, priority, payload)
        elif r < 0.90:
            match = rng.randrange(args.matches)
            line = push({"channel": "match-%03d" % match, "_app": APPS[0]}, "update", match, 10)
        elif r < 0.94:
            entry = rng.choice(activities)
            entry[2] = token()
            line = {"at": at, "op": "rotate", "activity": entry[0], "token": entry[2]}
        elif r < 0.96:
            line = {"at": at, "op": "dismiss", "activity": rng.choice(activities)[0]}
        elif r < 0.98:
            line = push({"token": token(), "_app": APPS[0]}, "update", 0)  # never issued → Unregistered
        else:
            line = {"at": at, "op": "advance"}
        out.write(dumps(line) + "\n")
        lines += 1


if __name__ == "__main__":
    main()
