#!/usr/bin/env bash
# The whole loop, end to end: fanout serve (TLS, ES256 provider tokens) registers every activity with the example
# backend (examples/backend-aioapns), then sends it the scenario's events at their intended times; the backend
# pushes to fanout serve through aioapns (and broadcasts through httpx); fanout correlates each push with its event
# (--expect-events) and writes the run folder: endToEnd (event → Lock Screen through the backend), missing and stale
# deliveries, the trigger's and the registration's counts. Prints the headline figures.
#
#   scripts/example-backend.sh [SECONDS] [OUT] [SCENARIO]   # default 30, reports/runs/<UTC time>-example-backend, smoke
#
# EXAMPLE_BACKEND_ARGS is passed on to backend.py, split at spaces: EXAMPLE_BACKEND_ARGS="--drop-every 10" runs it
# with its deliberate fault (docs/BACKEND.md, *A gate for your backend's CI*); SERVE_ARGS likewise to fanout serve
# (SERVE_ARGS="--settle 3", SERVE_ARGS="--faults 503=5% --seed 7", SERVE_ARGS="--latency p50=20ms,p99=80ms",
# SERVE_ARGS="--rate-scale 2"). EXAMPLE_BACKEND_INSTANCES=2 runs two instances of it, sharing one SQLite file,
# behind --register A,B and --trigger A,B (the per-URL counts are printed too). APP_EVENTS=1, for a scenario with
# faults.appEvents, passes the backend's /app-events to --app-events (EXAMPLE_BACKEND_ARGS="--ignore-app-events" plants
# the bug fanout counts as sentAfterAppEvent).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
out=${2:-reports/runs/$(date -u +%Y%m%dT%H%M%SZ)-example-backend}
scenario=${3:-smoke}
bin=${FANOUT_BIN:-.build/release/fanout}
read -r -a serve_args <<< "${SERVE_ARGS:-}"
# shellcheck source=scripts/example-backend-env.sh
source scripts/example-backend-env.sh
[ "${APP_EVENTS:-0}" = 1 ] && serve_args+=(--app-events "$APP_EVENTS_URLS")
[ -z "${EXAMPLE_BACKEND_ARGS:-}" ] || echo "backend arguments: ${EXAMPLE_BACKEND_ARGS}"
[ -z "${SERVE_ARGS:-}" ] || echo "fanout serve arguments: ${SERVE_ARGS}"

echo "example-backend: fanout serve $scenario for $seconds s: registers the activities with the example backend" \
    "($BACKEND_URL), sends it the scenario's events, judges the pushes it makes. Quiet until it ends (its stderr" \
    "goes to $WORK/serve.err, removed at exit); then its last 3 lines and the headline. Run folder: $out"
status=0
"$bin" serve "$scenario" "${SERVE_FLAGS[@]}" --workers 2 --register "$REGISTER_URLS" --register-rate 5000 \
    --trigger "$TRIGGER_URLS" --expect-events --duration "$seconds" --out "$out" \
    ${serve_args[@]+"${serve_args[@]}"} 2> "$WORK/serve.err" > "$WORK/serve.out" || status=$?
tail -3 "$WORK/serve.err"
for url in ${TRIGGER_URLS//,/ }; do echo "backend ${url%/trigger}: $(curl -s "${url%/trigger}/stats")"; done
# The pushes --drop-push-every dropped, for checking fanout's skipped against them (kept beside the run folder).
[ -d "$out" ] && curl -s "$BACKEND_URL/stats?dropped=1" > "$out/backend-dropped.json" || true
# 2 (an objective broken) and 3 (not judged) come with a run folder: its figures are shown, then the status.
case "$status" in 0 | 2 | 3) ;; *) echo "fanout serve exited $status"; exit "$status" ;; esac
python3 - "$out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
r, t, e = s["registration"], s["trigger"], s["events"]
print(f"registration: {r['registered']} of {r['activities']} activities registered, {r['failed']} failed")
print(f"trigger: {t['sent']} events sent, by status {t['byStatus']}, {t['timeouts']} timeouts, {t['errors']} errors")
for section, name in ((r, "registration"), (t, "trigger")):
    rows = section.get("byURL", [])
    if len(rows) > 1:
        print(f"{name} by URL ({'add up' if section['byURLAddsUp'] else 'do NOT add up'} to the totals): "
              + "; ".join(f"{u['url']} {u['sent']} sent, {u['successes']} 2xx, {u['failures']} failed" for u in rows))
print(f"pushes: {s['requests']['acceptedPushes']} token pushes and {s['requests']['acceptedBroadcasts']} broadcasts "
      f"accepted of {s['requests']['total']} requests")
e2e = e["endToEnd"]
print(f"verdict: {s['verdict']['line']}")
print(f"events: {e['dueEvents']} due of {e['events']}; deliveries {e['delivered']} delivered, {e['superseded']} "
      f"superseded, {e['missing']} missing of {e['expected']} expected; {e['staleAtEnd']} stale at the end; "
      f"{e['uncorrelated']} uncorrelated, {e['duplicate']} duplicate, {e['reordered']} reordered; identities "
      + ("hold" if e["identity"]["holds"] else "BROKEN"))
if "appEvents" in e:
    a = e["appEvents"]
    print(f"app events: {a['applied']} of {a['scheduled']} applied {a['appliedByKind']}, {a['requests']['told']} told "
          f"the backend; {a['notExpected']} pairs not expected any more; {a['sentAfterAppEvent']} pushes sent after "
          f"them {a['sentAfterAppEventByKind']}")
if "kickoff" in e:
    k = e["kickoff"]
    def ms(h, p):
        return f"{h[p] / 1e6:.1f} ms" if h.get("count") else "-"
    print(f"kickoff: {k['started']} of {k['due']} activities due started by push-to-start ({k['notStarted']} not "
          f"started {k['notStartedByReason']}), {k['registration']['registered']} registered by their app, "
          f"{k['followed']} followed; from the start intended: on the Lock Screen p50 {ms(k['toLockScreen'], 'p50Nanos')}"
          f" p99 {ms(k['toLockScreen'], 'p99Nanos')}, registered p50 {ms(k['toRegistered'], 'p50Nanos')} p99 "
          f"{ms(k['toRegistered'], 'p99Nanos')}, first update p50 {ms(k['toFirstUpdate'], 'p50Nanos')} p99 "
          f"{ms(k['toFirstUpdate'], 'p99Nanos')}")
if e.get("missingByReason"):
    print("missing by reason: " + ", ".join(f"{n} {k}" for k, n in sorted(e["missingByReason"].items(),
                                                                          key=lambda kv: -kv[1])))
f = e.get("refusedNotResent", {})
if f.get("pushes", 0) + f.get("broadcasts", 0):
    print(f"refused, never resent: {f['pushes']} pushes + {f['broadcasts']} broadcasts → {f['pairs']} pairs = "
          f"{f['missing']} missing + {f['superseded']} superseded + {f['delivered']} delivered + {f['notDue']} "
          f"not due ({f['unmatched']} unmatched)")
if e2e.get("count"):
    print(f"endToEnd (event's intended time → applied on the device, through the backend): p50 "
          f"{e2e['p50Nanos'] / 1e6:.1f} ms, p99 {e2e['p99Nanos'] / 1e6:.1f} ms, max {e2e['maxNanos'] / 1e6:.1f} ms "
          f"over {e2e['count']} deliveries")
PY
echo "run folder: $out"
exit "$status"
