#!/usr/bin/env bash
# Runs one fuzz target for a while and prints its executions and rate; exits non-zero on a crash,
# an invariant failure, a hang (-timeout) or running out of memory.
#
#   Fuzz/run.sh payload|trace|scenario|serve|push SECONDS [more libFuzzer flags]
#
# Build first (make fuzz does): cd Fuzz && swift build -c release -Xswiftc -sanitize=fuzzer,address
# Inputs start from the committed seeds (Fuzz/corpus/TARGET, read only); what libFuzzer finds goes to
# Fuzz/.build/fuzz/TARGET/corpus (kept between runs, never committed), a crashing input to
# Fuzz/.build/fuzz/TARGET/crash-* (reproduce: Fuzz/.build/release/FuzzTARGET FILE).
set -u
target=${1:?target: payload, trace, scenario, serve or push}
seconds=${2:?seconds}
shift 2
fuzz=$(cd "$(dirname "$0")" && pwd)
extra=()
case $target in
    payload) binary=FuzzPayload; max_len=6000 ;;  # 4096/5120-byte limits + 2 selector bytes
    trace) binary=FuzzTrace; max_len=16384 ;;
    scenario) binary=FuzzScenario; max_len=8192 ;;
    # The serve target is a server: its state (channels created, activities started, devices' updates) lives
    # from input to input, so libFuzzer's per-input leak check (run whenever an input allocates more than it
    # frees) would scan the whole heap after most inputs (7 times fewer executions/s). Leaks in the server are
    # left to LeakSanitizer over the serve tests (make test-sanitizers).
    serve) binary=FuzzServe; max_len=16384; extra=(-detect_leaks=0) ;;
    # The client side: one connection per input, nothing kept between inputs (the leak check stays on). 32 KiB: a
    # header block or a body past the client's default bounds (16 KiB, 64 KiB with the setup byte's bit 4 clear)
    # fits only with the small bounds, which the first byte picks.
    push) binary=FuzzPush; max_len=32768 ;;
    *) echo "unknown fuzz target $target (payload, trace, scenario, serve, push)" >&2; exit 2 ;;
esac
work=$fuzz/.build/fuzz/$target
mkdir -p "$work/corpus"
cat "$fuzz/dict/json.dict" "$fuzz/dict/$target.dict" > "$work/dict"
log=$work/fuzz.log
status=0
start=$(date +%s)
"$fuzz/.build/release/$binary" "$work/corpus" "$fuzz/corpus/$target" -dict="$work/dict" \
    -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$work/" "${extra[@]}" "$@" > "$log" 2>&1 || status=$?
elapsed=$(($(date +%s) - start))
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
corpus=$(find "$work/corpus" -type f | wc -l)
if [ "$status" -ne 0 ] || [ -z "$runs" ]; then
    grep -aE 'ERROR: |fuzz invariant|Fatal error|SUMMARY|^Test unit written|Base64' "$log" | head -20
    echo "fuzz $target: FAILED (exit $status) after ${runs:-?} executions; log: $log"
    exit 1
fi
printf 'fuzz %-8s %12s executions in %5s s, %7s exec/s, corpus %s inputs, no crash\n' \
    "$target" "$runs" "$elapsed" "$rate" "$corpus"
