#!/usr/bin/env bash
# A capacity plan of the example backend (examples/backend-aioapns): fanout plan --trigger, each step one fanout serve
# run (TLS, ES256 provider tokens, 2 event loops) that registers every activity with the backend, sends it the
# step's events at their intended times and judges every push it makes. Prints the knee and what broke first
# above it; the plan folder holds plan.md, plan.json, plan.html and each step's serve run folder.
#
#   scripts/plan-backend.sh [OUT] [SCENARIO] [-- more fanout plan flags]
#   default: reports/plans/<UTC time>-backend-smoke, smoke, --slo "endToEnd.p99<=250ms" --slo "missing==0"
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/plans/$(date -u +%Y%m%dT%H%M%SZ)-backend-smoke}
scenario=${2:-smoke}
shift $(( $# < 2 ? $# : 2 ))
[ "${1:-}" = "--" ] && shift
plan_flags=("$@")
[ ${#plan_flags[@]} -gt 0 ] || plan_flags=(--slo "endToEnd.p99<=250ms" --slo "missing==0")
bin=${FANOUT_BIN:-.build/release/fanout}
# shellcheck source=scripts/example-backend-env.sh
source scripts/example-backend-env.sh

"$bin" plan "$scenario" --trigger "$BACKEND_URL/trigger" --register "$BACKEND_URL/register" --out "$out" \
    "${plan_flags[@]}" -- "${SERVE_FLAGS[@]}" --workers 2 --register-rate 5000
echo "backend: $(curl -s "$BACKEND_URL/stats")"
