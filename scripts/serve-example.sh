#!/usr/bin/env bash
# The committed example of `fanout serve` (reports/examples/serve-default/): `fanout serve default --h2c`
# driven for about 20 s by h2load (token pushes to every com.example.scores activity, twice, so the second
# round shows up as duplicates), a few pushes to rotated-away and unknown tokens, and the Python client's
# broadcast and channel-management calls; then SIGTERM, and report.html rendered by headless Chromium.
#
#   scripts/serve-example.sh [OUT]   # default reports/examples/serve-default
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/examples/serve-default}
bin=.build/release/fanout
work=$(mktemp -d)
rm -rf "$out"
"$bin" serve default --h2c --listen 127.0.0.1:0 --out "$out" 2> "$work/serve.err" &
pid=$!
for _ in $(seq 1 200); do grep -q "listening on" "$work/serve.err" && break; sleep 0.1; done
port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$work/serve.err" | cut -d: -f2)
python3 - "$out" "$port" "$work" <<'PY'
import json, sys, time
out, port, work = sys.argv[1], sys.argv[2], sys.argv[3]
pop = [json.loads(l) for l in open(f"{out}/population.jsonl")]
scores = [p["token"] for p in pop if p["app"] == "com.example.scores"]
rotated = [json.loads(l)["token"] for l in open(f"{out}/rotated-tokens.jsonl")][:50]
with open(f"{work}/uris", "w") as f:
    for t in scores:
        f.write(f"http://127.0.0.1:{port}/3/device/{t}\n")
with open(f"{work}/bad-uris", "w") as f:
    for t in rotated:
        f.write(f"http://127.0.0.1:{port}/3/device/{t}\n")
    f.write(f"http://127.0.0.1:{port}/3/device/{'ab' * 32}\n")
now = int(time.time())
with open(f"{work}/payload.json", "w") as f:
    json.dump({"aps": {"event": "update", "timestamp": now, "relevance-score": 75, "content-state": {
        "home": 2, "away": 1, "clock": "81:00", "period": "2nd half", "winProbability": 0.71, "final": False,
        "lastEvent": "Goal! 81' header from a corner"}}}, f)
PY
headers=(-H "apns-push-type: liveactivity" -H "apns-topic: com.example.scores.push-type.liveactivity")
n=$(( $(wc -l < "$work/uris") * 2 ))
for _ in 1 2 3 4; do
    h2load -n "$n" -c 2 -m 64 -d "$work/payload.json" "${headers[@]}" -i "$work/uris" | grep -E "finished in|requests:"
    sleep 3
done
h2load -n 51 -c 1 -m 8 -d "$work/payload.json" "${headers[@]}" -i "$work/bad-uris" | grep -E "requests:|status codes"
python3 Tests/FanoutCLITests/Resources/serve_client.py channels "$port" "$out"
sleep 2
kill -TERM "$pid"
wait "$pid"
cp "$work/serve.err" "$out/serve.stderr.txt"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,3000 \
    --screenshot="$out/report.png" "file://$(cd "$out" && pwd)/report.html" 2>/dev/null
rm -rf "$work"
echo "example written to $out"
