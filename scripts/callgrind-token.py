#!/usr/bin/env python3
"""Instructions per pipeline.token update, counted by callgrind: deterministic, unlike wall clock.

    callgrind-token.py show     # measure, print the figure and the top functions
    callgrind-token.py check    # measure; fail if the figure moved more than ±2% from the committed one
    callgrind-token.py update   # measure and write the committed figure (re-baseline)

Runs `callgrind-token N` (Benchmarks/Sources/CallgrindToken: N token updates, encode → validate → route →
apply, after a warm-up) under `valgrind --tool=callgrind` for two values of N, collecting only inside
`runUpdates`, and divides the difference in instructions by the difference in N: setup, warm-up and
the per-call constant cancel out. The binary is the release build of the Benchmarks package.
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind_common import ROOT, annotate, judge_figure, run, write_figure  # noqa: E402

BENCH = os.path.join(ROOT, "Benchmarks")
FIGURE = os.path.join(BENCH, "Thresholds", "callgrind.pipeline.token.txt")
OUT_DIR = os.path.join(BENCH, ".build", "callgrind")
N1, N2 = 10_000, 30_000
TOLERANCE_PERCENT = 2.0


def build():
    swift = os.environ.get("SWIFT", "swift")
    run([swift, "build", "-c", "release", "--product", "callgrind-token"], cwd=BENCH, stdout=subprocess.DEVNULL)
    path = run([swift, "build", "-c", "release", "--show-bin-path"], cwd=BENCH, capture_output=True).stdout.strip()
    return os.path.join(path, "callgrind-token")


def instructions(binary, n):
    out = os.path.join(OUT_DIR, f"token.{n}.out")
    env = dict(os.environ, SWIFT_DETERMINISTIC_HASHING="1")
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--toggle-collect=*runUpdates*",
         binary, str(n)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"callgrind-token: `callgrind-token {n}` failed under valgrind (status {proc.returncode})")
    match = re.search(r"Collected : (\d+)", proc.stderr)
    if not match:
        raise SystemExit(f"callgrind-token: no instruction count in valgrind's output:\n{proc.stderr}")
    return int(match.group(1)), out


def top_functions(out_file, count=15):
    """Self instructions of the busiest functions (Swift names demangled)."""
    return annotate(out_file)[:count]


def measure():
    os.makedirs(OUT_DIR, exist_ok=True)
    binary = build()
    i1, _ = instructions(binary, N1)
    i2, out2 = instructions(binary, N2)
    per_update = (i2 - i1) / (N2 - N1)
    return per_update, i1, i2, out2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["show", "check", "update"])
    args = ap.parse_args()
    per_update, i1, i2, out2 = measure()
    print(f"callgrind: {i1:,} instructions for {N1:,} updates, {i2:,} for {N2:,}")
    print(f"callgrind: {per_update:,.1f} instructions per pipeline.token update (Δ instructions / Δ updates)")
    if args.command in ("show", "update"):
        print(f"\nTop functions (self instructions per update, from the {N2:,}-update run):")
        for cost, function in top_functions(out2):
            print(f"  {cost / N2:9,.0f}  {function[:150]}")
    targets = ("callgrind-check", "callgrind-update")
    if args.command == "update":
        write_figure(FIGURE, f"{per_update:.1f} instructions per pipeline.token update",
                     [f"callgrind-token {N1} and {N2}, collected in runUpdates only"], targets, TOLERANCE_PERCENT)
    if args.command == "check" and not judge_figure(per_update, FIGURE, "pipeline.token", "update", targets,
                                                    TOLERANCE_PERCENT):
        sys.exit(1)

if __name__ == "__main__":
    main()
