#!/usr/bin/env python3
"""Instructions per delivery of the engine users run, counted by callgrind (deterministic).

    callgrind-engine.py show     # measure, print the figures and the top functions
    callgrind-engine.py check    # measure; fail if instructions per delivery moved beyond ±2% of the
                                 # committed figure, or if writing the run folder grew with the samples
    callgrind-engine.py update   # measure and write the committed figure (re-baseline)

Runs `fanout run smoke --workers 1 --duration D` (virtual time: a pure function of scenario and seed)
under `valgrind --tool=callgrind` for D = 20 and 60 simulated seconds and divides the difference in
instructions by the difference in deliveries: start-up, population and report writing cancel out
(the fixed cost is what is left at D = 20). Report writing (`RunFiles.all`, every file of the run
folder) is counted on its own in both runs: it must not grow with the number of samples (the 60-s run
has 3.1× the samples of the 20-s one; in proportion it would grow 200%). The check allows 20%: the
`.hgrm` files list 5 percentile steps per halving of the tail, so they grow with the logarithm of the
count, and a longer run touches more histogram indices (at most 33,792 per metric).
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind_common import ROOT, annotate, judge_figure, run, write_figure  # noqa: E402

FIGURE = os.path.join(ROOT, "Benchmarks", "Thresholds", "callgrind.engine.smoke.txt")
OUT_DIR = os.path.join(ROOT, ".build", "callgrind-engine")
D1, D2 = 20, 60
TOLERANCE_PERCENT = 2.0
REPORT_GROWTH_PERCENT = 20.0
REPORT_FUNCTION = "RunFiles"  # the `RunFiles.all` symbol: every file of a run folder


def build():
    swift = os.environ.get("SWIFT", "swift")
    run([swift, "build", "-c", "release", "--product", "fanout"], cwd=ROOT, stdout=subprocess.DEVNULL)
    path = run([swift, "build", "-c", "release", "--show-bin-path"], cwd=ROOT, capture_output=True).stdout.strip()
    return os.path.join(path, "fanout")


def measure_run(binary, duration):
    out = os.path.join(OUT_DIR, f"smoke.{duration}.out")
    folder = os.path.join(OUT_DIR, f"smoke-{duration}")
    env = dict(os.environ, SWIFT_DETERMINISTIC_HASHING="1")
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, "run", "smoke", "--workers", "1",
         "--duration", str(duration), "--out", folder], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"callgrind-engine: `fanout run smoke --duration {duration}` failed under valgrind "
                         f"(status {proc.returncode})")
    match = re.search(r"Collected : (\d+)", proc.stderr)
    if not match:
        raise SystemExit(f"callgrind-engine: no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
    with open(os.path.join(folder, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    deliveries = summary["counts"]["deliveries"]
    samples = sum(m["count"] for m in summary["latency"].values())
    return int(match.group(1)), deliveries, samples, report_instructions(out), out


def report_instructions(out_file):
    """Inclusive instructions of `RunFiles.all` (rendering every file of the run folder)."""
    for cost, function in annotate(out_file, inclusive=True):
        if re.search(r"static RunFiles\.all\(", function):
            return cost
    raise SystemExit("callgrind-engine: no RunFiles.all in the profile (was the function renamed?)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["show", "check", "update"])
    args = ap.parse_args()
    os.makedirs(OUT_DIR, exist_ok=True)
    binary = build()
    i1, d1, s1, r1, _ = measure_run(binary, D1)
    i2, d2, s2, r2, out2 = measure_run(binary, D2)
    per_delivery = (i2 - i1) / (d2 - d1)
    fixed = i1 - per_delivery * d1
    growth = (r2 - r1) / r1 * 100
    print(f"engine: smoke --workers 1: {i1:,} instructions for {d1:,} deliveries ({D1} s), "
          f"{i2:,} for {d2:,} ({D2} s)")
    print(f"engine: {per_delivery:,.1f} instructions per delivery (Δ instructions / Δ deliveries); "
          f"fixed cost {fixed / 1e9:.3f} G instructions")
    print(f"engine: report writing {r1:,} instructions for {s1:,} samples, {r2:,} for {s2:,} "
          f"({growth:+.2f}%, allowed +{REPORT_GROWTH_PERCENT:g}%)")
    if args.command in ("show", "update"):
        print(f"\nTop functions (self instructions per delivery, from the {D2}-s run):")
        for cost, function in annotate(out2, inclusive=False)[:15]:
            print(f"  {cost / d2:9,.1f}  {function[:150]}")
    targets = ("engine-callgrind-check", "engine-callgrind-update")
    if args.command == "update":
        write_figure(FIGURE, f"{per_delivery:.1f} instructions per delivery of `fanout run smoke --workers 1`",
                     [f"--duration {D1} and {D2} (virtual time); fixed cost {fixed / 1e9:.3f} G; report writing "
                      f"{r1:,} and {r2:,} instructions"], targets, TOLERANCE_PERCENT)
    if args.command == "check":
        failed = not judge_figure(per_delivery, FIGURE, "the engine", "delivery", targets, TOLERANCE_PERCENT)
        if growth > REPORT_GROWTH_PERCENT:
            print(f"engine-callgrind-check FAILED: writing the run folder grew {growth:+.2f}% with "
                  f"{s2 / s1:.1f}× the samples (allowed +{REPORT_GROWTH_PERCENT:g}%): a report must cost the same "
                  "whatever the number of samples.")
            failed = True
        else:
            print(f"engine-callgrind-check passed: report writing {growth:+.2f}% for {s2 / s1:.1f}× the samples")
        if failed:
            sys.exit(1)


if __name__ == "__main__":
    main()
