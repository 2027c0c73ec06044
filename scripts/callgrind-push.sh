#!/usr/bin/env bash
# Instructions per request of the two HTTP/2 clients at saturation, under callgrind (deterministic, immune to the
# machine's load): `fanout push` (smoke, --devices 1000, --rate-scale 1000: every request queued at once, as in
# make push-bench) and h2load (-c 1 -m 100 -t 1, one body, the same token paths), both against nghttpd (native,
# an empty file at every token path). Each client runs twice, with a small and a large request count; the
# difference of their totals over the difference of their counts is the cost of one request without start-up
# (population, TLS-less connect, exit). Prints the per-request figures and push's top functions per request.
# Release build first (make build).
#
# Push's work per second of the run is left out of both totals: `PushRun.closeSecond` (each second's interval
# spooled, deflated, the progress line) and `PushReport.write` (the report, whose latency.hlog and charts hold an
# entry per second), their inclusive costs. Under callgrind the larger run lasts more seconds (~1,000 requests a
# second h2c, fewer over TLS), so that work grew with the request count and was counted as per-request work
# (~800 instructions a request h2c, ~3,300 over TLS at 6fbbd8f), where at the rates push runs at it is a few per
# request. h2load is measured the same way, by the same code; it does nothing per second (no periodic timer with
# -n, one fixed-size report at the end), so its list of left-out functions is empty. The figures with that work
# included are printed too ("per-second work included").
#
# CALLGRIND_PUSH_TLS=1: the same over TLS (nghttpd with a throwaway self-signed certificate made in the temp
# directory, push https:// --insecure --connections 2, h2load https:// -c 2); start-up (the handshakes included)
# is left out the same way.
#
#   scripts/callgrind-push.sh   # CALLGRIND_PUSH_OUT=FILE to keep the output
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
out=${CALLGRIND_PUSH_OUT:-$work/callgrind-push.txt}
exec > >(tee "$out") 2>&1
rev=$(git rev-parse --short=12 HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] || rev="$rev (uncommitted changes)"
tls=${CALLGRIND_PUSH_TLS:-0}
scheme=http connections=1 push_tls=() mode=""
if [ "$tls" = 1 ]; then
    mode=", TLS, 2 connections"
    scheme=https connections=2 push_tls=(--insecure)
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
        -keyout "$work/key.pem" -out "$work/cert.pem" > /dev/null 2>&1
fi
echo "# scripts/callgrind-push.sh at commit $rev, $(date -u +%Y-%m-%dT%H:%MZ)$mode"
bin=${FANOUT_BIN:-.build/release/fanout}
$bin serve smoke --devices 1000 --seed 7 --workers 1 --h2c --listen 127.0.0.1:0 --out "$work/probe" \
    2> "$work/probe.err" &
probe=$!
for _ in $(seq 1 300); do grep -q "listening on" "$work/probe.err" 2>/dev/null && break; sleep 0.2; done
kill -TERM $probe; wait $probe || true
port=$((20000 + RANDOM % 20000))
python3 - "$work" "$port" "$scheme" <<'PY'
import json, os, sys
work, port, scheme = sys.argv[1], sys.argv[2], sys.argv[3]
tokens = [json.loads(l)["token"] for l in open(f"{work}/probe/population.jsonl")]
os.makedirs(f"{work}/htdocs/3/device")
for t in tokens:
    open(f"{work}/htdocs/3/device/{t}", "w").close()
open(f"{work}/uris", "w").write("".join(f"{scheme}://127.0.0.1:{port}/3/device/{t}\n" for t in tokens))
open(f"{work}/body", "w").write(json.dumps({"aps": {"event": "update", "timestamp": 1900000000, "content-state": {
    "home": 2, "away": 1, "clock": "81:00", "period": "2nd half", "winProbability": 0.71, "final": False,
    "lastEvent": "Goal! 81' header from a corner, assisted by the captain"}}}))
PY
if [ "$tls" = 1 ]; then
    nghttpd -n 1 -d "$work/htdocs" "$port" "$work/key.pem" "$work/cert.pem" > /dev/null 2>&1 &
else
    nghttpd --no-tls -n 1 -d "$work/htdocs" "$port" > /dev/null 2>&1 &
fi
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
total() { callgrind_annotate "$1" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }
cg() { valgrind --tool=callgrind --callgrind-out-file="$1" "${@:2}" > "$1.stdout" 2> "$1.stderr"; }
for d in 0.1 0.3; do
    cg "$work/push-$d.cg" $bin push "$scheme://127.0.0.1:$port" smoke --devices 1000 --seed 7 --streams 100 \
        --connections $connections ${push_tls[@]+"${push_tls[@]}"} \
        --rate-scale 1000 --duration $d --drain 3000 --max-queued 10000000 --request-timeout 3600 \
        --connect-timeout 600 --out "$work/push-$d" || true
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['requests']; print(r['answered'])" \
        "$work/push-$d/summary.json" > "$work/push-$d.n"
done
for n in 30000 100000; do
    cg "$work/h2load-$n.cg" h2load -n $n -c $connections -m 100 -t 1 -d "$work/body" \
        -H "apns-push-type: liveactivity" \
        -H "apns-priority: 10" -H "apns-topic: com.example.scores.push-type.liveactivity" -i "$work/uris"
    echo $n > "$work/h2load-$n.n"
done
python3 - "$work" <<'PY'
import re, subprocess, sys
work = sys.argv[1]
# Work done per second of the run (or per second recorded), not per request: left out by inclusive cost, every
# entry of the function (callgrind splits a function's cost by the source file of its inlined lines).
PER_SECOND = {
    "fanout push": [
        "$s10FanoutPush0B3RunC11closeSecond5finalySb_tF",
        "$s12FanoutReport04PushB0O5write6folder_11gitRevision10thresholdsySS_0A7Metrics0C7ResultsVSSSgSayAA0C9Threshold"
        "VGtKFZ",
    ],
    "h2load": [],
}
def costs(f, functions):
    """The program's total, and the per-second functions' inclusive costs summed."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--auto=no", "--threshold=100", f],
                         capture_output=True, text=True).stdout
    total = int(next(l for l in out.splitlines() if "PROGRAM TOTALS" in l).split()[0].replace(",", ""))
    found = {fn: 0 for fn in functions}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+\S*?:(\S+)", line)
        if m and m.group(2) in found:
            found[m.group(2)] += int(m.group(1).replace(",", ""))
    missing = [fn for fn, cost in found.items() if cost == 0]
    if missing:
        sys.exit(f"callgrind-push: no cost for {missing} in {f}: renamed? (the per-second work must be found)")
    return total, sum(found.values())
for name, (a, b) in [("fanout push", ("push-0.1", "push-0.3")), ("h2load", ("h2load-30000", "h2load-100000"))]:
    na, nb = (int(open(f"{work}/{x}.n").read()) for x in (a, b))
    (ta, sa), (tb, sb) = (costs(f"{work}/{x}.cg", PER_SECOND[name]) for x in (a, b))
    print(f"{name}, per-second work included: {na} requests {ta:,} Ir, {nb} requests {tb:,} Ir: "
          f"{(tb - ta) / (nb - na):,.0f} Ir per request")
    print(f"{name}: {na} requests {ta - sa:,} Ir, {nb} requests {tb - sb:,} Ir (per-second work {sa:,} and {sb:,} "
          f"left out): {((tb - sb) - (ta - sa)) / (nb - na):,.0f} Ir per request")
PY
echo "# fanout push, top functions (the larger run, inclusive of nothing: self cost)"
callgrind_annotate --threshold=90 "$work/push-0.3.cg" | sed -n '/^Ir/,$p' | head -40 || true  # head's early exit: SIGPIPE upstream, not a failure
echo "# h2load, top functions"
callgrind_annotate --threshold=90 "$work/h2load-100000.cg" | sed -n '/^Ir/,$p' | head -25 || true
