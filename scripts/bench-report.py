#!/usr/bin/env python3
"""Turn package-benchmark's Markdown output into fanout's benchmark report (`make bench`).

    bench-report.py report --scaled S.md --raw R.md --out reports/benchmarks/DATE.md [--callgrind FILE]
    bench-report.py spread RUN1.md RUN2.md ...
    bench-report.py prune-thresholds Benchmarks/Thresholds

The input is `swift package benchmark baseline read NAME --format markdown` (S.md: figures scaled per
update, as package-benchmark prints them by default) and the same with `--scale` (R.md: raw figures
per iteration). Both are tables of p0 p25 p50 p75 p90 p99 p100 per metric and benchmark. The raw table
gives the exact allocation count per iteration; the ratio of the two wall-clock medians gives each
benchmark's scaling factor (1 or 1,000 updates per iteration), so mallocs per update keep their
fractions. `spread` prints, per benchmark, how much p50 and p90 of each metric moved between runs and
the wall-clock tolerance that follows (1.5 × the p90 spread, rounded up to 50%, at least 100%).
`prune-thresholds` drops throughput from the p90 files `thresholds update` writes: it is the reciprocal
of the wall clock of the same iterations, and its p90 would fail a quiet run as "better".
"""
import json
import argparse
import datetime
import math
import os
import re
import subprocess
import sys

PERCENTILES = ["p0", "p25", "p50", "p75", "p90", "p99", "p100"]
TIME_UNITS = {"ns": 1.0, "μs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
COUNT_UNITS = {"#": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}
STAGES = ["encode", "validate", "route", "apply", "pipeline.token"]


class ParseError(Exception):
    pass


def parse(path):
    """{(suite, benchmark): {"wallClock"|"mallocs"|"throughput": {"p50": value in ns or count, ...}}}."""
    results = {}
    suite = bench = None
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for number, line in enumerate(lines, 1):
        if line.startswith("## ") and not line.startswith("## Baseline"):
            suite, bench = line[3:].strip(), None
        elif line.startswith("### "):
            bench = line[4:].strip()
        elif line.startswith("|") and bench and suite:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 9 or cells[0] in ("Metric", "") or cells[0].startswith(":"):
                continue
            name = cells[0].rstrip("*").strip()
            try:
                values = [float(c) for c in cells[1:8]]
            except ValueError as e:
                raise ParseError(f"{path}:{number}: expected 7 numbers in {line!r}") from e
            key, factor = metric_key(name, path, number)
            if key is None:
                continue
            results.setdefault((suite, bench), {})[key] = {p: v * factor for p, v in zip(PERCENTILES, values)}
    if not results:
        raise ParseError(f"{path}: no benchmark tables found (expected package-benchmark --format markdown)")
    return results


def metric_key(name, path, number):
    units = re.findall(r"\(([^()]*)\)", name)
    if name.startswith("Time (wall clock)"):
        unit = units[-1] if units else "ns"
        if unit not in TIME_UNITS:
            raise ParseError(f"{path}:{number}: unknown time unit {unit!r}")
        return "wallClock", TIME_UNITS[unit]
    if name.startswith("Malloc (total)"):
        unit = units[-1] if len(units) > 1 else "#"
        return "mallocs", COUNT_UNITS.get(unit, 1.0)
    if name.startswith("cpuThread"):
        return "cpu", 1.0  # BenchSupport's thread CPU time, in ns (units: .count)
    if name.startswith("Throughput"):
        unit = units[-1] if len(units) > 1 else "#"
        return "throughput", COUNT_UNITS.get(unit, 1.0)
    return None, 1.0


def scaling_factor(scaled, raw):
    """Updates per iteration: raw and scaled wall clock differ by it (a power of ten)."""
    s, r = scaled["wallClock"]["p50"], raw["wallClock"]["p50"]
    if s <= 0 or r <= 0:
        return 1
    return 10 ** (3 * round(math.log10(r / s) / 3))  # package-benchmark's factors: 1, 1,000, 10⁶


def fmt_time(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e4:
        return f"{ns / 1e3:.1f} µs"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def fmt_count(x):
    if abs(x - round(x)) < 1e-9:
        return f"{int(round(x)):,}"
    return f"{x:,.3f}"


def git(*args):
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def report(args):
    scaled, raw = parse(args.scaled), parse(args.raw)
    rows = {}
    for key, metrics in scaled.items():
        if key not in raw or "wallClock" not in metrics or "mallocs" not in raw[key]:
            raise ParseError(f"{key[0]}:{key[1]} is missing from {args.raw} or lacks wall clock / mallocs")
        factor = scaling_factor(metrics, raw[key])
        rows[key] = {
            "factor": factor,
            "wall": metrics["wallClock"],
            "cpu": metrics.get("cpu", {p: float("nan") for p in PERCENTILES}),
            "mallocs": {p: v / factor for p, v in raw[key]["mallocs"].items()},
        }
    core = {b: r for (s, b), r in rows.items() if s == "Core"}
    peer = {b: r for (s, b), r in rows.items() if s == "Peer"}
    loop = {b: r for (s, b), r in rows.items() if s == "Loop"}

    out = []
    today = args.date or datetime.date.today().isoformat()
    out.append(f"# Benchmarks — {today}\n")
    out.append(
        f"Commit `{git('rev-parse', '--short', 'HEAD')}`"
        f"{' (with local changes)' if git('status', '--porcelain') else ''}"
        f", {args.host or os.uname().nodename}, {os.cpu_count()} cores, load average {args.load or '?'} "
        f"at the start. Made by `make bench` (package-benchmark 1.38.1, release build). Figures are per update "
        f"(per timer, wakeup, sample, trace line) unless a table says per iteration; the machine is shared, so "
        f"medians move between runs (see `Benchmarks/README.md`), while malloc counts and the callgrind figure "
        f"repeat exactly.\n")

    out.append("## Targets (issue 5)\n")
    out.append("| target | measured | met |")
    out.append("|---|---|---|")
    token = core.get("pipeline.token")
    if token:
        p50, cpu = token["wall"]["p50"], token["cpu"]["p50"]
        out.append(f"| `pipeline.token` median ≤ 300 ns | {fmt_time(p50)} wall clock, {fmt_time(cpu)} thread CPU | "
                   f"{'yes' if p50 <= 300 else 'no'} |")
        m = token["mallocs"]["p100"]
        out.append(f"| `pipeline.token` 0 mallocs per update | {fmt_count(m)} (max) | {'yes' if m == 0 else 'no'} |")
    if token and "peer.pipeline.token" in peer:
        ratio = peer["peer.pipeline.token"]["wall"]["p50"] / token["wall"]["p50"]
        cpu_ratio = peer["peer.pipeline.token"]["cpu"]["p50"] / token["cpu"]["p50"]
        out.append(f"| ≥ 50× faster than `peer.pipeline.token` (same run) | {ratio:.1f}× wall clock, "
                   f"{cpu_ratio:.1f}× thread CPU | {'yes' if ratio >= 50 else 'no'} |")
    for kind in ("timers", "wakeups"):
        swift, c = loop.get(f"{kind}.uvloop"), loop.get(f"{kind}.libuv")
        if swift and c:
            overhead = (swift["wall"]["p50"] - c["wall"]["p50"]) / c["wall"]["p50"] * 100
            cpu = (swift["cpu"]["p50"] - c["cpu"]["p50"]) / c["cpu"]["p50"] * 100
            out.append(f"| UVLoop overhead over raw libuv ≤ 10%: {kind} ({fmt_time(swift['wall']['p50'])} vs "
                       f"{fmt_time(c['wall']['p50'])}) | {overhead:+.1f}% wall clock, {cpu:+.1f}% thread CPU | "
                       f"{'yes' if overhead <= 10 else 'no'} |")
    hot = [b for b in ("encode", "validate", "route", "apply", "pipeline.token", "pipeline.broadcast10k")
           if b in core]
    allocating = [b for b in hot if core[b]["mallocs"]["p100"] != 0]
    out.append(f"| hot path allocates nothing ({', '.join(hot)}) | "
               f"{'none allocates' if not allocating else ', '.join(allocating) + ' allocate'} | "
               f"{'yes' if not allocating else 'no'} |")
    if args.callgrind and os.path.exists(args.callgrind):
        with open(args.callgrind, encoding="utf-8") as f:
            figure = f.readline().split()[0]
        out.append(f"| instructions per `pipeline.token` update (callgrind, committed figure) | {figure} | — |")
    out.append("")

    out.append("## fanout / peer, per stage (medians per update, same run)\n")
    out.append("Wall clock includes time spent waiting for a core (iterations of 0.5 ms are rarely preempted, the "
               "peer's of 20–60 ms always are); thread CPU time does not.\n")
    out.append("| stage | fanout wall | peer wall | peer / fanout (wall) | fanout CPU | peer CPU | "
               "peer / fanout (CPU) | fanout mallocs | peer mallocs |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for stage in STAGES:
        f, p = core.get(stage), peer.get("peer." + stage)
        if not f or not p:
            continue
        out.append(f"| {stage} | {fmt_time(f['wall']['p50'])} | {fmt_time(p['wall']['p50'])} | "
                   f"{p['wall']['p50'] / f['wall']['p50']:.1f}× | {fmt_time(f['cpu']['p50'])} | "
                   f"{fmt_time(p['cpu']['p50'])} | {p['cpu']['p50'] / f['cpu']['p50']:.1f}× | "
                   f"{fmt_count(f['mallocs']['p50'])} | {fmt_count(p['mallocs']['p50'])} |")
    out.append("")

    out.append("## Every benchmark\n")
    out.append("Medians and p99 of the iterations; \"op\" is one update (timer, wakeup, sample, trace line) of the "
               "1,000 an iteration runs.\n")
    for suite in ("Core", "Peer", "Metrics", "Loop"):
        keys = sorted(k for k in rows if k[0] == suite)
        if not keys:
            continue
        out.append(f"### {suite}\n")
        out.append("| benchmark | figures per | wall clock p50 | wall clock p99 | CPU p50 | CPU p99 | mallocs p50 "
                   "| mallocs p99 | rate (p50) |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for key in keys:
            r = rows[key]
            per = "op (iteration ÷ 1,000)" if r["factor"] == 1000 else "iteration"
            rate = 1e9 / r["wall"]["p50"] if r["wall"]["p50"] else 0
            unit = "lines/s" if key[1] == "replay" else "/s"
            out.append(f"| {key[1]} | {per} | {fmt_time(r['wall']['p50'])} | {fmt_time(r['wall']['p99'])} | "
                       f"{fmt_time(r['cpu']['p50'])} | {fmt_time(r['cpu']['p99'])} | "
                       f"{fmt_count(r['mallocs']['p50'])} | {fmt_count(r['mallocs']['p99'])} | "
                       f"{rate:,.0f} {unit} |")
        out.append("")

    text = "\n".join(out)
    tmp = args.out + ".tmp"
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, args.out)
    print(text)
    print(f"\nwrote {args.out}")


def spread(args):
    runs = [parse(p) for p in args.runs]
    keys = sorted(set().union(*runs))
    print(f"{len(runs)} runs: min / max of each percentile and (max − min) / min")
    print(f"{'benchmark':38} {'metric':10} {'p50 min':>10} {'p50 max':>10} {'p50 Δ':>7} "
          f"{'p90 min':>10} {'p90 max':>10} {'p90 Δ':>8}")
    for key in keys:
        for metric in ("wallClock", "cpu", "throughput", "mallocs"):
            values = [r[key][metric] for r in runs if key in r and metric in r[key]]
            if not values:
                continue
            cols = []
            for p in ("p50", "p90"):
                lo, hi = min(v[p] for v in values), max(v[p] for v in values)
                cols += [lo, hi, (hi - lo) / lo * 100 if lo else 0.0]
            tolerance = ""
            if metric in ("wallClock", "cpu"):
                tolerance = f"  → tolerance {max(100, math.ceil(1.5 * cols[5] / 50) * 50)}%"
            print(f"{key[0] + ':' + key[1]:38} {metric:10} {cols[0]:10.0f} {cols[1]:10.0f} {cols[2]:6.0f}% "
                  f"{cols[3]:10.0f} {cols[4]:10.0f} {cols[5]:7.0f}%{tolerance}")


def prune_thresholds(args):
    names = sorted(n for n in os.listdir(args.directory) if n.endswith(".p90.json"))
    if not names:
        raise ParseError(f"{args.directory}: no .p90.json threshold files")
    for name in names:
        path = os.path.join(args.directory, name)
        with open(path, encoding="utf-8") as f:
            thresholds = json.load(f)
        thresholds.pop("throughput", None)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(thresholds, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(path + ".tmp", path)
    print(f"{len(names)} threshold files in {args.directory}: throughput dropped, the other metrics kept")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("report")
    r.add_argument("--scaled", required=True)
    r.add_argument("--raw", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--callgrind")
    r.add_argument("--date")
    r.add_argument("--host")
    r.add_argument("--load")
    s = sub.add_parser("spread")
    s.add_argument("runs", nargs="+")
    t = sub.add_parser("prune-thresholds")
    t.add_argument("directory")
    args = ap.parse_args()
    try:
        {"report": report, "spread": spread, "prune-thresholds": prune_thresholds}[args.command](args)
    except (ParseError, OSError) as e:
        print(f"bench-report: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
