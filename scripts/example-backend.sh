#!/usr/bin/env bash
# The whole loop, end to end: fanout serve (TLS, ES256 provider tokens) registers every activity with the example
# backend (examples/backend-aioapns), then sends it the scenario's events at their intended times; the backend
# pushes to fanout serve through aioapns (and broadcasts through httpx); fanout correlates each push with its event
# (--expect-events) and writes the run folder: endToEnd (event → Lock Screen through the backend), missing and stale
# deliveries, the trigger's and the registration's counts. Prints the headline figures.
#
#   scripts/example-backend.sh [SECONDS] [OUT] [SCENARIO]   # default 30, reports/runs/<UTC time>-example-backend, smoke
#
# BACKEND_ARGS is passed on to backend.py, split at spaces: BACKEND_ARGS="--drop-every 10" runs it with its
# deliberate fault (the README's "a gate for your backend's CI"); SERVE_ARGS likewise to fanout serve
# (SERVE_ARGS="--settle 3").
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
out=${2:-reports/runs/$(date -u +%Y%m%dT%H%M%SZ)-example-backend}
scenario=${3:-smoke}
bin=${FANOUT_BIN:-.build/release/fanout}
work=$(mktemp -d)
read -r -a backend_args <<< "${BACKEND_ARGS:-}"
read -r -a serve_args <<< "${SERVE_ARGS:-}"
backend_pid=""
# The backend gets SIGTERM, and SIGKILL if it has not ended a second later (aioapns may still be retrying).
cleanup() {
    if [ -n "$backend_pid" ]; then
        kill "$backend_pid" 2>/dev/null || true
        for _ in $(seq 1 10); do kill -0 "$backend_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$backend_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" \
    -days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/auth.p8" 2>/dev/null
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
serve_port=$(free_port)
backend_port=$(free_port)

python3 examples/backend-aioapns/backend.py --listen "127.0.0.1:$backend_port" --apns "localhost:$serve_port" \
    --ca "$work/cert.pem" --auth-key ABC123DEFG="$work/auth.p8" --team TEAM123456 \
    ${backend_args[@]+"${backend_args[@]}"} < /dev/null > "$work/backend.log" 2>&1 &
backend_pid=$!
[ -z "${BACKEND_ARGS:-}" ] || echo "backend arguments: ${BACKEND_ARGS}"
[ -z "${SERVE_ARGS:-}" ] || echo "fanout serve arguments: ${SERVE_ARGS}"
for _ in $(seq 1 100); do grep -q "listening" "$work/backend.log" 2>/dev/null && break; sleep 0.1; done
grep -q "listening" "$work/backend.log" || { cat "$work/backend.log"; echo "the backend did not start"; exit 1; }

status=0
"$bin" serve "$scenario" --listen "127.0.0.1:$serve_port" --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" \
    --auth jwt --auth-key ABC123DEFG="$work/auth.p8" --team TEAM123456 --workers 2 \
    --register "http://127.0.0.1:$backend_port/register" --register-rate 5000 \
    --trigger "http://127.0.0.1:$backend_port/trigger" --expect-events --duration "$seconds" --out "$out" \
    ${serve_args[@]+"${serve_args[@]}"} 2> "$work/serve.err" > "$work/serve.out" || status=$?
tail -3 "$work/serve.err"
echo "backend: $(curl -s "http://127.0.0.1:$backend_port/stats")"
[ "$status" = 0 ] || { echo "fanout serve exited $status"; exit "$status"; }
python3 - "$out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
r, t, e = s["registration"], s["trigger"], s["events"]
print(f"registration: {r['registered']} of {r['activities']} activities registered, {r['failed']} failed")
print(f"trigger: {t['sent']} events sent, by status {t['byStatus']}, {t['timeouts']} timeouts, {t['errors']} errors")
print(f"pushes: {s['requests']['acceptedPushes']} token pushes and {s['requests']['acceptedBroadcasts']} broadcasts "
      f"accepted of {s['requests']['total']} requests")
e2e = e["endToEnd"]
print(f"events: {e['dueEvents']} due of {e['events']}; deliveries {e['delivered']} delivered, {e['superseded']} "
      f"superseded, {e['missing']} missing of {e['expected']} expected; {e['staleAtEnd']} stale at the end; "
      f"{e['uncorrelated']} uncorrelated, {e['duplicate']} duplicate, {e['reordered']} reordered; identities "
      + ("hold" if e["identity"]["holds"] else "BROKEN"))
if e2e.get("count"):
    print(f"endToEnd (event's intended time → applied on the device, through the backend): p50 "
          f"{e2e['p50Nanos'] / 1e6:.1f} ms, p99 {e2e['p99Nanos'] / 1e6:.1f} ms, max {e2e['maxNanos'] / 1e6:.1f} ms "
          f"over {e2e['count']} deliveries")
PY
echo "run folder: $out"
