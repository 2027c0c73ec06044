#!/bin/sh
# Issue 30's done-when for the start barrier, on one machine: four `fanout push --shard K/4` against one
# `fanout serve smoke --h2c`, shard 3 launched LATE seconds after the others.
#   barrier:  every shard with --barrier DIR: the barrier holds (all start within --max-start-skew of each other)
#             or the late shard refuses; `fanout merge` says which (shard starts, spread).
#   start-at: every shard with --start-at NOW+LEAD (LEAD < LATE): the late shard is ready after the start and
#             refuses (exit 7); `fanout merge` names it (exit 7).
# Usage: scripts/barrier-late-shard.sh [FANOUT] [WORKDIR]   (default .build/release/fanout, a new temporary folder)
set -u
FANOUT=${1:-.build/release/fanout}
WORK=${2:-$(mktemp -d /tmp/fanout-barrier-XXXXXX)}
LATE=${LATE:-3}
LEAD=${LEAD:-2.5}
DURATION=${DURATION:-10}
mkdir -p "$WORK"
echo "fanout: $FANOUT ($(cat "$FANOUT.revision" 2>/dev/null || git describe --always --dirty --abbrev=12)); work: $WORK"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"

serve() {  # $1: folder; prints the port
    "$FANOUT" serve smoke --h2c --listen 127.0.0.1:0 --out "$1" > "$1.log" 2>&1 &
    echo $! > "$1.pid"
    while ! grep -q 'listening on' "$1.log" 2>/dev/null; do sleep 0.05; done
    sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$1.log" | head -1
}

run_case() {  # $1: case name; $2...: the start flags of every shard
    name=$1; shift
    dir="$WORK/$name"; logs="$WORK/$name-logs"; mkdir -p "$dir" "$logs"
    port=$(serve "$logs/serve")
    for k in 0 1 2 3; do
        if [ "$k" = 3 ]; then sleep "$LATE"; fi
        "$FANOUT" push "http://127.0.0.1:$port" smoke --duration "$DURATION" --max-schedule-lag 5000 --drain 5 \
            --shard "$k/4" "$@" --out "$dir/push-shard-$k" > "$logs/push-shard-$k.log" 2>&1 &
        echo $! > "$logs/push-shard-$k.pid"
    done
    for k in 0 1 2 3; do
        wait "$(cat "$logs/push-shard-$k.pid")"; echo "  $name shard $k/4: exit $?"
    done
    kill -TERM "$(cat "$logs/serve.pid")"; wait "$(cat "$logs/serve.pid")"
    "$FANOUT" merge "$dir"/push-shard-* --out "$dir/merged" > "$logs/merge.log" 2>&1
    echo "  $name merge: exit $?"; sed 's/^/    /' "$logs/merge.log"
    python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
for k in range(4):
    s = json.load(open(f"{d}/push-shard-{k}/summary.json"))
    a, b = s.get("startAt") or {}, s.get("barrier") or {}
    started = a.get("startedUnixNanos")
    print(f"    shard {k}/4: ready {b.get('ownReadyUnixNanos', 0) / 1e9:.3f}  start "
          f"{(a.get('requestedSeconds') or 0):.3f}  started {started / 1e9 if started else 0:.6f}  skew "
          f"{(a.get('skewNanos') or 0) / 1e6:.3f} ms  sent {s['requests']['sent']}  refused {a.get('refused')}")
m = json.load(open(f"{d}/merged/summary.json"))["startAt"] or {}
print(f"    merged: spread {m.get('spreadNanos')} ns, withinSkew {m.get('withinSkew')}, notStarted "
      f"{m.get('notStarted')}, refused {m.get('refused')}")
PY
}

run_case barrier --barrier "$WORK/barrier-dir"
START=$(python3 -c "import time; print(f'{time.time() + $LEAD:.3f}')")
run_case start-at --start-at "$START"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
