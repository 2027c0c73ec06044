#!/bin/bash
# fanout push against h2load --rps at a low rate (docs/PUSH.md, "Timer resolution at a low rate"): each client
# against its own fresh `fanout serve smoke --h2c --workers 1` on 127.0.0.1, p50/p90/p99 printed.
#   scripts/push-lowrate.sh BINARY trace|smoke [SECONDS] [WORKDIR]
# trace: a trace of 220 pushes a second, evenly spaced (as h2load spaces --rps), each to a token of serve's
# population.jsonl with h2load's body; smoke: the smoke scenario itself (~220 pushes a second, in bursts).
set -euo pipefail
BIN=$1; MODE=$2; SECS=${3:-10}; W=${4:-$(mktemp -d)}
mkdir -p "$W"
serve() {
    PORT=$((20000 + RANDOM % 20000))
    "$BIN" serve smoke --h2c --workers 1 --listen 127.0.0.1:$PORT --out "$W/serve-$1" > "$W/serve-$1.log" 2>&1 &
    SERVE=$!
    for _ in $(seq 1 600); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.5; done
}
stop() { kill -INT $SERVE; wait $SERVE || true; }
serve push
python3 - "$W" $PORT $SECS <<'PY'
import glob, json, sys, time
w, port, secs = sys.argv[1], sys.argv[2], int(sys.argv[3])
now = int(time.time())
payload = json.dumps({"aps": {"timestamp": now + 60, "event": "update", "content-state": {
    "home": 2, "away": 1, "clock": "81:00 minute", "period": "2nd half end", "winProbability": 0.71, "final": False,
    "lastEvent": "Goal! header"}, "stale-date": now + 3600, "relevance-score": 75}}, separators=(",", ":"))
open(w + "/body.json", "w").write(payload)
tokens = [json.loads(l)["token"] for l in open(w + "/serve-push/population.jsonl") if '"token"' in l]
with open(w + "/tokens.txt", "w") as f:
    f.write("\n".join(tokens) + "\n")
with open(w + "/uniform.trace.jsonl", "w") as f:
    f.write(json.dumps({"trace": 1, "epoch": now, "schemas": {"S": {"n": "int"}},
                        "limits": {"perApp": 5, "perDevice": 10}, "budgetPerHour": None}) + "\n")
    for k in range(220 * secs):  # 10 ms apart, sent 2.2 times as fast: 4.55 ms
        f.write(json.dumps({"at": k * 10, "op": "push", "token": tokens[k % len(tokens)], "pushType": "liveactivity",
                            "topic": "com.example.scores.push-type.liveactivity", "priority": 10, "expiration": 0,
                            "collapseId": None, "apnsId": None, "payload": payload}) + "\n")
PY
if [ "$MODE" = trace ]; then
    "$BIN" push http://127.0.0.1:$PORT "$W/uniform.trace.jsonl" --rate-scale 2.2 --out "$W/push" \
        2> "$W/push.err" || true
else
    "$BIN" push http://127.0.0.1:$PORT smoke --duration $SECS --out "$W/push" 2> "$W/push.err" || true
fi
stop
python3 - "$W" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/push/summary.json"))
for k in ["latency", "answeredLatency", "scheduleLag", "dispatchLag", "streamWait"]:
    if k in s:
        print(f"push {k}: " + ", ".join(f"{p} {s[k][p + 'Nanos'] / 1e3:.1f} us" for p in ["p50", "p90", "p99"]))
print("push by status", s["requests"]["byStatus"], "verdict", s.get("verdict"), "exit", s["exitCode"])
PY
serve h2load
sed "s|^|http://127.0.0.1:$PORT/3/device/|" "$W/tokens.txt" > "$W/uris.txt"
h2load -c 1 -m 100 -t 1 -d "$W/body.json" -H 'apns-push-type: liveactivity' -H 'apns-priority: 10' \
    -H 'apns-topic: com.example.scores.push-type.liveactivity' -i "$W/uris.txt" --rps 220 -D $SECS \
    --log-file "$W/h2load.log" > "$W/h2load.out"
stop
python3 - "$W" <<'PY'
import collections, sys
rows = [x.split("\t") for x in open(sys.argv[1] + "/h2load.log") if x.strip()]
l = sorted(int(r[2]) for r in rows)
at = lambda p: l[min(len(l) - 1, max(0, int(-(-p * len(l) // 100)) - 1))]
print("h2load latency: " + ", ".join(f"p{p} {at(p)} us" for p in [50, 90, 99]),
      "by status", dict(collections.Counter(r[1] for r in rows)))
PY
