#!/usr/bin/env bash
# Instructions per applied request of `fanout serve` (one loop, h2c) under callgrind: the server starts the
# scenario scripts/push-bench.json (one app, one schema, 200,000 activities) with instrumentation off, h2load sends
# N token pushes, each to a different activity (N <= 200,000), so every request is applied by its device; the
# script fails if any was not. Instrumentation covers exactly those requests; prints the total per request (the
# loops' once-a-second tick left out, see below), the share inside libnghttp2's own code and the top functions.
# Then the same requests against nghttpd (nghttp2's C server answering an empty file), for the instruction count
# of the C reference on this machine. Release build first (make build).
#
# Everything printed is also written to reports/benchmarks/callgrind-serve-<date>.txt with the commit, the
# command and how many requests the devices applied, so the figure in docs/BACKEND.md (*Throughput*) has a
# committed output.
#
#   scripts/callgrind-serve.sh [REQUESTS]   # default 20000
#   CALLGRIND_SERVE_WORKERS=2 scripts/callgrind-serve.sh   # two event loops: about half the requests cross loops
#   CALLGRIND_SERVE_SCENARIO=smoke scripts/callgrind-serve.sh   # another scenario (its requests need not apply)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20000}
scenario=${CALLGRIND_SERVE_SCENARIO:-scripts/push-bench.json}
work=$(mktemp -d)
out=${CALLGRIND_SERVE_OUT:-reports/benchmarks/callgrind-serve-$(date +%Y-%m-%d).txt}
mkdir -p "$(dirname "$out")"
exec > >(tee "$out") 2>&1
rev=$(git rev-parse --short=12 HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] || rev="$rev (uncommitted changes)"
echo "# scripts/callgrind-serve.sh $n at commit $rev, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# fanout serve $scenario --workers ${CALLGRIND_SERVE_WORKERS:-1} --h2c; 4 × h2load -n $((n / 4)) -c 1 -m 64 -t 1 (a token each), one compact liveactivity update body"
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg.out" \
    .build/release/fanout serve "$scenario" --workers ${CALLGRIND_SERVE_WORKERS:-1} --h2c --listen 127.0.0.1:0 --out "$work/run" 2> "$work/err" &
pid=$!  # valgrind's own pid: callgrind_control below names it, so no other callgrind run on the machine is touched
for _ in $(seq 1 1500); do grep -q "listening on" "$work/err" 2>/dev/null && break; sleep 0.2; done
port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$work/err" | cut -d: -f2)
python3 - "$work" "$port" <<'PY'
import json, sys
work, port = sys.argv[1], sys.argv[2]
tokens = [json.loads(l)["token"] for l in open(f"{work}/run/population.jsonl") if json.loads(l)["app"] == "com.example.scores"]
# h2load's clients each walk the URI list from its start: four h2load processes of one connection each, every one
# with its own quarter of the tokens, so no activity is pushed twice (the same timestamp again would be stale).
for c in range(4):
    open(f"{work}/uris{c}", "w").write("".join(f"http://127.0.0.1:{port}/3/device/{t}\n" for t in tokens[c::4]))
# Compact JSON, as most APNs clients send it (Go's encoding/json, Jackson, JSON.stringify): the devices judge it in
# one pass. With Python's default separators (", ", ": ") it goes the general way, the tape scan: about 2,300 more.
open(f"{work}/body", "w").write(json.dumps({"aps": {"event": "update", "timestamp": 1900000000, "content-state": {
    "home": 2, "away": 1, "clock": "81:00", "winProbability": 0.71, "final": False, "lastEvent": "goal"}}},
    separators=(",", ":")))
PY
callgrind_control -i on "$pid" > /dev/null
clients=()
for c in 0 1 2 3; do
    h2load -n $((n / 4)) -c 1 -m 64 -t 1 -d "$work/body" -H "apns-push-type: liveactivity" \
        -H "apns-topic: com.example.scores.push-type.liveactivity" -i "$work/uris$c" > "$work/h2load$c.txt" &
    clients+=($!)
done
wait "${clients[@]}"
grep -h -E "^requests:" "$work"/h2load[0-3].txt
callgrind_control -i off "$pid" > /dev/null
kill -INT "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
python3 - "$work/run/summary.json" "$n" "$scenario" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
o = s["accounting"]["outcomes"]
print(f"fanout serve answered {s['requests']['total']} requests ({s['requests']['byStatus']}); the devices applied "
      f"{o['applied']}, ignored {o['ignoredStaleTimestamp']} as stale (same timestamp again)")
if sys.argv[3] == "scripts/push-bench.json" and o["applied"] != int(sys.argv[2]):
    sys.exit(f"callgrind-serve: {o['applied']} of {sys.argv[2]} requests applied; the figure is per applied request")
PY
all=$(callgrind_annotate "$work/cg.out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
nghttp2=$(callgrind_annotate "$work/cg.out" | awk '/libnghttp2/ {gsub(",", "", $1); s += $1} END {print s}')
# Each loop's once-a-second tick (the interval's histograms closed and merged, deadlines swept, progress): its
# cost is per second, not per request, and under callgrind a second holds some 300 times fewer requests than it
# does natively (about 900 against 280,000 on one loop of a 2-core machine), so it is taken out of the
# per-request figure (and printed beside it) rather than left to move it with the machine's load.
tick=$(callgrind_annotate --inclusive=yes "$work/cg.out" \
    | awk '/APNsServerC4tick/ {gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0} END {print m + 0}')
total=$((all - tick))
echo "instructions per request: $((total / n)) (libnghttp2's own code: $((nghttp2 / n)); the loops' once-a-second" \
    "tick left out: $((tick / n)) per request at callgrind's pace, $((all / n)) with it)"
callgrind_annotate "$work/cg.out" | sed -n '/file:function/,$p' | sed -n 3,17p | cut -c1-160
cp "$work/cg.out" "${CALLGRIND_SERVE_KEEP:-/tmp/cg-last.out}" 2>/dev/null || true

# The C reference: nghttpd, one thread, the same h2load command; dumped on demand (it exits on SIGKILL only).
mkdir -p "$work/htdocs"
: > "$work/htdocs/empty"
nport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/ng.out" \
    nghttpd -d "$work/htdocs" --no-tls "$nport" > /dev/null 2> "$work/ng.err" &
ngpid=$!
for _ in $(seq 1 300); do
    python3 -c "import socket, sys; socket.create_connection(('127.0.0.1', $nport)).close()" 2>/dev/null && break
    sleep 0.2
done
callgrind_control -i on "$ngpid" > /dev/null
h2load -n "$n" -c 4 -m 64 -t 1 -d "$work/body" -H "apns-push-type: liveactivity" \
    -H "apns-topic: com.example.scores.push-type.liveactivity" "http://127.0.0.1:$nport/empty" | grep -E "requests:"
callgrind_control -i off "$ngpid" > /dev/null
callgrind_control -d "$ngpid" > /dev/null
kill -KILL "$ngpid" 2>/dev/null || true
wait "$ngpid" 2>/dev/null || true
dump=$(ls -t "$work"/ng.out* | head -1)
ntotal=$(callgrind_annotate "$dump" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
nlib=$(callgrind_annotate "$dump" | awk '/libnghttp2/ {gsub(",", "", $1); s += $1} END {print s}')
echo "nghttpd, same requests: $((ntotal / n)) instructions per request (libnghttp2's own code: $((nlib / n)))"
rm -rf "$work"
